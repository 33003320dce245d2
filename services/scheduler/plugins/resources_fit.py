"""NodeResourcesFit: the pod's requests must fit in what the node has left.

"Left" is ``status.allocatable`` minus the requests of every pod on the node, bound or assumed
(see ``cache.py``), so a burst of pods sees its own earlier decisions. Every shortfall is
reported, as Kubernetes does: "Insufficient cpu", "Insufficient memory", "Too many pods".
These are ``UNSCHEDULABLE`` (not unresolvable): a pod leaving the node can fix them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from services.scheduler.framework import CycleState, Status
from services.scheduler.nodeinfo import NodeInfo, PodInfo

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"


def insufficient(pod: PodInfo, node: NodeInfo) -> list[str]:
    """The reasons ``pod`` does not fit ``node`` (empty if it fits)."""
    reasons: list[str] = []
    if len(node.pods) + 1 > node.allowed_pods:
        reasons.append(TOO_MANY_PODS)
    want = pod.requests
    if want.is_zero:
        return reasons
    have, used = node.allocatable, node.requested
    if want.milli_cpu and have.milli_cpu < want.milli_cpu + used.milli_cpu:
        reasons.append("Insufficient cpu")
    if want.memory and have.memory < want.memory + used.memory:
        reasons.append("Insufficient memory")
    if want.ephemeral_storage and (
        have.ephemeral_storage < want.ephemeral_storage + used.ephemeral_storage
    ):
        reasons.append("Insufficient ephemeral-storage")
    for name, amount in want.scalar.items():
        if amount and have.scalar.get(name, 0) < amount + used.scalar.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


class NodeResourcesFit:
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        # the common case first, without building a list: it runs for every node of every cycle
        want, have, used = pod.requests, node.allocatable, node.requested
        if (
            len(node.pods) < node.allowed_pods
            and (not want.milli_cpu or have.milli_cpu >= want.milli_cpu + used.milli_cpu)
            and (not want.memory or have.memory >= want.memory + used.memory)
            and not want.ephemeral_storage
            and not want.scalar
        ):
            return None
        reasons = insufficient(pod, node)
        return Status.unschedulable(*reasons) if reasons else None

    def filter_each(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Iterator[Status | None]:
        """``filter`` for each node in turn, without a method call per node."""
        want = pod.requests
        cpu, memory = want.milli_cpu, want.memory
        simple = not want.ephemeral_storage and not want.scalar
        for node in nodes:
            have, used = node.allocatable, node.requested
            if (
                simple
                and len(node.pods) < node.allowed_pods
                and (not cpu or have.milli_cpu >= cpu + used.milli_cpu)
                and (not memory or have.memory >= memory + used.memory)
            ):
                yield None
            else:
                reasons = insufficient(pod, node)
                yield Status.unschedulable(*reasons) if reasons else None
