"""What the controller-manager tests name and check: resource types, and predicates on objects.

* The controller-manager processes come from ``kubelite.testing`` (see ``conftest.py``), with
  Kubernetes' leader-election timings (15 s lease, 10 s renew deadline, 2 s retry period) and
  /healthz on a port of its choosing. The timings are deliberately not
  shortened: a leader that loses its lease exits, and with a 2 s renew deadline a loaded machine
  lost it in the middle of tests about something else. A test of a takeover awaits the Lease
  changing hands on a watch; after SIGTERM the lease is released and the standby takes it
  within a retry period, after SIGKILL the successor waits the 15 s lease out.
* States are awaited with ``kubelite.testing.waiting.Watcher``: an informer in the test
  process whose ``wait_until(predicate, what=...)`` re-evaluates ``predicate(objects)`` after
  every watch event — no sleeping, no polling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.registry import REGISTRY, ResourceType

Obj = dict[str, Any]


def rt(group: str, kind: str) -> ResourceType:
    found = REGISTRY.by_kind(group, kind)
    assert found is not None, kind
    return found


PODS = rt("", "Pod")
NODES = rt("", "Node")
RCS = rt("", "ReplicationController")
RSS = rt("apps", "ReplicaSet")
DEPLOYMENTS = rt("apps", "Deployment")
LEASES = rt("coordination.k8s.io", "Lease")
NAMESPACES = rt("", "Namespace")
EVENTS = rt("", "Event")


def active(pod: Obj) -> bool:
    """Counted by a replica set: not terminal, not being deleted."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    return not pod["metadata"].get("deletionTimestamp")


def owned_by(pod: Obj, owner: Obj) -> bool:
    uid = owner["metadata"]["uid"]
    return any(
        r.get("uid") == uid and r.get("controller")
        for r in pod["metadata"].get("ownerReferences") or []
    )


def ready(pod: Obj) -> bool:
    """The pod's Ready condition is True."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def ready_of(node: Obj) -> Obj | None:
    """The node's Ready condition."""
    return next(
        (c for c in (node.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"),
        None,
    )


UNREACHABLE = "node.kubernetes.io/unreachable"


def taints_of(node: Obj | None) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in ((node or {}).get("spec") or {}).get("taints") or []}


def tolerating_silence(seconds: int) -> list[Obj]:
    """Tolerations that let a pod stay ``seconds`` on an unreachable or not-ready node."""
    return [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
        for key in (UNREACHABLE, "node.kubernetes.io/not-ready")
    ]


def rolled_out(name: str, *, replicas: int) -> Callable[[list[Obj]], bool]:
    """What ``kubectl rollout status`` waits for."""

    def check(deployments: list[Obj]) -> bool:
        for d in deployments:
            if d["metadata"]["name"] != name:
                continue
            s = d.get("status") or {}
            return (
                s.get("observedGeneration", 0) >= d["metadata"]["generation"]
                and s.get("updatedReplicas", 0) == replicas
                and s.get("replicas", 0) == replicas
                and s.get("availableReplicas", 0) == replicas
            )
        return False

    return check
