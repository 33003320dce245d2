"""The pure rules under the controllers, table-driven: surge/unavailability fenceposts, how far a
new ReplicaSet may grow, template hashes and equality, revisions, conditions, deletion ranking,
toleration matching, flag parsing."""

from __future__ import annotations

import re
from typing import Any

import pytest

from api.taints import matching_tolerations, tolerates_taint
from component.flags import parse_duration
from services.controller_manager import rollout as ro
from services.controller_manager.manager import CONTROLLERS, ManagerOptions, enabled_controllers
from services.controller_manager.pod_state import is_active, is_available, rank_for_deletion
from services.controller_manager.replication import (
    REPLICATIONCONTROLLER,
    pod_from_template,
)
from services.controller_manager.taint_eviction import min_toleration_seconds


def deployment(
    replicas: int, surge: Any = "25%", unavailable: Any = "25%", type_: str = "RollingUpdate"
) -> dict[str, Any]:
    strategy: dict[str, Any] = {"type": type_}
    if type_ == "RollingUpdate":
        strategy["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    return {"metadata": {"generation": 1}, "spec": {"replicas": replicas, "strategy": strategy}}


def rs(replicas: int, available: int = 0) -> dict[str, Any]:
    return {"spec": {"replicas": replicas}, "status": {"availableReplicas": available}}


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        ("25%", "25%", 10, (3, 2)),  # surge rounds up, unavailable down
        ("25%", "25%", 1, (1, 0)),
        (0, 0, 5, (0, 1)),  # both zero: one may be unavailable, or nothing could move
        ("0%", "0%", 5, (0, 1)),
        (2, 1, 4, (2, 1)),
        ("50%", "10%", 3, (2, 0)),
    ],
)
def test_resolve_fenceposts(
    surge: Any, unavailable: Any, desired: int, expected: tuple[int, int]
) -> None:
    assert ro.resolve_fenceposts(surge, unavailable, desired) == expected


def test_max_unavailable_is_capped_and_zero_for_recreate() -> None:
    assert ro.max_unavailable(deployment(3, 0, 5)) == 3
    assert ro.max_unavailable(deployment(3, type_="Recreate")) == 0
    assert ro.max_surge(deployment(3, type_="Recreate")) == 0
    assert ro.max_unavailable(deployment(0)) == 0


@pytest.mark.parametrize(
    ("d", "others", "new", "expected"),
    [
        (deployment(4, 1, 1), [rs(4)], rs(0), 1),  # 4 + 1 surge = 5 pods at most
        (deployment(4, 1, 1), [rs(3)], rs(1), 2),
        (deployment(4, 1, 1), [rs(4)], rs(1), 1),  # at the ceiling: no growth
        (deployment(4, 2, 0), [rs(4)], rs(0), 2),
        (deployment(4, 10, 0), [rs(4)], rs(0), 4),  # never beyond replicas
        (deployment(4, type_="Recreate"), [rs(4)], rs(0), 4),
    ],
)
def test_new_rs_new_replicas(
    d: dict[str, Any], others: list[dict[str, Any]], new: dict[str, Any], expected: int
) -> None:
    assert ro.new_rs_new_replicas(d, [*others, new], new) == expected


def test_conservative_availability_never_counts_more_than_the_spec() -> None:
    scaled_down_but_stale = rs(2, available=3)
    assert ro.available_replicas([scaled_down_but_stale, rs(1, 1)]) == 4
    assert ro.available_replicas([scaled_down_but_stale, rs(1, 1)], conservative=True) == 3


def template(image: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web", **labels}},
        "spec": {"containers": [{"name": "c", "image": image}]},
    }


def test_pod_template_hash_is_stable_safe_and_ignores_the_hash_label() -> None:
    h = ro.pod_template_hash(template("nginx"))
    assert re.fullmatch(r"[bcdfghjklmnpqrstvwxz2456789]{1,10}", h)
    assert ro.pod_template_hash(template("nginx", **{"pod-template-hash": h})) == h
    assert ro.pod_template_hash(template("busybox")) != h
    assert ro.pod_template_hash(template("nginx"), 1) != h  # a collision moves the name


def test_template_equality_reads_null_and_empty_as_absent() -> None:
    a = template("nginx", **{"pod-template-hash": "abc"})
    b = template("nginx")
    b["metadata"]["creationTimestamp"] = None
    b["spec"]["volumes"] = []
    assert ro.equal_ignoring_hash(a, b)
    assert not ro.equal_ignoring_hash(a, template("busybox"))


def test_set_condition_keeps_transition_time_when_only_the_reason_changes() -> None:
    status: dict[str, Any] = {}
    first = {
        **ro.new_condition("Progressing", "True", ro.RS_UPDATED, "x"),
        "lastTransitionTime": "T0",
    }
    ro.set_condition(status, first)
    ro.set_condition(status, ro.new_condition("Progressing", "True", ro.NEW_RS_AVAILABLE, "y"))
    (cond,) = status["conditions"]
    assert cond["reason"] == ro.NEW_RS_AVAILABLE and cond["lastTransitionTime"] == "T0"
    ro.set_condition(status, ro.new_condition("Progressing", "True", ro.NEW_RS_AVAILABLE, "z"))
    assert status["conditions"][0]["message"] == "y", "same status and reason: no change"


def test_deployment_complete_needs_every_count_and_the_generation() -> None:
    d = deployment(3)
    done = {"updatedReplicas": 3, "replicas": 3, "availableReplicas": 3, "observedGeneration": 1}
    assert ro.deployment_complete(d, done)
    assert not ro.deployment_complete(d, {**done, "replicas": 4})
    assert not ro.deployment_complete(d, {**done, "observedGeneration": 0})


def pod(
    name: str,
    *,
    node: str = "",
    phase: str = "Running",
    ready: bool = True,
    created: str = "2026-01-01T00:00:00Z",
    restarts: int = 0,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"nodeName": node},
        "status": {
            "phase": phase,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": created,
                }
            ],
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
        },
    }


def test_deletion_rank_prefers_unscheduled_pending_unready_crowded_newer() -> None:
    pods = [
        pod("running-old", node="n1", created="2026-01-01T00:00:00Z"),
        pod("running-new", node="n2", created="2026-01-02T00:00:00Z"),
        pod("unready", node="n2", ready=False),
        pod("pending", node="n1", phase="Pending", ready=False),
        pod("unscheduled", phase="Pending", ready=False),
    ]
    order = [p["metadata"]["name"] for p in rank_for_deletion(pods)]
    assert order[:3] == ["unscheduled", "pending", "unready"]
    crowded = [pod("alone", node="a"), pod("crowd1", node="b"), pod("crowd2", node="b")]
    assert rank_for_deletion(crowded)[0]["metadata"]["name"].startswith("crowd")
    restarts = [pod("calm", node="a"), pod("flaky", node="b", restarts=5)]
    assert rank_for_deletion(restarts)[0]["metadata"]["name"] == "flaky"


def test_active_and_available() -> None:
    assert is_active(pod("p"))
    assert not is_active(pod("p", phase="Failed"))
    gone = pod("p")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not is_active(gone)
    assert is_available(pod("p"), min_ready_seconds=0)
    assert not is_available(pod("p", created="2999-01-01T00:00:00Z"), min_ready_seconds=10)


def test_pod_from_template_carries_labels_owner_and_generate_name() -> None:
    owner = {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
                "spec": {"containers": []},
            }
        },
    }
    body = pod_from_template(owner, REPLICATIONCONTROLLER.rt)
    assert body["metadata"]["generateName"] == "web-"
    assert body["metadata"]["labels"] == {"app": "web"}
    assert body["metadata"]["annotations"] == {"a": "b"}
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "ReplicationController", "name": "web", "uid": "u1",
         "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "k", "operator": "Exists"}, {"key": "k", "effect": "NoExecute"}, True),
        ({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "value": "v"}, {"key": "k", "value": "w", "effect": "NoSchedule"}, False),
        ({"operator": "Exists"}, {"key": "any", "effect": "NoExecute"}, True),
        (
            {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "k", "effect": "NoExecute"},
            False,
        ),
    ],
)
def test_toleration_matching(
    toleration: dict[str, Any], taint: dict[str, Any], expected: bool
) -> None:
    assert tolerates_taint(toleration, taint) is expected


def test_min_toleration_seconds() -> None:
    taints = [{"key": "a", "effect": "NoExecute"}, {"key": "b", "effect": "NoExecute"}]
    tolerations = [
        {"key": "a", "operator": "Exists", "tolerationSeconds": 30},
        {"key": "b", "operator": "Exists", "tolerationSeconds": 10},
    ]
    ok, used = matching_tolerations(taints, tolerations)
    assert ok and min_toleration_seconds(used) == 10
    ok, used = matching_tolerations(taints, tolerations[:1])
    assert not ok
    assert min_toleration_seconds([{"key": "a", "operator": "Exists"}]) is None  # forever
    assert min_toleration_seconds([{"tolerationSeconds": -5}]) == 0


def test_controllers_flag_and_durations() -> None:
    all_but_one = enabled_controllers(["*", "-nodelifecycle"])
    assert all_but_one == [name for name in CONTROLLERS if name != "nodelifecycle"]
    assert all_but_one[:3] == ["replicationcontroller", "replicaset", "deployment"]
    assert {"garbagecollector", "persistentvolume-binder", "disruption", "statefulset"} <= set(
        all_but_one
    )
    assert {"job", "ttl-after-finished"} <= set(all_but_one)
    assert enabled_controllers(["replicaset"]) == ["replicaset"]
    with pytest.raises(ValueError, match="unknown controller"):
        ManagerOptions(controllers=("bogus",))
    assert parse_duration("40s") == 40
    assert parse_duration("1m30s") == 90
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2.5") == 2.5
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration("soon")
