"""NodeName: a pod that names a node runs there or nowhere.

A pod *created* with ``spec.nodeName`` never reaches the scheduler at all (it is already
assigned); this filter covers the rest, e.g. a pod whose name was set in a race, so that the
scheduler never binds a pod to a node other than the one it names.
"""

from __future__ import annotations

from services.scheduler.framework import SKIP, CycleState, Status
from services.scheduler.nodeinfo import NodeInfo, PodInfo

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = NAME
    node_static = True

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        return None if pod.node_name else SKIP

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if pod.node_name and pod.node_name != node.name:
            return Status.unresolvable(REASON)
        return None
