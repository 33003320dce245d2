"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take no new pods.

Unless the pod tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint, as
DaemonSet pods do in Kubernetes.
"""

from __future__ import annotations

from services.scheduler.framework import CycleState, Status
from services.scheduler.nodeinfo import NodeInfo, PodInfo, Taint
from services.scheduler.plugins.taint_toleration import tolerates

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class NodeUnschedulable:
    name = NAME
    node_static = True

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if node.unschedulable and not tolerates(pod.tolerations, UNSCHEDULABLE_TAINT):
            return Status.unresolvable(REASON)
        return None
