"""TaintToleration: a node's NoSchedule/NoExecute taints repel pods that do not tolerate them.

Filter: the first taint with effect ``NoSchedule`` or ``NoExecute`` that none of the pod's
tolerations matches rejects the node, worded as Kubernetes words it ("node(s) had untolerated
taint {key: value}"). Score: fewer untolerated ``PreferNoSchedule`` taints is better.

Toleration matching is ``api.taints.tolerates`` (``core/v1`` ``Toleration.ToleratesTaint``), the
same rule the controller-manager's taint eviction uses. ``tolerationSeconds`` is the eviction
controller's business, not ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from api import taints
from services.scheduler.framework import SKIP, CycleState, Status, default_normalize_score
from services.scheduler.nodeinfo import NodeInfo, PodInfo, Taint

NAME = "TaintToleration"
_FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def toleration_matches(toleration: Mapping[str, Any], taint: Taint) -> bool:
    return taints.tolerates(toleration, key=taint.key, value=taint.value, effect=taint.effect)


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Taint) -> bool:
    return any(toleration_matches(t, taint) for t in tolerations)


def reason_for(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


class TaintToleration:
    name = NAME
    node_static = True

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not node.taints:
            return None
        for taint in node.taints:
            if taint.effect in _FILTERED_EFFECTS and not tolerates(pod.tolerations, taint):
                return Status.unresolvable(reason_for(taint))
        return None

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        if not any(n.taints for n in nodes):
            return SKIP
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return sum(
            1
            for taint in node.taints
            if taint.effect == "PreferNoSchedule" and not tolerates(pod.tolerations, taint)
        )

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize_score(scores, reverse=True)
