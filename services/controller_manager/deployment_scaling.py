"""Scaling a Deployment's ReplicaSets: one at a time, or all of them in proportion.

Why a module of its own: both rollout strategies and a plain resize end in the same write —
set one ReplicaSet's ``spec.replicas`` and its ``desired-replicas``/``max-replicas``
annotations, and say so with a ``ScalingReplicaSet`` event ("Scaled up replica set NAME from A
to B"). A resize of a Deployment in the middle of a rollout (or paused) spreads the difference
over every active ReplicaSet in proportion to its size, as ``scale`` in
``pkg/controller/deployment/sync.go`` does: largest first, leftovers to the largest.

What it owns: ``ReplicaSetScaler.scale`` (one compare-and-swap on the cached resourceVersion)
and ``ReplicaSetScaler.resize`` (the proportional spread); the arithmetic of the spread is the
pure ``proportional_sizes``.

What it does not guarantee: a write decided on a stale cache fails with Conflict, which the
caller handles by retrying from a fresher cache; pods are not consulted when choosing sizes.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from api.registry import REGISTRY
from client.cache import object_key
from client.events import EventRecorder
from client.rest import ApiClient
from services.controller_manager import rollout as ro

__all__ = ["ReplicaSetScaler", "proportional_sizes", "saturated"]

log = logging.getLogger("services.controller_manager.deployment")

Obj = dict[str, Any]

RSS = REGISTRY.require("apps", "ReplicaSet")


def saturated(d: Obj, rs: Obj) -> bool:
    """``rs`` alone has all the Deployment's replicas, all of them available."""
    replicas = ro.spec_replicas(d)
    return (
        ro.desired_replicas_annotation(rs) == replicas
        and ro.spec_replicas(rs) == replicas
        and int((rs.get("status") or {}).get("availableReplicas") or 0) == replicas
    )


def _proportion(d: Obj, rs: Obj, *, to_add: int, added: int) -> int:
    size = ro.spec_replicas(rs)
    if size == 0 or to_add == 0 or to_add == added:
        return 0
    replicas = ro.spec_replicas(d)
    if replicas == 0:
        fraction = -size
    else:
        annotated = ro.max_replicas_annotation(rs) or int(
            (d.get("status") or {}).get("replicas") or 0
        )
        if annotated <= 0:
            fraction = 0
        else:
            fraction = round(size * (replicas + ro.max_surge(d)) / annotated) - size
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def proportional_sizes(d: Obj, active: list[Obj]) -> tuple[list[tuple[Obj, int]], int]:
    """The new size of each active ReplicaSet, in the order to write them, and the change in
    total (positive: grow).

    The total may reach ``replicas + maxSurge`` (0 when the Deployment is scaled to 0); each
    ReplicaSet takes its share by its ``max-replicas`` annotation; what rounding leaves over
    goes to the first (largest) one.
    """
    replicas = ro.spec_replicas(d)
    all_replicas = sum(ro.spec_replicas(rs) for rs in active)
    allowed = replicas + ro.max_surge(d) if replicas > 0 else 0
    to_add = allowed - all_replicas
    # larger first; among equals newer first when growing, older first when shrinking
    ordered = sorted(active, key=ro.creation_order, reverse=to_add > 0)
    ordered.sort(key=lambda rs: -ro.spec_replicas(rs))
    added = 0
    sizes: list[int] = []
    for rs in ordered:
        proportion = _proportion(d, rs, to_add=to_add, added=added) if to_add != 0 else 0
        sizes.append(ro.spec_replicas(rs) + proportion)
        added += proportion
    if ordered and to_add != 0:
        sizes[0] = max(0, sizes[0] + to_add - added)
    return list(zip(ordered, sizes, strict=True)), to_add


class ReplicaSetScaler:
    """Writes ReplicaSet sizes for one controller, with events in the Deployment's name."""

    def __init__(self, *, client: ApiClient, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder

    async def scale(
        self, d: Obj, rs: Obj, *, replicas: int, operation: str | None = None
    ) -> tuple[bool, Obj]:
        """Set ``rs`` to ``replicas``; whether its size changed, and the ReplicaSet as written."""
        current = ro.spec_replicas(rs)
        annotations_changed = ro.set_replicas_annotations(d, copy.deepcopy(rs))
        if current == replicas and not annotations_changed:
            return False, rs
        updated = copy.deepcopy(rs)
        updated["spec"]["replicas"] = replicas
        ro.set_replicas_annotations(d, updated)
        written: Obj = await self.client.update(RSS, updated)  # CAS on the cached resourceVersion
        if current != replicas:
            op = operation or ("up" if replicas > current else "down")
            name = rs["metadata"]["name"]
            self.recorder.event(
                d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled {op} replica set {name} from {current} to {replicas}",
            )
            log.info("deployment %s: scaled %s replica set %s from %d to %d",
                     object_key(d), op, name, current, replicas)  # fmt: skip
        return current != replicas, written

    async def resize(self, d: Obj, *, new_rs: Obj | None, old_rss: list[Obj]) -> None:
        """Resize without rolling (``scale`` in Kubernetes): a scaling event or a paused rollout."""
        replicas = ro.spec_replicas(d)
        olds = sorted(old_rss, key=ro.creation_order, reverse=True)
        active = ro.active([*olds, new_rs])
        if len(active) <= 1 and (new_rs is not None or olds):
            target = active[0] if active else (new_rs if new_rs is not None else olds[0])
            if (
                ro.spec_replicas(target) != replicas
                or ro.desired_replicas_annotation(target) != replicas
            ):
                await self.scale(d, target, replicas=replicas)
            return
        if new_rs is not None and saturated(d, new_rs):
            for old in ro.active(olds):
                await self.scale(d, old, replicas=0)
            return
        if ro.is_recreate(d):
            return
        sizes, to_add = proportional_sizes(d, active)
        for rs, size in sizes:
            await self.scale(d, rs, replicas=size, operation="up" if to_add > 0 else "down")
