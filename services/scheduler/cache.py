"""The scheduler's cache: every node with the pods placed on it, including *assumed* pods.

Why: fit and spreading must count every pod on a node. The informers say which pods are bound,
but a binding takes a round trip to the apiserver and another for the watch to report it; a
burst of pods scheduled meanwhile would all see the same empty node and pile onto it. So when
the scheduler picks a node it *assumes* the pod there at once (``assume``), the binding happens
in the background, and the informer's confirmation (``add_pod`` for the now-bound pod) replaces
the assumption — or ``forget`` undoes it if the binding failed.

The cache also turns node changes into queue events: ``update_node`` says which plugins the
change may matter to (labels -> NodeAffinity and VolumeBinding, taints -> TaintToleration,
annotations -> VolumeBinding, ...), and says nothing
for changes no plugin reads (a kubelet's heartbeat), so those never wake parked pods.

Limits: no snapshot is taken — a scheduling cycle is synchronous and reads the live cache, which
is safe on one event loop and cheap. An assumed pod whose confirmation never comes (its binding
was lost *and* the pod deleted while we were away) is removed by the pod's delete event, not by
a timer. Pods on nodes the cache has not seen yet are kept on a placeholder NodeInfo that is
never offered for scheduling until its Node appears.
"""

from __future__ import annotations

import logging

from services.scheduler.nodeinfo import KubeObject, NodeInfo, PodInfo, as_dict
from services.scheduler.queue import NODE_ADD, ClusterEvent

__all__ = ["SchedulerCache"]

log = logging.getLogger("kubelite.scheduler.cache")


class SchedulerCache:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._pod_node: dict[str, str] = {}
        """Pod key -> the node it is accounted on (bound or assumed)."""
        self._assumed: set[str] = set()
        self._node_list: list[NodeInfo] | None = None
        self.static_version = 0
        """Bumped when a node appears, goes, or changes what node-static filters read."""

    # ---- nodes ---------------------------------------------------------------------------

    def _info(self, name: str) -> NodeInfo:
        info = self._nodes.get(name)
        if info is None:
            info = self._nodes[name] = NodeInfo(name)
        return info

    def add_node(self, obj: KubeObject) -> ClusterEvent:
        d = as_dict(obj)
        info = self._info(str((d.get("metadata") or {}).get("name") or ""))
        info.set_node(d)
        self._node_list = None
        self.static_version += 1
        return NODE_ADD

    def update_node(self, obj: KubeObject) -> ClusterEvent | None:
        """Apply a node's new state; the event it amounts to, or None if no plugin cares."""
        d = as_dict(obj)
        name = str((d.get("metadata") or {}).get("name") or "")
        info = self._nodes.get(name)
        if info is None or info.node is None:
            return self.add_node(d)
        annotations_before = (info.node.get("metadata") or {}).get("annotations")
        before = (
            dict(info.labels),
            info.taints,
            info.unschedulable,
            info.ready,
            (info.allocatable.milli_cpu, info.allocatable.memory, info.allocatable.ephemeral_storage,
             tuple(sorted(info.allocatable.scalar.items())), info.allowed_pods),
        )  # fmt: skip
        info.set_node(d)
        after = (
            dict(info.labels),
            info.taints,
            info.unschedulable,
            info.ready,
            (info.allocatable.milli_cpu, info.allocatable.memory, info.allocatable.ephemeral_storage,
             tuple(sorted(info.allocatable.scalar.items())), info.allowed_pods),
        )  # fmt: skip
        plugins = {
            plugin
            for i, plugin in enumerate(
                (
                    "NodeAffinity",
                    "TaintToleration",
                    "NodeUnschedulable",
                    "NodeReady",
                    "NodeResourcesFit",
                )
            )
            if before[i] != after[i]
        }
        if "NodeAffinity" in plugins or annotations_before != (d.get("metadata") or {}).get(
            "annotations"
        ):
            plugins.add("VolumeBinding")  # volume affinity reads labels; local-path, annotations
        if not plugins:
            return None
        if plugins - {"NodeResourcesFit", "VolumeBinding"}:  # neither is node-static
            self.static_version += 1
        if "NodeAffinity" in plugins:
            plugins.add("NodeName")  # matchFields and names live on the same object
        return ClusterEvent("NodeUpdate", frozenset(plugins))

    def remove_node(self, name: str) -> None:
        info = self._nodes.get(name)
        if info is None:
            return
        self._node_list = None
        self.static_version += 1
        if info.pods:
            # its pods will be deleted or rebound; until then keep their accounting
            info.node = None
        else:
            del self._nodes[name]

    def nodes(self) -> list[NodeInfo]:
        """The nodes pods can be offered to, in a stable order (by name)."""
        if self._node_list is None:
            self._node_list = sorted(
                (n for n in self._nodes.values() if n.node is not None), key=lambda n: n.name
            )
        return self._node_list

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    # ---- pods ----------------------------------------------------------------------------

    def add_pod(self, pod: PodInfo) -> None:
        """A bound pod (from the informer): account it on its node, confirming any assumption."""
        self._assumed.discard(pod.key)
        current = self._pod_node.get(pod.key)
        if current is not None and current != pod.node_name:
            if pod.key in self._pod_node:
                log.info(
                    "pod %s was assumed on %s but is bound to %s; moving it",
                    pod.key,
                    current,
                    pod.node_name,
                )
            self._remove_from(current, pod.key)
        self._info(pod.node_name).add_pod(pod)
        self._pod_node[pod.key] = pod.node_name

    update_pod = add_pod

    def remove_pod(self, key: str) -> None:
        node = self._pod_node.pop(key, None)
        self._assumed.discard(key)
        if node is not None:
            self._remove_from(node, key)

    def _remove_from(self, node: str, key: str) -> None:
        info = self._nodes.get(node)
        if info is None:
            return
        info.remove_pod(key)
        if info.node is None and not info.pods:
            del self._nodes[node]

    def assume(self, pod: PodInfo, node: str) -> None:
        """Account ``pod`` on ``node`` now, before the binding is confirmed."""
        if pod.key in self._pod_node:
            raise RuntimeError(f"pod {pod.key} is already on {self._pod_node[pod.key]}")
        self._info(node).add_pod(pod)
        self._pod_node[pod.key] = node
        self._assumed.add(pod.key)

    def forget(self, key: str) -> None:
        """Undo ``assume`` (the binding failed); a confirmed pod is left alone."""
        if key in self._assumed:
            self.remove_pod(key)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    def is_placed(self, key: str) -> bool:
        """Bound or assumed: in either case it must not be scheduled again."""
        return key in self._pod_node

    @property
    def pod_count(self) -> int:
        return len(self._pod_node)
