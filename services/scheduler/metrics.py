"""The scheduler's ``/metrics``: kube-scheduler's metric names (``pkg/scheduler/metrics``).

* ``scheduler_schedule_attempts_total{result,profile}`` — attempts by result: ``scheduled``,
  ``unschedulable``, ``error``. ``scheduled`` is counted when the binding succeeded, as
  kube-scheduler counts it.
* ``scheduler_scheduling_attempt_duration_seconds{result,profile}`` — one attempt: filter,
  score, assume, and for ``scheduled`` the binding too (1 ms doubling 15 times).
* ``scheduler_pod_scheduling_sli_duration_seconds{attempts}`` — end to end, from the moment the
  scheduler first saw the pod pending to its binding succeeding, over all attempts (10 ms
  doubling 20 times); ``attempts`` is how many it took.
* ``scheduler_pending_pods{queue}`` — queue depth: ``active``, ``backoff``, ``unschedulable``
  (read from the queue when scraped).
* ``leader_election_master_status{name}`` — 1 while this replica leads.

Each scheduler has its own registry (``component.metrics``): tests run several in one process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from component.metrics import Metrics, Samples, exponential_buckets, leader_election_status

__all__ = ["SchedulerMetrics"]

_SLI_BUCKETS = exponential_buckets(0.01, 2, 20)
_ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)


class SchedulerMetrics:
    """One scheduler's metrics; ``render()`` is the ``/metrics`` body."""

    def __init__(
        self,
        *,
        profile: str,
        queue_lengths: Callable[[], Mapping[str, int]] = dict,
        is_leader: Callable[[], bool] = lambda: True,
        lease_name: str = "kube-scheduler",
    ) -> None:
        self.profile = profile
        self.metrics = Metrics()
        m = self.metrics
        self.attempts = m.counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ("result", "profile"),
        )
        self.attempt_duration = m.histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ("result", "profile"),
            buckets=_ATTEMPT_BUCKETS,
        )
        self.sli_duration = m.histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
            "queue and might involve multiple scheduling attempts.",
            ("attempts",),
            buckets=_SLI_BUCKETS,
        )

        def pending() -> Samples:
            return [((queue,), float(n)) for queue, n in sorted(queue_lengths().items())]

        m.gauges(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number "
            "of pods in unschedulablePods.",
            ("queue",),
            pending,
        )
        leader_election_status(m, lease_name=lease_name, is_leader=is_leader)

    def attempt(self, result: str, duration: float) -> None:
        self.attempts.labels(result, self.profile).inc()
        self.attempt_duration.labels(result, self.profile).observe(duration)

    def scheduled(self, *, attempts: int, seconds: float) -> None:
        """A pod was bound after ``attempts`` attempts, ``seconds`` after it was first seen."""
        self.sli_duration.labels(str(attempts)).observe(seconds)

    def attempts_of(self, result: str) -> float:
        """How many attempts ended with ``result`` so far."""
        value = self.metrics.registry.get_sample_value(
            "scheduler_schedule_attempts_total", {"result": result, "profile": self.profile}
        )
        return value or 0.0

    def render(self) -> str:
        return self.metrics.render()
