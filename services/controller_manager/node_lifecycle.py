"""The node-lifecycle controller: notices nodes whose kubelet went quiet, marks them, taints them.

Why: a kubelet proves it is alive by renewing its Lease in ``kube-node-lease`` (every 10 s)
and by posting node status. When both stop for ``--node-monitor-grace-period`` (40 s), the
node's state is unknown: nobody may count on its pods any more. Following
``pkg/controller/nodelifecycle``:

* **Health is judged by our own clock.** A node's *probe time* is when *we* last saw its
  Lease's ``renewTime`` or its Ready condition's ``lastHeartbeatTime`` change (the loop's
  monotonic clock), never a comparison of its timestamps with our wall clock — clock skew
  between machines does not matter. A node never heard from gets ``--node-startup-grace-period``.
* **Unknown.** Past the grace period the conditions Ready, MemoryPressure, DiskPressure and
  PIDPressure become ``Unknown`` (reason ``NodeStatusUnknown``, "Kubelet stopped posting node
  status."; ``NodeStatusNeverUpdated`` for a condition never posted), a ``NodeNotReady`` event
  is recorded, and the pods on it get ``Ready=False`` (so Services and controllers stop
  counting them).
* **Taints.** Ready=Unknown → ``node.kubernetes.io/unreachable`` with NoSchedule and NoExecute;
  Ready=False → ``node.kubernetes.io/not-ready`` likewise; Ready=True → neither (a node that
  comes back is untainted). Adding NoExecute taints is rate limited (``--node-eviction-rate``,
  0.1 nodes/s, one at once) and, when *every* node is not ready (full disruption — more likely
  the control plane's network than all the nodes), not done at all and existing ones are
  lifted: evicting everything would only make things worse. The NoExecute taint is what the
  taint-eviction controller (``taint_eviction``) acts on.
* Reconciles are keyed by node name and requeue themselves for the moment the grace period
  would run out, so nothing polls; lease and node events move the deadline. A node event syncs
  the node; a lease renewal does not (the pending requeue reads the moved deadline), and whether
  every node is not ready is recomputed only when some node's Ready status changed — at 5,000
  nodes, 500 renewals a second each costing a pass over every node kept this controller busy.

Limits: one zone (no per-zone disruption states, no large-cluster secondary rate); the pod
``Ready=False`` write is best effort (a failure is retried with the node's key).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass
from typing import Any

from api.errors import Conflict, NotFound, StatusError
from api.meta import now_time
from api.registry import REGISTRY
from client.controller import Controller
from client.events import EventRecorder
from client.ratelimit import TokenBucket
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.informers import SharedInformers
from services.controller_manager.retry_on_conflict import update_with_retry

__all__ = ["TAINT_NOT_READY", "TAINT_UNREACHABLE", "NodeLifecycleController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
NODE_LEASE_NAMESPACE = "kube-node-lease"
MONITORED_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


NODES = REGISTRY.require("", "Node")
PODS = REGISTRY.require("", "Pod")
LEASES = REGISTRY.require("coordination.k8s.io", "Lease")


def ready_status(node: Obj) -> str | None:
    """The Ready condition's status (``True``/``False``/``Unknown``), None if never posted."""
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return None


def _heartbeat(node: Obj) -> str | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            heartbeat: str | None = c.get("lastHeartbeatTime")
            return heartbeat
    return None


@dataclass(slots=True)
class _Health:
    probe: float
    """Loop time we last saw the node or its lease renew."""
    heartbeat: str | None = None
    renew_time: str | None = None
    ever_reported: bool = False
    ready: str | None = None
    """The Ready status the last sync saw: the disruption state is recomputed (a pass over every
    node) only when it changes."""


def _desired_taints(ready: str | None) -> set[tuple[str, str]]:
    if ready == "Unknown":
        return {(TAINT_UNREACHABLE, "NoSchedule"), (TAINT_UNREACHABLE, "NoExecute")}
    if ready == "False":
        return {(TAINT_NOT_READY, "NoSchedule"), (TAINT_NOT_READY, "NoExecute")}
    return set()


_OURS = {
    (TAINT_UNREACHABLE, "NoSchedule"),
    (TAINT_UNREACHABLE, "NoExecute"),
    (TAINT_NOT_READY, "NoSchedule"),
    (TAINT_NOT_READY, "NoExecute"),
}


class NodeLifecycleController:
    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        recorder: EventRecorder,
        grace_period: float = 40.0,
        startup_grace_period: float = 60.0,
        eviction_rate: float = 0.1,
    ) -> None:
        self.name = "nodelifecycle"
        self.client = client
        self.recorder = recorder
        self.grace_period = grace_period
        self.startup_grace_period = startup_grace_period
        self.eviction_limiter = (
            TokenBucket(qps=eviction_rate, burst=1) if eviction_rate > 0 else None
        )
        self.eviction_rate = eviction_rate
        self.nodes = informers.get(NODES)
        self.leases = informers.get(LEASES)
        self.pods = informers.get(PODS)
        self.queue: WorkQueue[str] = WorkQueue(name="nodelifecycle")
        self.health: dict[str, _Health] = {}
        self.full_disruption = False
        self.nodes.add_handler(
            on_add=self._node_seen,
            on_update=lambda _o, n: self._node_seen(n),
            on_delete=self._node_deleted,
        )
        self.leases.add_handler(
            on_add=self._lease_seen, on_update=lambda _o, n: self._lease_seen(n)
        )
        self.pods.add_handler(on_add=self._pod_seen, on_update=lambda _o, n: self._pod_seen(n))

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=1,  # one worker: the disruption state is computed across all nodes
            wait_for=[self.nodes, self.leases, self.pods],
        ).run()

    # -- handlers -------------------------------------------------------------------------

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _health_of(self, name: str) -> _Health:
        h = self.health.get(name)
        if h is None:
            h = self.health[name] = _Health(probe=self._now())
        return h

    def _node_seen(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        h = self._health_of(name)
        beat = _heartbeat(node)
        if beat and beat != h.heartbeat:
            h.heartbeat = beat
            h.probe = self._now()
        if ready_status(node) is not None:
            h.ever_reported = True
        self.queue.add(name)

    def _node_deleted(self, node: Obj) -> None:
        self.health.pop(node["metadata"]["name"], None)
        self._recheck_disruption()

    def _lease_seen(self, lease: Obj) -> None:
        meta = lease["metadata"]
        if meta.get("namespace") != NODE_LEASE_NAMESPACE:
            return
        name = meta["name"]
        renew = (lease.get("spec") or {}).get("renewTime")
        h = self._health_of(name)
        if renew and renew != h.renew_time:
            first = not h.ever_reported
            h.renew_time = renew
            h.probe = self._now()
            h.ever_reported = True
            # a renewal only moves the deadline the pending requeue reads (a node already
            # Unknown turns Ready by its kubelet's status: a node event); the first one
            # shortens the grace from the start-up one
            if first:
                self.queue.add(name)

    def _pod_seen(self, pod: Obj) -> None:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            return
        node = self.nodes.get(node_name)
        if node is not None and ready_status(node) not in ("True", None) and _pod_ready(pod):
            self.queue.add(node_name)

    def _recheck_disruption(self, fresh: Obj | None = None) -> None:
        full = self._compute_full_disruption(fresh)
        if full != self.full_disruption:
            self.full_disruption = full
            log.warning(
                "%s: every node is not ready; suspending evictions (a control-plane network "
                "problem is likelier than every node failing)"
                if full
                else "%s: some node is ready again; evictions resume",
                self.name,
            )
            for name in self.nodes.keys():
                self.queue.add(name)

    def _compute_full_disruption(self, fresh: Obj | None = None) -> bool:
        """Is every node not ready? ``fresh`` (just written) stands in for its cached copy."""
        nodes = self.nodes.list()
        if fresh is not None:
            name = fresh["metadata"]["name"]
            nodes = [fresh if n["metadata"]["name"] == name else n for n in nodes]
        return bool(nodes) and all(ready_status(n) != "True" for n in nodes)

    # -- reconcile ------------------------------------------------------------------------

    async def sync(self, name: str) -> float | None:
        node = self.nodes.get(name)
        if node is None:
            self.health.pop(name, None)
            return None
        h = self._health_of(name)
        grace = self.grace_period if h.ever_reported else self.startup_grace_period
        silent_for = self._now() - h.probe
        requeue: float | None = None
        if silent_for > grace:
            node = await self._mark_unknown(node, h, grace)
        else:
            requeue = grace - silent_for + 0.05
        ready = ready_status(node)
        if ready != h.ready:
            h.ready = ready
            self._recheck_disruption(node)
        retry = await self._reconcile_taints(node, ready)
        if retry is not None:
            requeue = retry if requeue is None else min(requeue, retry)
        if ready not in ("True", None):
            await self._mark_pods_not_ready(name)
        return requeue

    async def _mark_unknown(self, node: Obj, h: _Health, grace: float) -> Obj:
        conditions = (node.get("status") or {}).get("conditions") or []
        if all(
            any(c.get("type") == t and c.get("status") == "Unknown" for c in conditions)
            for t in MONITORED_CONDITIONS
        ):
            return node
        name = node["metadata"]["name"]
        was_ready = ready_status(node) == "True"

        def unknown(fresh: Obj) -> bool:
            beat = _heartbeat(fresh)
            if beat and beat != h.heartbeat:  # a status post the informer has not shown yet
                h.heartbeat, h.probe = beat, self._now()
            if self._now() - h.probe <= grace:
                return False  # renewed or posted while the node was being read
            now = now_time()
            status = fresh.setdefault("status", {})
            current = {c.get("type"): c for c in status.get("conditions") or []}
            changed = False
            for t in MONITORED_CONDITIONS:
                c = current.get(t)
                if c is None:
                    current[t] = {
                        "type": t,
                        "status": "Unknown",
                        "reason": "NodeStatusNeverUpdated",
                        "message": "Kubelet never posted node status.",
                        "lastHeartbeatTime": fresh["metadata"].get("creationTimestamp"),
                        "lastTransitionTime": now,
                    }
                    changed = True
                elif c.get("status") != "Unknown":
                    current[t] = {
                        **c,
                        "status": "Unknown",
                        "reason": "NodeStatusUnknown",
                        "message": "Kubelet stopped posting node status.",
                        "lastTransitionTime": now,
                    }
                    changed = True
            status["conditions"] = list(current.values())
            return changed

        try:
            written = await update_with_retry(
                self.client, NODES, namespace=None, name=name, mutate=unknown, subresource="status"
            )
        except NotFound:
            return node
        if self._now() - h.probe <= grace:
            return written
        log.warning(
            "node %s: no lease renewal or status for %.0fs (grace %.0fs); marked Unknown",
            name, self._now() - h.probe, self.grace_period,
        )  # fmt: skip
        if was_ready:
            self.recorder.event(
                written, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady"
            )
        return written

    async def _reconcile_taints(self, node: Obj, ready: str | None) -> float | None:
        """Bring our taints in line with Ready; returns a retry delay if rate limited."""
        name = node["metadata"]["name"]
        desired = _desired_taints(ready)
        if self.full_disruption:
            desired = {t for t in desired if t[1] != "NoExecute"}
        current = {
            (t.get("key"), t.get("effect"))
            for t in (node.get("spec") or {}).get("taints") or []
            if (t.get("key"), t.get("effect")) in _OURS
        }
        if current == desired:
            return None
        adding_no_execute = any(t[1] == "NoExecute" for t in desired - current)
        if (
            adding_no_execute
            and self.eviction_limiter is not None
            and not self.eviction_limiter.try_acquire()
        ):
            # taint the NoSchedule part now, the NoExecute part when the rate allows
            desired = {t for t in desired if t[1] != "NoExecute"} | {
                t for t in current if t[1] == "NoExecute"
            }
            retry: float | None = 1.0 / self.eviction_rate
            if current == desired:
                return retry
        else:
            retry = None

        def retaint(fresh: Obj) -> bool:
            spec = fresh.setdefault("spec", {})
            taints = list(spec.get("taints") or [])
            kept = [
                t
                for t in taints
                if (t.get("key"), t.get("effect")) not in _OURS
                or (t.get("key"), t.get("effect")) in desired
            ]
            have = {(t.get("key"), t.get("effect")) for t in kept}
            now = now_time()
            for key, effect in sorted(desired - have):
                kept.append({"key": key, "effect": effect, "timeAdded": now})
            if kept == taints:
                return False
            if kept:
                spec["taints"] = kept
            else:
                spec.pop("taints", None)
            return True

        try:
            await update_with_retry(self.client, NODES, namespace=None, name=name, mutate=retaint)
        except NotFound:
            return None
        added = sorted(f"{k}:{e}" for k, e in desired - current)
        removed = sorted(f"{k}:{e}" for k, e in current - desired)
        log.info("node %s (Ready=%s): taints added %s, removed %s", name, ready, added or "none",
                 removed or "none")  # fmt: skip
        return retry

    async def _mark_pods_not_ready(self, node_name: str) -> None:
        for pod in self.pods.by_index("nodeName", node_name):
            if not _pod_ready(pod) or pod["metadata"].get("deletionTimestamp"):
                continue
            meta = pod["metadata"]

            def not_ready(fresh: Obj, uid: Any = meta.get("uid")) -> bool:
                if fresh["metadata"].get("uid") != uid:
                    return False
                conditions = copy.deepcopy((fresh.get("status") or {}).get("conditions") or [])
                changed = False
                for c in conditions:
                    if c.get("type") == "Ready" and c.get("status") == "True":
                        c.update(status="False", lastTransitionTime=now_time())
                        changed = True
                if changed:
                    fresh.setdefault("status", {})["conditions"] = conditions
                return changed

            try:
                await update_with_retry(
                    self.client, PODS, namespace=meta["namespace"], name=meta["name"],
                    mutate=not_ready, subresource="status",
                )  # fmt: skip
            except (NotFound, Conflict):
                continue
            except (ConnectionError, StatusError) as exc:
                log.warning("marking pod %s/%s not ready failed: %r; will retry", meta["namespace"],
                            meta["name"], exc)  # fmt: skip
                raise
            self.recorder.event(pod, "Warning", "NodeNotReady", "Node is not ready")


def _pod_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )
