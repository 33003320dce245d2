"""The scheduling queue: pending pods in three sub-queues, as kube-scheduler keeps them.

* **active** — ready to be tried, highest ``spec.priority`` first, then oldest first.
* **backoff** — failed recently; each goes back to active when its backoff expires
  (``initial * 2^(attempts-1)``, capped: 1 s, 2 s, 4 s ... 10 s by default).
* **unschedulable** — failed and nothing has changed since that could help. A pod leaves only
  when a *cluster event* that could help arrives (a node added, a node's labels/taints/
  allocatable/readiness changed, an assigned pod deleted ...), and only if the event concerns a
  plugin that rejected it; then it goes to backoff (or straight to active if its backoff is
  already over). As a safety net a pod parked for five minutes is retried anyway.

So a pod that cannot be scheduled costs nothing while nothing changes, and a burst of events does
not turn into a burst of retries (backoff still applies). To not lose an event that arrives
*while* a pod is being scheduled (its cycle read the cache before the event), the queue counts
cycles: a pod that fails in a cycle that started before the latest move request goes to backoff,
not unschedulable (kube-scheduler's ``moveRequestCycle``).

Per-pod backoff is deterministic (no jitter) and derived from the pod's attempt count, as in
kube-scheduler; it is a property of the queue, not a retry loop, so it does not use
``client.backoff``. Time is the event loop's clock, so tests drive it with looptime. Keys are
``namespace/name``; one key is in exactly one place (a sub-queue or in flight) at a time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from services.scheduler.nodeinfo import PodInfo

__all__ = [
    "ASSIGNED_POD_DELETE",
    "NODE_ADD",
    "UNSCHEDULABLE_TIMEOUT",
    "ClusterEvent",
    "QueuedPod",
    "SchedulingQueue",
]

log = logging.getLogger("kubelite.scheduler.queue")

# kube-scheduler's podMaxInUnschedulablePodsDuration: the safety net for an event we did not
# model (or missed) — no pod waits longer than this for a retry.
MAX_UNSCHEDULABLE_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """Something changed in the cluster; ``plugins`` it may help (None: any plugin)."""

    label: str
    plugins: frozenset[str] | None = None


NODE_ADD = ClusterEvent("NodeAdd")
ASSIGNED_POD_DELETE = ClusterEvent("AssignedPodDelete", frozenset({"NodeResourcesFit"}))
UNSCHEDULABLE_TIMEOUT = ClusterEvent("UnschedulableTimeout")


@dataclass(slots=True, eq=False)
class QueuedPod:
    """A pending pod and its scheduling history."""

    pod: PodInfo
    added_at: float
    """When the scheduler first saw it pending: the start of its end-to-end latency."""
    timestamp: float = 0.0
    """When it last entered a sub-queue (ordering within a priority, backoff start)."""
    attempts: int = 0
    cycle: int = 0
    """The scheduling cycle of its latest attempt."""
    unschedulable_plugins: frozenset[str] = field(default_factory=frozenset)
    backoff_expiry: float = 0.0
    deleted: bool = False
    updated: bool = False
    """Changed while in flight: a failure should retry it rather than park it."""

    @property
    def key(self) -> str:
        return self.pod.key


class SchedulingQueue:
    """Active, backoff and unschedulable sub-queues; ``pop()`` awaits the next pod to try.

    Call ``run()`` as a background task: it moves pods whose backoff ended (and pods parked too
    long) back to active. The scheduler must answer every ``pop()`` with exactly one of
    ``done`` (bound or abandoned), ``requeue_unschedulable`` or ``requeue_backoff``.
    """

    def __init__(
        self,
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable: float = MAX_UNSCHEDULABLE_SECONDS,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        self._clock = clock
        self._seq = itertools.count()
        self._active_heap: list[tuple[int, float, int, QueuedPod]] = []
        self._active: dict[str, QueuedPod] = {}
        self._backoff_heap: list[tuple[float, int, QueuedPod]] = []
        self._backoff: dict[str, QueuedPod] = {}
        self._unschedulable: dict[str, QueuedPod] = {}
        self._in_flight: dict[str, QueuedPod] = {}
        self._scheduling_cycle = 0
        self._move_request_cycle = -1
        self._has_active = asyncio.Event()
        self._timers_changed = asyncio.Event()
        self._closed = False

    # ---- clock and sizes ---------------------------------------------------------------

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def lengths(self) -> dict[str, int]:
        return {
            "active": len(self._active),
            "backoff": len(self._backoff),
            "unschedulable": len(self._unschedulable),
        }

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._unschedulable)

    def __contains__(self, key: object) -> bool:
        return (
            key in self._active
            or key in self._backoff
            or key in self._unschedulable
            or key in self._in_flight
        )

    def backoff_duration(self, attempts: int) -> float:
        if attempts <= 0:
            return 0.0
        # doubling in floats would overflow for huge attempt counts; the cap is reached by 64
        return min(self.max_backoff, self.initial_backoff * 2.0 ** min(attempts - 1, 64))

    # ---- moving between sub-queues -------------------------------------------------------

    def _push_active(self, qp: QueuedPod, now: float) -> None:
        qp.timestamp = now
        self._active[qp.key] = qp
        heapq.heappush(self._active_heap, (-qp.pod.priority, now, next(self._seq), qp))
        self._has_active.set()

    def _push_backoff(self, qp: QueuedPod, now: float) -> None:
        qp.timestamp = now
        qp.backoff_expiry = now + self.backoff_duration(qp.attempts)
        self._backoff[qp.key] = qp
        heapq.heappush(self._backoff_heap, (qp.backoff_expiry, next(self._seq), qp))
        self._timers_changed.set()

    def _push_active_or_backoff(self, qp: QueuedPod, now: float) -> None:
        if qp.attempts and now < qp.timestamp + self.backoff_duration(qp.attempts):
            self._push_backoff_keep_start(qp)
        else:
            self._push_active(qp, now)

    def _push_backoff_keep_start(self, qp: QueuedPod) -> None:
        # the backoff counts from the failure, not from the event that released the pod
        qp.backoff_expiry = qp.timestamp + self.backoff_duration(qp.attempts)
        self._backoff[qp.key] = qp
        heapq.heappush(self._backoff_heap, (qp.backoff_expiry, next(self._seq), qp))
        self._timers_changed.set()

    def _take(self, key: str) -> QueuedPod | None:
        """Remove ``key`` from whichever sub-queue holds it (heaps are cleaned lazily)."""
        for place in (self._active, self._backoff, self._unschedulable):
            qp = place.pop(key, None)
            if qp is not None:
                if not self._active:
                    self._has_active.clear()
                return qp
        return None

    # ---- informer-facing -----------------------------------------------------------------

    def add(self, pod: PodInfo) -> None:
        """A pending pod appeared (or reappeared after a relist): queue it once."""
        if pod.key in self:
            self.update(pod)
            return
        now = self._now()
        self._push_active(QueuedPod(pod=pod, added_at=now), now)

    def update(self, pod: PodInfo, *, changed: bool = True) -> None:
        """A pending pod changed; ``changed`` False for changes scheduling ignores (status).

        A parked pod whose spec or labels changed is released: the change may make it
        schedulable. A status-only change (our own PodScheduled condition, say) just refreshes
        the stored object, as kube-scheduler's ``isPodUpdated`` decides.
        """
        key = pod.key
        flying = self._in_flight.get(key)
        if flying is not None:
            flying.pod = pod
            flying.updated = flying.updated or changed
            return
        for place in (self._active, self._backoff):
            qp = place.get(key)
            if qp is not None:
                qp.pod = pod
                return
        parked = self._unschedulable.get(key)
        if parked is None:
            self.add(pod)
            return
        parked.pod = pod
        if changed:
            del self._unschedulable[key]
            self._push_active_or_backoff(parked, self._now())

    def delete(self, key: str) -> None:
        """The pod is gone or got a node: forget it wherever it is."""
        flying = self._in_flight.get(key)
        if flying is not None:
            flying.deleted = True
        self._take(key)

    def on_event(self, event: ClusterEvent) -> int:
        """Release parked pods that ``event`` may help; returns how many moved."""
        self._move_request_cycle = self._scheduling_cycle
        if not self._unschedulable:
            return 0
        now = self._now()
        moved = [
            qp
            for qp in self._unschedulable.values()
            if event.plugins is None
            or not qp.unschedulable_plugins
            or not event.plugins.isdisjoint(qp.unschedulable_plugins)
        ]
        for qp in moved:
            del self._unschedulable[qp.key]
            self._push_active_or_backoff(qp, now)
        if moved:
            log.debug("%s released %d unschedulable pod(s)", event.label, len(moved))
        return len(moved)

    # ---- scheduler-facing ----------------------------------------------------------------

    async def pop(self) -> QueuedPod:
        """The next pod to try, waiting while the active queue is empty."""
        while True:
            while self._active_heap:
                _, _, _, qp = heapq.heappop(self._active_heap)
                if self._active.get(qp.key) is not qp:
                    continue  # stale heap entry: moved or deleted since it was pushed
                del self._active[qp.key]
                if not self._active:
                    self._has_active.clear()
                self._scheduling_cycle += 1
                qp.cycle = self._scheduling_cycle
                qp.attempts += 1
                qp.updated = False
                self._in_flight[qp.key] = qp
                return qp
            self._has_active.clear()
            await self._has_active.wait()

    def done(self, qp: QueuedPod) -> None:
        """The attempt is over and the pod needs nothing more from the queue (bound or gone)."""
        self._in_flight.pop(qp.key, None)

    def requeue_unschedulable(self, qp: QueuedPod, *, plugins: frozenset[str]) -> None:
        """No node fits: park the pod until an event concerning ``plugins`` arrives.

        If an event arrived while it was being scheduled, or the pod itself changed, it goes
        to backoff instead: its failed cycle may not have seen that change.
        """
        if self._in_flight.pop(qp.key, None) is None or qp.deleted:
            return
        qp.unschedulable_plugins = plugins
        now = self._now()
        if qp.updated or self._move_request_cycle >= qp.cycle:
            self._push_backoff(qp, now)
        else:
            qp.timestamp = now
            self._unschedulable[qp.key] = qp
            self._timers_changed.set()

    def requeue_backoff(self, qp: QueuedPod) -> None:
        """Retry after the pod's backoff (an error, or a bind that failed)."""
        if self._in_flight.pop(qp.key, None) is None or qp.deleted:
            return
        self._push_backoff(qp, self._now())

    # ---- the timer task ------------------------------------------------------------------

    def flush(self) -> float | None:
        """Move due pods to active; return the time of the next due pod (None: nothing due)."""
        now = self._now()
        heap = self._backoff_heap
        while heap:
            expiry, _, qp = heap[0]
            if self._backoff.get(qp.key) is not qp or qp.backoff_expiry != expiry:
                heapq.heappop(heap)
                continue
            if expiry > now:
                break
            heapq.heappop(heap)
            del self._backoff[qp.key]
            self._push_active(qp, now)
        next_due = heap[0][0] if heap else None
        if self._unschedulable:
            stale = [
                qp
                for qp in self._unschedulable.values()
                if now - qp.timestamp >= self.max_unschedulable
            ]
            for qp in stale:
                del self._unschedulable[qp.key]
                self._push_active_or_backoff(qp, now)
            if self._unschedulable:
                oldest = min(qp.timestamp for qp in self._unschedulable.values())
                due = oldest + self.max_unschedulable
                next_due = due if next_due is None else min(next_due, due)
        return next_due

    async def run(self) -> None:
        """Forever: sleep until the next backoff expiry (or a change), then flush."""
        while True:
            self._timers_changed.clear()
            next_due = self.flush()
            timeout = None if next_due is None else max(0.0, next_due - self._now())
            try:
                await asyncio.wait_for(self._timers_changed.wait(), timeout)
            except TimeoutError:
                pass
