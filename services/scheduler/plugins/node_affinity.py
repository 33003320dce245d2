"""NodeAffinity: ``spec.nodeSelector`` and node affinity, required (filter) and preferred (score).

Filter: the node's labels must contain every ``nodeSelector`` pair, and, when the pod has
``requiredDuringSchedulingIgnoredDuringExecution``, match at least one of its terms (a term
matches when all its ``matchExpressions`` and ``matchFields`` do; an empty term matches
nothing). Operators ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt`` (integer
compare); ``matchFields`` knows ``metadata.name`` only, as Kubernetes. The matching itself is
``api.selectors``'. One reason for any mismatch: "node(s) didn't match Pod's node
affinity/selector", unresolvable by other pods.

Score: the sum of the weights of the preferred terms the node matches, normalised to [0, 100].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api.selectors import node_selector_terms_match
from services.scheduler.framework import SKIP, CycleState, Status, default_normalize_score
from services.scheduler.nodeinfo import NodeInfo, PodInfo

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"


def term_matches(term: Mapping[str, Any], node: NodeInfo) -> bool:
    return node_selector_terms_match((term,), node.labels, node_name=node.name)


def pod_matches_node(pod: PodInfo, node: NodeInfo) -> bool:
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    if pod.affinity_required is not None and not node_selector_terms_match(
        pod.affinity_required, labels, node_name=node.name
    ):
        return False
    return True


class NodeAffinity:
    name = NAME
    node_static = True

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        if not pod.node_selector and pod.affinity_required is None:
            return SKIP
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None if pod_matches_node(pod, node) else Status.unresolvable(REASON)

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        return None if pod.affinity_preferred else SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        total = 0
        for preferred in pod.affinity_preferred:
            weight = int(preferred.get("weight") or 0)
            if weight and term_matches(preferred.get("preference") or {}, node):
                total += weight
        return total

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        default_normalize_score(scores)
