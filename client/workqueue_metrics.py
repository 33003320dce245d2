"""Work-queue metrics with client-go's names: ``workqueue_*{name}`` for every queue.

Why: a controller that falls behind shows it in its queue first — keys waiting longer, workers
busy longer, retries climbing. client-go's ``util/workqueue`` reports that through a metrics
provider the component installs once (``workqueue.SetProvider``, component-base's
``prometheus/workqueue``); this module is that provider over a component's
``component.metrics.Metrics``, with the same metrics and meanings (``queue_metrics.go``):

* ``workqueue_adds_total``: keys added (an ``add`` of a key already queued is not counted);
* ``workqueue_depth``: keys added and not yet taken by a worker;
* ``workqueue_queue_duration_seconds``: from the first add to a worker taking the key;
* ``workqueue_work_duration_seconds``: from taking a key to ``done``;
* ``workqueue_retries_total``: ``add_rate_limited`` calls;
* ``workqueue_unfinished_work_seconds`` / ``workqueue_longest_running_processor_seconds``: the
  summed and the longest time the keys being processed have been processed (read at the
  scrape, where client-go refreshes them every 500 ms).

Histogram buckets are client-go's: 10 ns x 10^i for i < 10 (up to 10 s).

How a queue finds its provider: ``WorkQueue(name=...)`` built inside
``WorkQueueMetrics.providing()`` reports to it (a context variable, so two components in one
process keep their own — client-go's provider is process-global). A queue built outside any
provider, or given ``metrics=None`` explicitly outside one, reports nowhere.

Limits: as in client-go, a queue dropped while keys were queued leaves its depth behind (the
controller-manager exits when it loses its lease, so this does not arise there).
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Hashable, Iterator
from contextvars import ContextVar

from component.metrics import Metrics, Samples, exponential_buckets

__all__ = ["QueueMetrics", "WorkQueueMetrics", "queue_metrics"]

_BUCKETS = exponential_buckets(10e-9, 10, 10)
"""client-go's queue and work duration buckets: 10 ns to 10 s."""


class QueueMetrics:
    """One queue's view of its provider (a no-op base when there is none)."""

    def add(self, item: Hashable) -> None:
        """A key entered the queue (not a duplicate add)."""

    def get(self, item: Hashable) -> None:
        """A worker took the key."""

    def done(self, item: Hashable) -> None:
        """The worker finished the key."""

    def retry(self) -> None:
        """The key was re-added after a failure."""


NO_METRICS = QueueMetrics()


class _MeasuredQueue(QueueMetrics):
    def __init__(self, provider: WorkQueueMetrics, name: str) -> None:
        self.adds = provider.adds.labels(name)
        self.depth = provider.depth.labels(name)
        self.latency = provider.queue_duration.labels(name)
        self.work_duration = provider.work_duration.labels(name)
        self.retries = provider.retries.labels(name)
        self.name = name
        self.added_at: dict[Hashable, float] = {}
        self.started_at: dict[Hashable, float] = {}

    def add(self, item: Hashable) -> None:
        self.adds.inc()
        self.depth.inc()
        self.added_at.setdefault(item, time.monotonic())

    def get(self, item: Hashable) -> None:
        now = time.monotonic()
        self.depth.dec()
        self.started_at[item] = now
        added = self.added_at.pop(item, None)
        if added is not None:
            self.latency.observe(now - added)

    def done(self, item: Hashable) -> None:
        started = self.started_at.pop(item, None)
        if started is not None:
            self.work_duration.observe(time.monotonic() - started)

    def retry(self) -> None:
        self.retries.inc()


class WorkQueueMetrics:
    """The provider: client-go's seven ``workqueue_*`` metrics on ``metrics``."""

    def __init__(self, metrics: Metrics) -> None:
        self.adds = metrics.counter(
            "workqueue_adds_total", "Total number of adds handled by workqueue", ("name",)
        )
        self.depth = metrics.gauge("workqueue_depth", "Current depth of workqueue", ("name",))
        self.queue_duration = metrics.histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            ("name",),
            buckets=_BUCKETS,
        )
        self.work_duration = metrics.histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            ("name",),
            buckets=_BUCKETS,
        )
        self.retries = metrics.counter(
            "workqueue_retries_total", "Total number of retries handled by workqueue", ("name",)
        )
        metrics.gauges(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by "
            "work_duration. Large values indicate stuck threads. One can deduce the number of "
            "stuck threads by observing the rate at which this increases.",
            ("name",),
            self._unfinished,
        )
        metrics.gauges(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            ("name",),
            self._longest,
        )
        self._queues: weakref.WeakSet[_MeasuredQueue] = weakref.WeakSet()

    def for_queue(self, name: str) -> QueueMetrics:
        queue = _MeasuredQueue(self, name)
        self._queues.add(queue)
        return queue

    @contextlib.contextmanager
    def providing(self) -> Iterator[None]:
        """Queues built inside the block report here."""
        token = _PROVIDER.set(self)
        try:
            yield
        finally:
            _PROVIDER.reset(token)

    def _running(self) -> dict[str, list[float]]:
        """Per queue name, how long each key being processed has been processed."""
        now = time.monotonic()
        running: dict[str, list[float]] = {}
        for queue in list(self._queues):
            ages = running.setdefault(queue.name, [])
            ages.extend(now - started for started in queue.started_at.values())
        return running

    def _unfinished(self) -> Samples:
        return [((name,), sum(ages)) for name, ages in sorted(self._running().items())]

    def _longest(self) -> Samples:
        return [((name,), max(ages, default=0.0)) for name, ages in sorted(self._running().items())]


_PROVIDER: ContextVar[WorkQueueMetrics | None] = ContextVar("workqueue_metrics", default=None)


def queue_metrics(name: str) -> QueueMetrics:
    """What a queue named ``name`` reports to: the current provider's, or nothing."""
    provider = _PROVIDER.get()
    return NO_METRICS if provider is None else provider.for_queue(name)
