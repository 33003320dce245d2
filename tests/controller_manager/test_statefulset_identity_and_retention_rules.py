"""The StatefulSet rules on their own (no processes): ordinals and their range with
``spec.ordinals.start``, a new pod's identity and storage, which revision a new pod gets under a
partition, ``maxUnavailable`` arithmetic, and the ownerReferences each retention policy asks of
an ordinal's claim."""

from __future__ import annotations

import pytest

from services.controller_manager.statefulset_claims import (
    claim_owners_match,
    has_stale_pod_ref,
    update_claim_owners,
)
from services.controller_manager.statefulset_control import max_unavailable
from services.controller_manager.statefulset_pods import (
    apply_revision,
    claims_for,
    identity_matches,
    in_ordinal_range,
    is_member,
    new_versioned_pod,
    ordinal_of,
    storage_matches,
)
from tests import factories
from tests.factories import Obj


def sts(**spec: object) -> Obj:
    body = factories.stateful_set("web", replicas=3, claim="data", **spec)
    body["metadata"].update(namespace="default", uid="set-uid")
    return body


def pod_named(name: str, uid: str = "") -> Obj:
    meta: Obj = {"name": name, "namespace": "default"}
    if uid:
        meta["uid"] = uid
    return {"metadata": meta, "spec": {}}


def test_ordinals_and_membership() -> None:
    s = sts(ordinals={"start": 5})
    assert ordinal_of(pod_named("web-7")) == 7
    assert ordinal_of(pod_named("web")) == -1
    assert is_member(s, pod_named("web-7")) and not is_member(s, pod_named("webby-7"))
    assert [in_ordinal_range(pod_named(f"web-{i}"), s) for i in (4, 5, 7, 8)] == [
        False,
        True,
        True,
        False,
    ]


def test_a_new_pod_has_its_identity_and_storage() -> None:
    s = sts()
    s["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    pod = new_versioned_pod(
        current_set=s, update_set=s, current_revision="web-a", update_revision="web-a", ordinal=1
    )
    meta = pod["metadata"]
    assert meta["name"] == "web-1" and meta["namespace"] == "default"
    assert meta["labels"] == {
        "app": "web",
        "statefulset.kubernetes.io/pod-name": "web-1",
        "apps.kubernetes.io/pod-index": "1",
        "controller-revision-hash": "web-a",
    }
    assert meta["ownerReferences"][0]["uid"] == "set-uid"
    assert pod["spec"]["hostname"] == "web-1" and pod["spec"]["subdomain"] == "web"
    # the template's own volume of the claim's name is replaced by the claim
    assert pod["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}}
    ]
    assert identity_matches(s, pod) and storage_matches(s, pod)
    renamed = {**pod, "metadata": {**meta, "labels": {"app": "web"}}}
    assert not identity_matches(s, renamed)
    claim = claims_for(s, 1)["data"]
    assert claim["metadata"]["name"] == "data-web-1"
    assert claim["metadata"]["labels"] == {"app": "web"}


@pytest.mark.parametrize(
    ("strategy", "status", "expected"),
    [
        ({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}, {}, ["old", "old", "new"]),
        ({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}, {}, ["new"] * 3),
        ({"type": "RollingUpdate"}, {"currentReplicas": 1}, ["old", "new", "new"]),
        ({"type": "OnDelete"}, {"currentReplicas": 3}, ["new"] * 3),
    ],
)
def test_which_revision_a_new_pod_gets(strategy: Obj, status: Obj, expected: list[str]) -> None:
    current = sts(updateStrategy=strategy)
    current["status"] = status
    update = apply_revision(
        current,
        {"data": {"spec": {"template": {"$patch": "replace", "metadata": {"labels": {"app": "web"}},
                                        "spec": {"containers": [{"name": "app", "image": "new"}]}}}}},
    )  # fmt: skip
    pods = [
        new_versioned_pod(
            current_set=current,
            update_set=update,
            current_revision="web-old",
            update_revision="web-new",
            ordinal=i,
        )
        for i in range(3)
    ]
    assert [p["metadata"]["labels"]["controller-revision-hash"][4:] for p in pods] == expected
    for pod, want in zip(pods, expected, strict=True):
        assert (pod["spec"]["containers"][0]["image"] == "new") == (want == "new")


@pytest.mark.parametrize(
    ("value", "replicas", "expected"),
    [(None, 5, 1), (2, 5, 2), ("50%", 5, 2), ("10%", 5, 1), (0, 5, 1)],
)
def test_max_unavailable(value: object, replicas: int, expected: int) -> None:
    rolling = {} if value is None else {"maxUnavailable": value}
    s = sts(updateStrategy={"type": "RollingUpdate", "rollingUpdate": rolling})
    s["spec"]["replicas"] = replicas
    assert max_unavailable(s) == expected


@pytest.mark.parametrize(
    ("when_scaled", "when_deleted", "in_range", "owners"),
    [
        ("Retain", "Retain", True, set()),
        ("Retain", "Retain", False, set()),
        ("Retain", "Delete", True, {"StatefulSet"}),
        ("Retain", "Delete", False, {"StatefulSet"}),
        ("Delete", "Retain", True, set()),
        ("Delete", "Retain", False, {"Pod"}),
        ("Delete", "Delete", True, {"StatefulSet"}),
        ("Delete", "Delete", False, {"Pod"}),
    ],
)
def test_claim_owners_per_retention_policy(
    when_scaled: str, when_deleted: str, in_range: bool, owners: set[str]
) -> None:
    s = sts(
        persistentVolumeClaimRetentionPolicy={
            "whenScaled": when_scaled,
            "whenDeleted": when_deleted,
        }
    )
    pod = pod_named("web-1" if in_range else "web-4", uid="pod-uid")
    claim = {"metadata": {"name": "data-web-x", "ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": "pod-uid"},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "set-uid"},
    ]}}  # fmt: skip
    update_claim_owners(claim, s, pod)
    assert {r["kind"] for r in claim["metadata"].get("ownerReferences") or []} == owners
    assert claim_owners_match(claim, s, pod)
    assert not update_claim_owners(claim, s, pod)  # nothing left to change
    for ref in claim["metadata"].get("ownerReferences") or []:
        assert "controller" not in ref  # plain references, as Kubernetes writes them


def test_a_claim_of_an_earlier_pod_of_the_name_is_stale() -> None:
    claim = {"metadata": {"ownerReferences": [{"kind": "Pod", "name": "web-4", "uid": "old"}]}}
    assert has_stale_pod_ref(claim, pod_named("web-4"))  # a pod about to be created
    assert not has_stale_pod_ref(claim, pod_named("web-4", uid="old"))
    assert not has_stale_pod_ref(claim, pod_named("web-3"))
