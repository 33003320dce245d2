"""SelectorSpread: spread the replicas of one controller across nodes.

Pods that share a controlling owner (``ownerReferences[].controller``: a ReplicaSet, an RC, a
StatefulSet ...) are counted per node — bound and assumed alike, so a burst spreads too — and a
node with fewer siblings scores higher: 100 * (max - count) / max.

Limits: siblings are found by controller uid, not by Service/RC selectors as the historical
Kubernetes plugin did, and zones are not considered (no zone-level weighting).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.framework import MAX_NODE_SCORE, SKIP, CycleState, Status
from services.scheduler.nodeinfo import NodeInfo, PodInfo

NAME = "SelectorSpread"


class SelectorSpread:
    name = NAME

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        return None if pod.controller_uid else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return node.owner_counts.get(pod.controller_uid, 0)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        highest = max(scores, default=0)
        for i, count in enumerate(scores):
            scores[i] = (
                MAX_NODE_SCORE if highest == 0 else MAX_NODE_SCORE * (highest - count) // highest
            )
