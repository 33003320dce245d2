"""NodeResourcesLeastAllocated: prefer the node with the most cpu and memory left after placing.

Score per resource = (allocatable - requested) * 100 / allocatable, with the pod's own requests
included and request-less containers counted at kube-scheduler's defaults (0.1 cpu, 200 MiB) so
that a flood of request-less pods still spreads; the node's score is the mean over cpu and
memory (equal weights, as kube-scheduler's default).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.framework import MAX_NODE_SCORE, CycleState
from services.scheduler.nodeinfo import NodeInfo, PodInfo

NAME = "NodeResourcesLeastAllocated"


class LeastAllocated:
    name = NAME

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        have, used, want = node.allocatable, node.non_zero_requested, pod.non_zero_requests
        # inlined, as it runs for every feasible node of every cycle; a node without the
        # resource, or already over it, scores 0 for it
        capacity, requested = have.milli_cpu, used.milli_cpu + want.milli_cpu
        cpu = (
            (capacity - requested) * MAX_NODE_SCORE // capacity if requested <= capacity > 0 else 0
        )
        capacity, requested = have.memory, used.memory + want.memory
        memory = (
            (capacity - requested) * MAX_NODE_SCORE // capacity if requested <= capacity > 0 else 0
        )
        return (cpu + memory) // 2

    def score_all(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        """``score`` for every node, without a method call per node."""
        want = pod.non_zero_requests
        cpu, memory, top = want.milli_cpu, want.memory, MAX_NODE_SCORE
        out = []
        for node in nodes:
            have, used = node.allocatable, node.non_zero_requested
            capacity, requested = have.milli_cpu, used.milli_cpu + cpu
            a = (capacity - requested) * top // capacity if requested <= capacity > 0 else 0
            capacity, requested = have.memory, used.memory + memory
            b = (capacity - requested) * top // capacity if requested <= capacity > 0 else 0
            out.append((a + b) // 2)
        return out
