"""A pod's status write (``PUT pods/NAME/status``, as a kubelet sends it: the whole pod as last
read, with a new status) changes only the status: the spec and labels it carries are ignored,
the creator's managedFields entry comes back exactly as it was, the writer's entry owns the
status fields it set; a status with a bad value is refused with 422 and nothing is stored, and
the same body is accepted once the value is fixed (nothing of the refused attempt lingers)."""

from __future__ import annotations

import copy

from tests.apiserver.conftest import Api

PODS = "/api/v1/namespaces/default/pods"


async def test_a_status_write_keeps_spec_and_the_creators_entry(api: Api) -> None:
    created = await api.ok("POST", f"{PODS}?fieldManager=creator", _pod("p"))
    body = copy.deepcopy(created)
    body["spec"]["containers"][0]["image"] = "sneaky:1"
    body["metadata"]["labels"] = {"sneaky": "yes"}
    body["status"] = {"phase": "Running", "podIP": "10.244.0.7", "podIPs": [{"ip": "10.244.0.7"}]}
    out = await api.ok("PUT", f"{PODS}/p/status?fieldManager=kubelet", body)
    assert out["spec"] == created["spec"]
    assert out["metadata"].get("labels") == created["metadata"].get("labels")
    creator, kubelet = out["metadata"]["managedFields"]
    assert creator == created["metadata"]["managedFields"][0]
    assert (kubelet["manager"], kubelet["subresource"]) == ("kubelet", "status")
    assert kubelet["fieldsV1"]["f:status"].keys() >= {"f:phase", "f:podIP", "f:podIPs"}
    assert await api.ok("GET", f"{PODS}/p") == out


async def test_a_bad_status_is_refused_and_the_fixed_one_accepted(api: Api) -> None:
    created = await api.create_pod("p")
    body = copy.deepcopy(created)
    body["status"] = {
        "phase": "Running",
        "containerStatuses": [{"name": "main", "restartCount": "x"}],
    }
    status, refused = await api.put(f"{PODS}/p/status", body)
    assert status == 422, refused
    assert (refused["kind"], refused["reason"], refused["details"]["name"]) == (
        "Status",
        "Invalid",
        "p",
    )
    assert any(c["field"].startswith("status.") for c in refused["details"]["causes"])
    stored = await api.ok("GET", f"{PODS}/p")
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    body["status"]["containerStatuses"][0]["restartCount"] = 0
    out = await api.ok("PUT", f"{PODS}/p/status", body)
    assert out["status"]["containerStatuses"][0]["restartCount"] == 0
    assert out["spec"] == created["spec"]


def _pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]},
    }
