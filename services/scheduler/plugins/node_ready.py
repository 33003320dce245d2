"""NodeReady: pods go only to nodes whose ``Ready`` condition is ``True``.

Kubernetes expresses this through the ``node.kubernetes.io/not-ready`` taint the node lifecycle
controller adds; kubelite checks the condition directly so a node is avoided as soon as its
status says so, whoever maintains the taint. A pod tolerating the not-ready taint (NoSchedule)
may still go there, as in Kubernetes.
"""

from __future__ import annotations

from services.scheduler.framework import CycleState, Status
from services.scheduler.nodeinfo import NodeInfo, PodInfo, Taint
from services.scheduler.plugins.taint_toleration import tolerates

NAME = "NodeReady"
REASON = "node(s) were not ready"
NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")


class NodeReady:
    name = NAME
    node_static = True

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not node.ready and not tolerates(pod.tolerations, NOT_READY_TAINT):
            return Status.unresolvable(REASON)
        return None
