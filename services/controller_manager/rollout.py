"""The arithmetic of a Deployment rollout: template hashes, surge and unavailability budgets,
revisions, conditions — pure functions over dicts, following ``pkg/controller/deployment/util``.

Why a module of its own: these rules are where a rollout is right or wrong (how many pods may
be added, how many removed, which ReplicaSet is "new", when a rollout counts as complete), and
they are easiest to trust when they can be tested without any server. ``deployment.py`` does
the I/O around them.

* ``pod_template_hash(template, collision_count)`` — FNV-32a over the canonical JSON of the
  template (plus the collision count), printed in decimal and spelled with Kubernetes'
  ``SafeEncodeString`` alphabet (no vowels, no look-alike digits): ``web-7d9c6b5f4``-style
  ReplicaSet names. The value differs from Kubernetes' own (which hashes Go's struct dump);
  its form and its role are the same.
* ``resolve_fenceposts`` — ``maxSurge`` rounds percentages up, ``maxUnavailable`` down, and
  both zero becomes ``maxUnavailable = 1``.
* ``new_rs_new_replicas`` — how far the new ReplicaSet may grow without exceeding
  ``replicas + maxSurge`` pods in all.
* revisions, ``desired-replicas``/``max-replicas`` annotations, and the Available/Progressing
  conditions with Kubernetes' reasons and messages.

Limits: annotation values are strings as on the wire; malformed ones read as absent.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from api.meta import now_time, parse_time

__all__ = [
    "ANNOTATIONS_TO_SKIP",
    "DESIRED_REPLICAS",
    "HASH_LABEL",
    "MAX_REPLICAS",
    "REVISION",
    "REVISION_HISTORY",
    "active",
    "annotations_for_write",
    "available_replicas",
    "creation_order",
    "deployment_complete",
    "deployment_progressing",
    "deployment_timed_out",
    "equal_ignoring_hash",
    "is_recreate",
    "max_surge",
    "max_unavailable",
    "new_rs_new_replicas",
    "pod_template_hash",
    "resolve_fenceposts",
    "revision",
    "set_condition",
    "set_replicas_annotations",
    "spec_replicas",
]

Obj = dict[str, Any]

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
ANNOTATIONS_TO_SKIP = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        REVISION_HISTORY,
        DESIRED_REPLICAS,
        MAX_REPLICAS,
        "deprecated.deployment.rollback.to",
    }
)
"""Deployment annotations never copied to its ReplicaSets (and back by ``rollout undo``)."""

# Reasons of the Deployment conditions (pkg/controller/deployment/util).
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
RS_UPDATED = "ReplicaSetUpdated"
TIMED_OUT = "ProgressDeadlineExceeded"
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
MIN_AVAILABLE = "MinimumReplicasAvailable"
MIN_UNAVAILABLE = "MinimumReplicasUnavailable"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"

_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


# -- hashing ---------------------------------------------------------------------------------


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def _drop_nulls(value: Any) -> Any:
    """``null``, ``{}`` and ``[]`` read as absent, as Kubernetes' semantic equality of Go
    structs has it (kubectl sends template ``creationTimestamp: null``)."""
    if isinstance(value, dict):
        out = {k: _drop_nulls(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _without_hash(template: Obj | None) -> Obj:
    t: Obj = _drop_nulls(copy.deepcopy(template or {}))
    labels = (t.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    return t


def pod_template_hash(template: Obj | None, collision_count: int | None = None) -> str:
    data = json.dumps(_without_hash(template), sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += collision_count.to_bytes(4, "little")
    return "".join(_SAFE_ALPHANUMS[ord(c) % len(_SAFE_ALPHANUMS)] for c in str(_fnv32a(data)))


def equal_ignoring_hash(a: Obj | None, b: Obj | None) -> bool:
    """Pod templates equal once the ``pod-template-hash`` label is ignored."""
    return _without_hash(a) == _without_hash(b)


# -- budgets ---------------------------------------------------------------------------------


def spec_replicas(obj: Obj) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


def _status_int(obj: Obj | None, field: str) -> int:
    return int(((obj or {}).get("status") or {}).get(field) or 0)


IntOrString = int | str
"""``maxSurge``/``maxUnavailable``: a count, or a percentage of the desired replicas."""


def _scaled(value: IntOrString | None, total: int, *, round_up: bool) -> int:
    """IntOrString: an int as is, ``"25%"`` of ``total`` rounded up or down."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        percent = float(text[:-1])
        exact = percent * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text)


def _rolling(d: Obj) -> Obj | None:
    strategy = (d.get("spec") or {}).get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None
    return strategy.get("rollingUpdate") or {"maxSurge": "25%", "maxUnavailable": "25%"}


def resolve_fenceposts(
    max_surge_value: IntOrString | None, max_unavailable_value: IntOrString | None, desired: int
) -> tuple[int, int]:
    surge = _scaled(max_surge_value, desired, round_up=True)
    unavailable = _scaled(max_unavailable_value, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # otherwise nothing could ever change
    return surge, unavailable


def max_surge(d: Obj) -> int:
    rolling = _rolling(d)
    if rolling is None:
        return 0
    surge, _ = resolve_fenceposts(
        rolling.get("maxSurge", "25%"), rolling.get("maxUnavailable", "25%"), spec_replicas(d)
    )
    return surge


def max_unavailable(d: Obj) -> int:
    rolling = _rolling(d)
    replicas = spec_replicas(d)
    if rolling is None or replicas == 0:
        return 0
    _, unavailable = resolve_fenceposts(
        rolling.get("maxSurge", "25%"), rolling.get("maxUnavailable", "25%"), replicas
    )
    return min(unavailable, replicas)


def available_replicas(rss: Iterable[Obj | None], *, conservative: bool = False) -> int:
    """Sum of ``status.availableReplicas``.

    ``conservative`` caps each at its ``spec.replicas``: right after a ReplicaSet is scaled
    down its status still counts the pods it is about to delete, and a rollout that trusted
    that figure could take one step too many below ``replicas - maxUnavailable``.
    """
    total = 0
    for rs in rss:
        if rs is None:
            continue
        available = _status_int(rs, "availableReplicas")
        total += min(available, spec_replicas(rs)) if conservative else available
    return total


def new_rs_new_replicas(d: Obj, all_rss: Iterable[Obj | None], new_rs: Obj) -> int:
    """The size the new ReplicaSet may have now (``NewRSNewReplicas``)."""
    replicas = spec_replicas(d)
    if _rolling(d) is None:
        return replicas  # Recreate: all at once (once the old pods are gone)
    current = spec_replicas(new_rs)
    total = sum(spec_replicas(rs) for rs in all_rss if rs is not None)
    ceiling = replicas + max_surge(d)
    if total >= ceiling:
        return current
    grow = min(ceiling - total, replicas - current)
    return current + max(grow, 0)


def is_recreate(d: Obj) -> bool:
    return ((d.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate"


def active(rss: Iterable[Obj | None]) -> list[Obj]:
    """The ReplicaSets asked for at least one replica."""
    return [rs for rs in rss if rs is not None and spec_replicas(rs) > 0]


def creation_order(obj: Obj) -> tuple[str, str]:
    """Sort key: oldest first, ties broken by name."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


# -- revisions -------------------------------------------------------------------------------


def _annotation_int(obj: Obj | None, key: str) -> int | None:
    value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def revision(rs: Obj | None) -> int:
    return _annotation_int(rs, REVISION) or 0


def annotations_for_write(obj: Obj) -> dict[str, str]:
    """The object's annotations, created empty if absent, to be written into."""
    annotations: dict[str, str] = obj.setdefault("metadata", {}).setdefault("annotations", {})
    return annotations


def set_replicas_annotations(d: Obj, rs: Obj) -> bool:
    """Stamp ``desired-replicas`` and ``max-replicas`` of ``d`` on ``rs``; whether they changed."""
    annotations = annotations_for_write(rs)
    desired = str(spec_replicas(d))
    most = str(spec_replicas(d) + max_surge(d))
    if annotations.get(DESIRED_REPLICAS) == desired and annotations.get(MAX_REPLICAS) == most:
        return False
    annotations[DESIRED_REPLICAS] = desired
    annotations[MAX_REPLICAS] = most
    return True


def desired_replicas_annotation(rs: Obj) -> int | None:
    return _annotation_int(rs, DESIRED_REPLICAS)


def max_replicas_annotation(rs: Obj) -> int | None:
    return _annotation_int(rs, MAX_REPLICAS)


# -- completeness and conditions -------------------------------------------------------------


def deployment_complete(d: Obj, status: Obj) -> bool:
    replicas = spec_replicas(d)
    return (
        int(status.get("updatedReplicas") or 0) == replicas
        and int(status.get("replicas") or 0) == replicas
        and int(status.get("availableReplicas") or 0) == replicas
        and int(status.get("observedGeneration") or 0) >= int(d["metadata"].get("generation") or 0)
    )


def deployment_progressing(d: Obj, status: Obj) -> bool:
    old = d.get("status") or {}

    def g(s: Obj, f: str) -> int:
        return int(s.get(f) or 0)

    old_old = g(old, "replicas") - g(old, "updatedReplicas")
    new_old = g(status, "replicas") - g(status, "updatedReplicas")
    return (
        g(status, "updatedReplicas") > g(old, "updatedReplicas")
        or new_old < old_old
        or g(status, "readyReplicas") > g(old, "readyReplicas")
        or g(status, "availableReplicas") > g(old, "availableReplicas")
    )


def get_condition(status: Obj, type_: str) -> Obj | None:
    conditions: list[Obj] = status.get("conditions") or []
    for c in conditions:
        if c.get("type") == type_:
            return c
    return None


def deployment_timed_out(d: Obj, status: Obj, *, now: datetime | None = None) -> bool:
    deadline = (d.get("spec") or {}).get("progressDeadlineSeconds")
    if deadline is None:
        return False
    cond = get_condition(status, "Progressing")
    if cond is None or cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    since = cond.get("lastUpdateTime")
    if not since:
        return False
    now = now or datetime.now(UTC)
    return parse_time(since).timestamp() + int(deadline) < now.timestamp()


def new_condition(type_: str, status: str, reason: str, message: str) -> Obj:
    now = now_time()
    return {
        "type": type_,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def set_condition(status: Obj, condition: Obj) -> None:
    """``SetDeploymentCondition``: same status and reason is no change; same status keeps the
    transition time."""
    current = get_condition(status, condition["type"])
    if (
        current is not None
        and current.get("status") == condition["status"]
        and current.get("reason") == condition["reason"]
    ):
        return
    if current is not None and current.get("status") == condition["status"]:
        condition = {**condition, "lastTransitionTime": current.get("lastTransitionTime")}
    remove_condition(status, condition["type"])
    status.setdefault("conditions", []).append(condition)


def remove_condition(status: Obj, type_: str) -> None:
    kept = [c for c in status.get("conditions") or [] if c.get("type") != type_]
    if kept:
        status["conditions"] = kept
    else:
        status.pop("conditions", None)
