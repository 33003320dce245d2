"""A DaemonSet's RollingUpdate step: which old pods go and which nodes get a new pod now.

Why a module of its own: the update budget is the part of a DaemonSet rollout people rely on
("never more than one node without its agent"), and it is easiest to trust as a pure function
tested without a server. It follows ``rollingUpdate`` in ``pkg/controller/daemon/update.go``:

* ``budgets(ds, desired)``: ``maxUnavailable`` and ``maxSurge`` of the nodes that should run
  the pod, percentages rounded up; both zero means ``maxUnavailable = 1``.
* **Without surge** (``maxSurge = 0``) a node counts as unavailable when it has no pod, two
  pods, or a new pod that is not yet available. An old pod that is not available is replaced
  at once; available old pods are deleted while fewer than ``maxUnavailable`` nodes are
  unavailable. The manage step then creates the new pod on each emptied node.
* **With surge** a node whose old pod is available gets a new pod beside it while fewer than
  ``maxSurge`` nodes are surging; a node whose old pod is not available gets its new pod at
  once; once the new pod is available, the old one is deleted. An old pod on a node that should
  no longer run the DaemonSet is deleted.
* A node whose pods cannot be told apart (two new, or two old) is left to the manage step.

``plan(...)`` returns ``(pods_to_delete, nodes_to_create)``; the controller makes the calls.

Limits: availability is judged at the ``now`` passed in (``minReadySeconds`` by the Ready
condition's transition time, as Kubernetes); pods being deleted are ignored, as upstream.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from services.controller_manager.daemonset_placement import is_updated
from services.controller_manager.pod_state import is_available

__all__ = ["budgets", "plan", "split_node_pods"]

Obj = dict[str, Any]


def _scaled_up(value: Any, total: int) -> int:
    """IntOrString: an int as is, ``"25%"`` of ``total`` rounded up."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        return math.ceil(float(text[:-1]) * total / 100)
    return int(text)


def budgets(ds: Obj, desired: int) -> tuple[int, int]:
    """``(max_unavailable, max_surge)`` for ``desired`` nodes."""
    rolling = (((ds.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate")) or {}
    max_unavailable = _scaled_up(rolling.get("maxUnavailable", 1), desired)
    max_surge = _scaled_up(rolling.get("maxSurge"), desired)
    if desired > 0 and max_unavailable == 0 and max_surge == 0:
        max_unavailable = 1
    return max_unavailable, max_surge


def split_node_pods(
    pods: list[Obj], *, hash_: str, generation: int | None
) -> tuple[Obj | None, Obj | None, bool]:
    """``findUpdatedPodsOnNode``: (new pod, old pod, whether that is all there is)."""
    new: Obj | None = None
    old: Obj | None = None
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        if is_updated(pod, hash_, generation):
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


def plan(
    ds: Obj,
    node_pods: Mapping[str, list[Obj]],
    *,
    should_run: Collection[str],
    hash_: str,
    generation: int | None,
    now: datetime,
) -> tuple[list[Obj], list[str]]:
    """One rolling-update step over ``node_pods`` (every node that should run the pod, with
    ``[]`` for none, plus nodes that still have pods): ``(pods_to_delete, nodes_to_create)``."""
    min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
    max_unavailable, max_surge = budgets(ds, len(should_run))

    def available(pod: Obj) -> bool:
        return is_available(pod, min_ready_seconds=min_ready, now=now)

    nodes = sorted(node_pods)  # a stable order: the same nodes go first on every sync
    if max_surge == 0:
        unavailable = 0
        replace: list[Obj] = []
        candidates: list[Obj] = []
        for node in nodes:
            new, old, ok = split_node_pods(node_pods[node], hash_=hash_, generation=generation)
            if not ok or (new is None) == (old is None):
                unavailable += 1  # the manage step creates or deletes here
            elif new is not None:
                unavailable += 0 if available(new) else 1
            elif old is not None and not available(old):
                replace.append(old)
            elif old is not None and unavailable < max_unavailable:
                candidates.append(old)
        room = min(max(max_unavailable - unavailable, 0), len(candidates))
        return [*replace, *candidates[:room]], []

    surging = 0
    to_delete: list[Obj] = []
    allowed: list[str] = []
    candidate_nodes: list[str] = []
    for node in nodes:
        new, old, ok = split_node_pods(node_pods[node], hash_=hash_, generation=generation)
        if not ok:
            surging += 1
            continue
        if old is not None and node not in should_run:
            to_delete.append(old)
        elif old is None:
            continue  # the manage step creates the pod
        elif new is None:
            if not available(old):
                allowed.append(node)
            elif surging < max_surge:
                candidate_nodes.append(node)
        elif not available(new):
            surging += 1
        else:
            to_delete.append(old)
    room = min(max(max_surge - surging, 0), len(candidate_nodes))
    return to_delete, [*allowed, *candidate_nodes[:room]]
