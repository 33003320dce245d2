"""The taint-eviction controller: deletes pods from nodes with NoExecute taints they do not
tolerate, or tolerate only for a while (Kubernetes' ``taint-eviction-controller``).

Why: the node-lifecycle controller only *marks* an unreachable node (the
``node.kubernetes.io/unreachable:NoExecute`` taint). What that means for each pod is the pod's
own choice, written as tolerations: the apiserver gives every pod ``tolerationSeconds: 300``
for ``unreachable`` and ``not-ready`` unless it says otherwise, so by default pods leave an
unreachable node after five minutes, and their ReplicaSets replace them on healthy nodes.

Per pod on a node with NoExecute taints (``api.taints.matching_tolerations``):

* some taint not tolerated → evict now;
* all tolerated, some with ``tolerationSeconds`` → evict once the smallest has passed since
  *we* first saw the pod under those taints (our monotonic clock, as Kubernetes' timed worker
  queue; a restarted controller starts the wait again);
* all tolerated forever → leave it; taints removed before the deadline → cancel
  (event ``TaintManagerEviction`` "Cancelling deletion of Pod NS/NAME").

Eviction: a ``DisruptionTarget`` condition on the pod, event ``TaintManagerEviction``
"Marking for deletion Pod NS/NAME", then an ordinary (graceful) delete with a uid precondition.

Limits: deadlines live in this process's memory; no per-node rate limit beyond the
node-lifecycle controller's tainting rate.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from api.errors import Conflict, NotFound
from api.meta import now_time
from api.registry import REGISTRY
from api.taints import matching_tolerations
from client.cache import object_key
from client.controller import Controller
from client.events import EventRecorder
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.informers import SharedInformers
from services.controller_manager.retry_on_conflict import update_with_retry

__all__ = ["TaintEvictionController", "min_toleration_seconds"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


NODES = REGISTRY.require("", "Node")
PODS = REGISTRY.require("", "Pod")


def no_execute_taints(node: Obj | None) -> list[Obj]:
    return [
        t
        for t in ((node or {}).get("spec") or {}).get("taints") or []
        if t.get("effect") == "NoExecute"
    ]


def min_toleration_seconds(used: list[Any]) -> float | None:
    """Kubernetes' ``getMinTolerationTime``: 0 evicts now, None never evicts."""
    if not used:
        return 0.0
    seconds = [t.get("tolerationSeconds") for t in used if t.get("tolerationSeconds") is not None]
    if not seconds:
        return None
    return max(0.0, float(min(seconds)))


class TaintEvictionController:
    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        workers: int = 8,
    ) -> None:
        self.name = "taint-eviction-controller"
        self.client = client
        self.recorder = recorder
        self.workers = workers
        self.nodes = informers.get(NODES)
        self.pods = informers.get(PODS)
        self.queue: WorkQueue[str] = WorkQueue(name="taint-eviction")
        self.scheduled: dict[str, float] = {}
        """Pod key -> loop time we started its toleration clock."""
        self.pods.add_handler(
            on_add=self._pod_seen, on_update=self._pod_updated, on_delete=self._pod_gone
        )
        self.nodes.add_handler(on_add=self._node_seen, on_update=self._node_updated)

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.nodes, self.pods],
        ).run()

    # -- handlers -------------------------------------------------------------------------

    def _pod_seen(self, pod: Obj) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (no_execute_taints(self.nodes.get(node)) or object_key(pod) in self.scheduled):
            self.queue.add(object_key(pod))

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if (old.get("spec") or {}).get("nodeName") != (new.get("spec") or {}).get("nodeName") or (
            (old.get("spec") or {}).get("tolerations") != (new.get("spec") or {}).get("tolerations")
        ):
            self._pod_seen(new)

    def _pod_gone(self, pod: Obj) -> None:
        self.scheduled.pop(object_key(pod), None)

    def _node_seen(self, node: Obj) -> None:
        if no_execute_taints(node):
            self._node_pods(node)

    def _node_updated(self, old: Obj, new: Obj) -> None:
        if no_execute_taints(old) != no_execute_taints(new):
            self._node_pods(new)

    def _node_pods(self, node: Obj) -> None:
        for pod in self.pods.by_index("nodeName", node["metadata"]["name"]):
            self.queue.add(object_key(pod))

    # -- reconcile ------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        pod = self.pods.get(key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            self.scheduled.pop(key, None)
            return None
        node_name = (pod.get("spec") or {}).get("nodeName")
        taints = no_execute_taints(self.nodes.get(node_name)) if node_name else []
        if not taints:
            if self.scheduled.pop(key, None) is not None:
                self.recorder.event(
                    pod, "Normal", "TaintManagerEviction", f"Cancelling deletion of Pod {key}"
                )
            return None
        tolerated, used = matching_tolerations(
            taints, (pod.get("spec") or {}).get("tolerations") or []
        )
        wait = min_toleration_seconds(used) if tolerated else 0.0
        if wait is None:
            self.scheduled.pop(key, None)
            return None
        now = asyncio.get_running_loop().time()
        started = self.scheduled.setdefault(key, now)
        remaining = started + wait - now
        if remaining > 0:
            return remaining
        await self._evict(pod, taints)
        self.scheduled.pop(key, None)
        return None

    async def _evict(self, pod: Obj, taints: list[Obj]) -> None:
        meta = pod["metadata"]
        key = object_key(pod)
        log.info("evicting pod %s from node %s: NoExecute taints %s no longer tolerated", key,
                 pod["spec"].get("nodeName"), ", ".join(str(t.get("key")) for t in taints))  # fmt: skip
        self.recorder.event(
            pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {key}"
        )

        def disruption(fresh: Obj) -> bool:
            if fresh["metadata"].get("uid") != meta.get("uid"):
                return False
            status = fresh.setdefault("status", {})
            conditions = [
                c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"
            ]
            conditions.append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "DeletionByTaintManager",
                    "message": "Taint manager: deleting due to NoExecute taint",
                    "lastTransitionTime": now_time(),
                }
            )
            status["conditions"] = conditions
            return True

        try:
            await update_with_retry(
                self.client, PODS, namespace=meta["namespace"], name=meta["name"],
                mutate=disruption, subresource="status",
            )  # fmt: skip
            await self.client.delete(
                PODS, meta["name"], namespace=meta["namespace"], preconditions={"uid": meta["uid"]}
            )
        except (NotFound, Conflict):
            return
