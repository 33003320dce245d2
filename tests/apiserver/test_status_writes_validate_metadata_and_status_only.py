"""A write through ``.../status`` is validated as Kubernetes' status strategies validate it: its
metadata and its status, not the spec it keeps from the stored object (``ValidatePodStatusUpdate``).

A bad status gets exactly the 422 causes a whole-object check gives (pydantic's shape errors,
and the status rules of Node and PodDisruptionBudget); a pod stored with a spec today's rules
refuse — written straight into the store, as by an older kubelite — still takes status writes,
while an update of the pod itself is refused for that spec.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from api.registry import REGISTRY
from tests.apiserver.conftest import Api
from tests.factories import node, pod_disruption_budget

PODS = "/api/v1/namespaces/default/pods"
POD_TYPE = REGISTRY.by_kind("", "Pod")
assert POD_TYPE is not None


def _invalid(field: str, message: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "message": message, "field": field}


@pytest.mark.parametrize(
    ("status", "causes"),
    [
        (
            {"phase": 3},
            [_invalid("status.phase", "Invalid value: 3: Input should be a valid string")],
        ),
        (
            {"conditions": [{"type": None, "status": "True"}], "hostIPs": "x"},
            [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value",
                    "field": "status.conditions[0].type",
                },
                _invalid("status.hostIPs", 'Invalid value: "x": Input should be a valid list'),
            ],
        ),
    ],
)
async def test_a_bad_pod_status_gets_its_causes(
    api: Api, status: dict[str, Any], causes: list[dict[str, str]]
) -> None:
    created = await api.create_pod("p")
    body = {**created, "status": {**created["status"], **status}}
    code, refused = await api.put(f"{PODS}/p/status", body)
    assert code == 422, refused
    assert refused["details"]["causes"] == causes
    assert await api.ok("GET", f"{PODS}/p") == created


async def test_a_node_status_with_a_duplicate_address_is_refused(api: Api) -> None:
    created = await api.ok("POST", "/api/v1/nodes", node("n1"))
    body = copy.deepcopy(created)
    address = {"type": "InternalIP", "address": "127.0.0.1"}
    body["status"]["addresses"] = [address, address]
    code, refused = await api.put("/api/v1/nodes/n1/status", body)
    assert code == 422, refused
    assert [(c["reason"], c["field"]) for c in refused["details"]["causes"]] == [
        ("FieldValueDuplicate", "status.addresses[1]")
    ]


async def test_a_disruption_budget_status_below_zero_is_refused(api: Api) -> None:
    budgets = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    created = await api.ok(
        "POST", budgets, pod_disruption_budget("b", selector={"app": "web"}, minAvailable=1)
    )
    body = {**created, "status": {**created.get("status", {}), "disruptionsAllowed": -1}}
    code, refused = await api.put(f"{budgets}/b/status", body)
    assert code == 422, refused
    assert refused["details"]["causes"] == [
        _invalid(
            "status.disruptionsAllowed", "Invalid value: -1: must be greater than or equal to 0"
        )
    ]


async def test_a_pod_stored_with_a_spec_now_refused_still_takes_status_writes(api: Api) -> None:
    stored = await api.create_pod("p")  # the defaulted form of a pod, with its status
    stored["metadata"] = {
        "name": "old",
        "namespace": "default",
        "uid": "0b1d6f52-0000-4000-8000-000000000002",
        "creationTimestamp": "2024-01-01T00:00:00Z",
    }
    stored["spec"]["restartPolicy"] = "Sometimes"  # never valid; stands for a rule added later
    await api.store.create(POD_TYPE.key("default", "old"), json.dumps(stored).encode())
    current = await api.ok("GET", f"{PODS}/old")

    written = await api.ok("PUT", f"{PODS}/old/status", {**current, "status": {"phase": "Running"}})
    assert written["status"]["phase"] == "Running"
    assert written["spec"] == current["spec"]

    relabelled = {**written, "metadata": {**written["metadata"], "labels": {"a": "b"}}}
    code, refused = await api.put(f"{PODS}/old", relabelled)
    assert code == 422, refused
    assert "spec.restartPolicy" in [c["field"] for c in refused["details"]["causes"]]
