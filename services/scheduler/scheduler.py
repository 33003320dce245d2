"""The scheduler proper: informer events in, one scheduling cycle per pod, bindings out.

The loop (kube-scheduler's ``scheduleOne``, cut down):

1. ``queue.pop()`` the next pending pod. Skip it if it is being deleted or already placed.
2. **Scheduling cycle** (synchronous — no await between reading the cache and writing to it):
   the framework filters and scores the cache's nodes; on success the Reserve plugins record
   the choice and the pod is *assumed* on the chosen node at once, so the next cycle already
   counts it.
3. **Binding cycle** (a background task): the PreBind plugins make the writes the binding
   depends on and wait for them to take effect (VolumeBinding: the claims' selected node, then
   Bound claims); a failure there undoes the reservation, says ``FailedScheduling`` and retries
   the pod after backoff. Then, up to ``bind_concurrency`` at a time, POST
   ``pods/{name}/binding``. Success records the ``Scheduled`` event ("Successfully assigned
   default/pod-example to node1"); the informer's MODIFIED event then confirms the assumption.
   A 409 means someone else bound it first — not an error: the assumption is dropped and the
   watch brings the truth. Any other failure drops the assumption and retries with backoff.
4. **No node fits**: a ``FailedScheduling`` Warning worded as Kubernetes words it ("0/2 nodes are
   available: 2 node(s) didn't match Pod's node affinity/selector."), the pod's condition
   ``PodScheduled=False, reason Unschedulable`` (a merge patch of ``pods/status``, only when it
   changed), and the pod parks in the queue until an event that could help.

The informer handlers sort pods: unassigned ones this scheduler is responsible for
(``spec.schedulerName``) go to the queue; assigned ones (whoever bound them, ourselves included)
go to the cache for accounting. A pod created with ``spec.nodeName`` is therefore never queued:
it skips the scheduler entirely, and only counts against its node. Claims, volumes and storage
classes go to the ``VolumeCache``; each change retries the pods VolumeBinding parked.

Limits: one profile; no preemption, no nominated nodes, no pod (anti-)affinity, no port
checks; the binding concurrency bounds in-flight HTTP requests, not cycles or PreBind waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from api.errors import AlreadyExists, Conflict, NotFound, StatusError
from api.meta import now_time
from api.registry import REGISTRY, ResourceType
from client.events import EventRecorder, EventType
from client.rest import ApiClient
from services.scheduler.cache import SchedulerCache
from services.scheduler.framework import FitError, Framework, ScheduleResult
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.nodeinfo import PodInfo
from services.scheduler.queue import ASSIGNED_POD_DELETE, QueuedPod, SchedulingQueue
from services.scheduler.volumes import VolumeCache

__all__ = ["Scheduler"]

log = logging.getLogger("kubelite.scheduler")

_pods = REGISTRY.by_kind("", "Pod")
assert _pods is not None
PODS: ResourceType = _pods

# Bindings in flight at once. kube-scheduler binds each pod in a goroutine of its own, bounded
# only by its client's QPS; here the bound is what keeps up with a busy apiserver: bindings/s is
# at most this over one binding's latency, and under a burst of creates that latency is the
# apiserver's queue (0.2-1 s on two shared cores), so 32 capped bindings at 30-150/s while pods
# were created faster (the 10,000-pod run's "seen -> bound" p50 of 17 s). 256 in flight keep
# 500 pods/s bound at half a second each; a quiet apiserver answers them in milliseconds anyway.
DEFAULT_BIND_CONCURRENCY = 256


class Scheduler:
    def __init__(
        self,
        *,
        client: ApiClient,
        framework: Framework,
        queue: SchedulingQueue,
        cache: SchedulerCache | None = None,
        volumes: VolumeCache | None = None,
        recorder: EventRecorder | None = None,
        metrics: SchedulerMetrics | None = None,
        scheduler_name: str = "default-scheduler",
        bind_concurrency: int = DEFAULT_BIND_CONCURRENCY,
    ) -> None:
        self.client = client
        self.framework = framework
        self.queue = queue
        self.cache = cache or SchedulerCache()
        self.volumes = volumes or VolumeCache()
        """The framework's plugins must be built with this same cache (``Handle.volumes``)."""
        self.recorder = recorder
        self.metrics = metrics or SchedulerMetrics(
            profile=scheduler_name, queue_lengths=queue.lengths
        )
        self.scheduler_name = scheduler_name
        self._bind_slots = asyncio.Semaphore(bind_concurrency)
        self._binds: set[asyncio.Task[None]] = set()
        self._pre_binding: set[asyncio.Task[Any]] = set()
        """Binding cycles waiting in PreBind (for claims): cancelled, not awaited, on the way out."""
        self._status_writes: set[asyncio.Task[None]] = set()
        self.bound = 0
        """Pods this scheduler bound successfully (for tests and the bench)."""

    # ---- informer handlers (quick, synchronous) -------------------------------------------

    def _responsible(self, pod: PodInfo) -> bool:
        return pod.scheduler_name == self.scheduler_name

    def on_pod_add(self, obj: Mapping[str, Any]) -> None:
        pod = PodInfo(obj)
        if pod.node_name:
            if not pod.terminal:
                self.cache.add_pod(pod)
        elif self._responsible(pod) and not pod.deleting and not pod.terminal:
            self.queue.add(pod)

    def on_pod_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        pod = PodInfo(new)
        if pod.node_name:
            self.queue.delete(pod.key)  # got a node (from us or anyone): nothing left to do
            if pod.terminal:
                if self.cache.is_placed(pod.key):
                    self.cache.remove_pod(pod.key)
                    self.queue.on_event(ASSIGNED_POD_DELETE)  # its resources are free
            else:
                self.cache.update_pod(pod)
        elif pod.deleting or pod.terminal or not self._responsible(pod):
            self.queue.delete(pod.key)
        else:
            self.queue.update(pod, changed=_scheduling_relevant_change(old, new))

    def on_pod_delete(self, obj: Mapping[str, Any]) -> None:
        pod = PodInfo(obj)
        self.queue.delete(pod.key)
        if self.cache.is_placed(pod.key):
            self.cache.remove_pod(pod.key)
            self.queue.on_event(ASSIGNED_POD_DELETE)

    def on_node_add(self, obj: Mapping[str, Any]) -> None:
        self.queue.on_event(self.cache.add_node(obj))

    def on_node_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        event = self.cache.update_node(new)
        if event is not None:
            self.queue.on_event(event)

    def on_node_delete(self, obj: Mapping[str, Any]) -> None:
        self.cache.remove_node(str((obj.get("metadata") or {}).get("name") or ""))

    def on_claim_add(self, obj: Mapping[str, Any]) -> None:
        self.queue.on_event(self.volumes.set_claim(obj))

    def on_claim_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.queue.on_event(self.volumes.set_claim(new))

    def on_claim_delete(self, obj: Mapping[str, Any]) -> None:
        self.volumes.remove_claim(obj)

    def on_volume_add(self, obj: Mapping[str, Any]) -> None:
        self.queue.on_event(self.volumes.set_volume(obj))

    def on_volume_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.queue.on_event(self.volumes.set_volume(new))

    def on_volume_delete(self, obj: Mapping[str, Any]) -> None:
        self.volumes.remove_volume(obj)

    def on_class_add(self, obj: Mapping[str, Any]) -> None:
        self.queue.on_event(self.volumes.set_class(obj))

    def on_class_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.queue.on_event(self.volumes.set_class(new))

    def on_class_delete(self, obj: Mapping[str, Any]) -> None:
        self.volumes.remove_class(obj)

    # ---- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule pods until cancelled; in-flight bindings are awaited on the way out."""
        log.info("scheduler %s: scheduling loop started", self.scheduler_name)
        try:
            while True:
                qp = await self.queue.pop()
                try:
                    self.schedule_one(qp)
                except Exception:  # a bug must cost one pod a retry, not the whole loop
                    log.exception("scheduling cycle for %s crashed; will retry it", qp.key)
                    self.cache.forget(qp.key)
                    self.queue.requeue_backoff(qp)
                # let informers, bindings and the HTTP server run between cycles
                await asyncio.sleep(0)
        finally:
            for waiting in self._pre_binding:
                waiting.cancel()  # a claim may take minutes to bind; the retry is the next leader's
            tasks = [*self._binds, *self._status_writes]
            if tasks:
                log.info("scheduler: waiting for %d in-flight binding(s) to finish", len(tasks))
                await asyncio.gather(*tasks, return_exceptions=True)

    def schedule_one(self, qp: QueuedPod) -> None:
        """One scheduling cycle for ``qp`` (synchronous); the binding runs as a task."""
        pod = qp.pod
        if pod.deleting or self.cache.is_placed(pod.key):
            self.queue.done(qp)
            return
        started = time.perf_counter()
        try:
            result = self.framework.schedule(
                pod, self.cache.nodes(), nodes_version=self.cache.static_version
            )
        except FitError as err:
            self.metrics.attempt("unschedulable", time.perf_counter() - started)
            self._unschedulable(qp, err)
            return
        except Exception:
            self.metrics.attempt("error", time.perf_counter() - started)
            log.exception("scheduling %s failed; will retry after backoff", pod.key)
            self.queue.requeue_backoff(qp)
            return
        rejected = self.framework.run_reserve(result.state, pod, result.node)
        if rejected is not None:
            self.metrics.attempt("error", time.perf_counter() - started)
            log.warning(
                "reserving %s on %s failed: %s; will retry after backoff",
                pod.key, result.node, rejected.message,
            )  # fmt: skip
            self.queue.requeue_backoff(qp)
            return
        self.cache.assume(pod, result.node)
        task = asyncio.create_task(self._bind(qp, result, started), name=f"bind {pod.key}")
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)

    async def _bind(self, qp: QueuedPod, result: ScheduleResult, started: float) -> None:
        """The binding cycle; ``started`` is when the scheduling cycle began (perf_counter).

        ``run`` gathers these tasks on the way out, so each ends by itself (or is cancelled
        while it waits in PreBind)."""
        pod, node = qp.pod, result.node
        try:
            if not await self._pre_bind(qp, result, started):
                return
            async with self._bind_slots:
                await self.client.bind(
                    namespace=pod.namespace, pod=pod.name, node=node, uid=pod.uid or None
                )
        except (Conflict, AlreadyExists) as exc:
            # someone bound it first (another replica, or our own earlier life): not an error
            log.info("pod %s was already bound (%s); leaving it to the watch", pod.key, exc.message)
            self._undo(qp, result)
            if qp.updated and not qp.deleted:
                self.queue.requeue_backoff(qp)
            else:
                self.queue.done(qp)
            return
        except NotFound:
            log.info("pod %s is gone; not binding it", pod.key)
            self._undo(qp, result)
            self.queue.done(qp)
            return
        except (StatusError, ConnectionError, TimeoutError) as exc:
            log.warning("binding %s to %s failed: %r; will retry after backoff", pod.key, node, exc)
            self.metrics.attempt("error", time.perf_counter() - started)
            self._undo(qp, result)
            self.queue.requeue_backoff(qp)
            return
        except asyncio.CancelledError:
            self._undo(qp, result)
            raise
        self.bound += 1
        self.metrics.attempt("scheduled", time.perf_counter() - started)
        self.queue.done(qp)
        self.metrics.scheduled(attempts=qp.attempts, seconds=max(0.0, _loop_time() - qp.added_at))
        log.debug("bound %s to %s (attempt %d)", pod.key, node, qp.attempts)
        self._event(pod, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node}")

    async def _pre_bind(self, qp: QueuedPod, result: ScheduleResult, started: float) -> bool:
        """Run the PreBind plugins; on failure undo the cycle, say why and retry: False."""
        pod = qp.pod
        task = asyncio.current_task()
        assert task is not None
        self._pre_binding.add(task)
        try:
            rejected = await self.framework.run_pre_bind(result.state, pod, result.node)
        finally:
            self._pre_binding.discard(task)
        if rejected is None:
            return True
        message = f'running PreBind plugin "{rejected.plugin}": {rejected.message}'
        log.warning("pod %s on %s: %s; will retry after backoff", pod.key, result.node, message)
        self.metrics.attempt("error", time.perf_counter() - started)
        self._undo(qp, result)
        self._event(pod, "Warning", "FailedScheduling", message)
        self.queue.requeue_backoff(qp)
        return False

    def _undo(self, qp: QueuedPod, result: ScheduleResult) -> None:
        """The binding cycle failed: drop the reservations and the assumed pod."""
        self.framework.run_unreserve(result.state, qp.pod, result.node)
        self.cache.forget(qp.pod.key)

    def _unschedulable(self, qp: QueuedPod, err: FitError) -> None:
        pod = qp.pod
        message = str(err)
        log.info("pod %s is unschedulable: %s; parked until the cluster changes", pod.key, message)
        self._event(pod, "Warning", "FailedScheduling", message)
        self.queue.requeue_unschedulable(qp, plugins=frozenset(err.diagnosis.unschedulable_plugins))
        if _condition_differs(pod, message):
            task = asyncio.create_task(
                self._set_unschedulable_condition(pod, message), name=f"pod condition {pod.key}"
            )
            self._status_writes.add(task)
            task.add_done_callback(self._status_writes.discard)

    async def _set_unschedulable_condition(self, pod: PodInfo, message: str) -> None:
        """``PodScheduled=False, reason Unschedulable`` so ``kubectl describe`` says why."""
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": now_time(),
            "reason": "Unschedulable",
            "message": message,
        }
        others = [
            c
            for c in (pod.obj.get("status") or {}).get("conditions") or ()
            if c.get("type") != "PodScheduled"
        ]
        patch = {"status": {"conditions": [*others, condition]}}
        try:
            await self.client.patch(
                PODS, pod.name, patch, namespace=pod.namespace, subresource="status"
            )
        except NotFound:
            return
        except (StatusError, ConnectionError, TimeoutError) as exc:
            log.warning("could not set PodScheduled=False on %s: %r", pod.key, exc)

    def _event(self, pod: PodInfo, type_: EventType, reason: str, message: str) -> None:
        if self.recorder is None:
            return
        ref = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
                "resourceVersion": pod.resource_version,
            },
        }
        self.recorder.event(ref, type_, reason, message)


def _scheduling_relevant_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Did anything but status and bookkeeping change? (kube-scheduler's ``isPodUpdated``)."""
    if old.get("spec") != new.get("spec"):
        return True
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return any(
        old_meta.get(field) != new_meta.get(field)
        for field in ("labels", "annotations", "ownerReferences", "deletionTimestamp", "uid")
    )


def _condition_differs(pod: PodInfo, message: str) -> bool:
    for c in (pod.obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return not (
                c.get("status") == "False"
                and c.get("reason") == "Unschedulable"
                and c.get("message") == message
            )
    return True


def _loop_time() -> float:
    return asyncio.get_running_loop().time()
