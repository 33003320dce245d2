"""How the controllers read a pod's state: active, ready, available, and which to delete first.

Why: the replica-set, deployment and node-lifecycle controllers all ask the same questions of
a pod dict from the informer, and Kubernetes answers them in ``pkg/controller`` and
``pkg/api/v1/pod`` in one precise way each:

* **active** — not ``Succeeded``/``Failed`` and no ``deletionTimestamp``: the pods a replica
  set counts (a failed pod is replaced; a terminating one no longer counts, so its replacement
  starts while it shuts down);
* **ready** — the ``Ready`` condition is ``True``; **available** — ready for at least
  ``minReadySeconds`` (by the condition's ``lastTransitionTime``, wall clock, as Kubernetes);
* **deletion order** (``ActivePodsWithRanks``) when scaling down — unscheduled before
  scheduled, Pending before Unknown before Running, not-ready before ready, pods doubled up
  on a node with their siblings first, ready for less time first, more restarts first, newer
  first.

Limits: times on the wire have whole seconds, so "newer" ties are broken by name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from api.meta import parse_time

__all__ = [
    "is_active",
    "is_available",
    "is_ready",
    "rank_for_deletion",
    "ready_condition",
]

Obj = Mapping[str, Any]
_Pod = TypeVar("_Pod", bound=Obj)

_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def is_active(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return False
    return not (pod.get("metadata") or {}).get("deletionTimestamp")


def ready_condition(pod: Obj) -> Mapping[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond
    return None


def is_ready(pod: Obj) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def _timestamp(value: Any) -> float:
    if not value:
        return 0.0
    try:
        return parse_time(str(value)).timestamp()
    except ValueError:
        return 0.0


def is_available(pod: Obj, *, min_ready_seconds: int, now: datetime | None = None) -> bool:
    """Ready, and (with ``min_ready_seconds``) ready for at least that long."""
    cond = ready_condition(pod)
    if cond is None or cond.get("status") != "True":
        return False
    if min_ready_seconds <= 0:
        return True
    since = cond.get("lastTransitionTime")
    if not since:
        return False
    now_ts = (now or datetime.now(UTC)).timestamp()
    return _timestamp(since) + min_ready_seconds <= now_ts


def rank_for_deletion(pods: Iterable[_Pod], *, related: Iterable[Obj] = ()) -> list[_Pod]:
    """``pods`` sorted so that the ones to delete first come first.

    ``related`` are pods of sibling controllers (the other ReplicaSets of a Deployment): a pod
    on a node crowded with its relatives ranks earlier, so scale-downs spread pods out.
    """
    ranked = list(pods)
    on_node: Counter[str] = Counter()
    everyone: list[Obj] = [*ranked, *related]
    for p in everyone:
        node = (p.get("spec") or {}).get("nodeName")
        if node and is_active(p):
            on_node[node] += 1

    def key(p: Obj) -> tuple[Any, ...]:
        meta, spec, status = p.get("metadata") or {}, p.get("spec") or {}, p.get("status") or {}
        node = spec.get("nodeName") or ""
        ready = is_ready(p)
        cond = ready_condition(p) or {}
        restarts = sum(
            int(cs.get("restartCount") or 0)
            for cs in status.get("containerStatuses") or []
            if isinstance(cs, Mapping)
        )
        return (
            1 if node else 0,
            _PHASE_ORDER.get(str(status.get("phase")), 3),
            1 if ready else 0,
            -on_node[node] if node else 0,
            -_timestamp(cond.get("lastTransitionTime")) if ready else 0.0,
            -restarts,
            -_timestamp(meta.get("creationTimestamp")),
            str(meta.get("name") or ""),
        )

    return sorted(ranked, key=key)
