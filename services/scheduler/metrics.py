"""The scheduler's ``/metrics``: Prometheus text format, kube-scheduler's metric names.

* ``scheduler_schedule_attempts_total{result,profile}`` — attempts by result: ``scheduled``,
  ``unschedulable``, ``error``.
* ``scheduler_pod_scheduling_sli_duration_seconds`` — end to end, from the moment the scheduler
  first saw the pod pending to its binding succeeding, over all attempts (histogram).
* ``scheduler_scheduling_attempt_duration_seconds{result}`` — one attempt: filter, score,
  assume, and for ``scheduled`` the binding too (histogram). ``scheduled`` is counted when
  the binding succeeded, as kube-scheduler counts it.
* ``scheduler_pending_pods{queue}`` — queue depth: ``active``, ``backoff``, ``unschedulable``
  (read from the queue when scraped).
* ``leader_election_master_status{name}`` — 1 while this replica leads.

Why hand-written: three metric kinds and one text format do not justify a dependency, and the
instances stay per-scheduler (tests run several in one process). Limits: no exemplars, no
OpenMetrics; label values are not escaped beyond quotes and backslashes.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping

__all__ = ["Counter", "Histogram", "SchedulerMetrics"]

# kube-scheduler's exponential buckets for scheduling latency: 0.01 s doubling 20 times
_LATENCY_BUCKETS = tuple(0.01 * 2**i for i in range(20))
_ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in labels.items()
    )
    return "{" + inner + "}"


class Counter:
    def __init__(self, name: str, help_: str) -> None:
        self.name, self.help = name, help_
        self.values: dict[tuple[tuple[str, str], ...], float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        self.values[key] = self.values.get(key, 0.0) + amount

    def get(self, **labels: str) -> float:
        return self.values.get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        for key, value in sorted(self.values.items()):
            lines.append(f"{self.name}{_labels(dict(key))} {value:g}")
        return lines


class Histogram:
    def __init__(self, name: str, help_: str, buckets: tuple[float, ...]) -> None:
        self.name, self.help, self.buckets = name, help_, buckets
        self.series: dict[tuple[tuple[str, str], ...], tuple[list[int], list[float]]] = {}

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        counts, totals = self.series.setdefault(key, ([0] * (len(self.buckets) + 1), [0.0]))
        counts[bisect.bisect_left(self.buckets, value)] += 1
        totals[0] += value

    def count(self, **labels: str) -> int:
        series = self.series.get(tuple(sorted(labels.items())))
        return sum(series[0]) if series else 0

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for key, (counts, totals) in sorted(self.series.items()):
            labels = dict(key)
            cumulative = 0
            for bound, n in zip(self.buckets, counts, strict=False):
                cumulative += n
                lines.append(
                    f"{self.name}_bucket{_labels({**labels, 'le': f'{bound:g}'})} {cumulative}"
                )
            cumulative += counts[-1]
            lines.append(f"{self.name}_bucket{_labels({**labels, 'le': '+Inf'})} {cumulative}")
            lines.append(f"{self.name}_sum{_labels(labels)} {totals[0]:g}")
            lines.append(f"{self.name}_count{_labels(labels)} {cumulative}")
        return lines


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
        self.queue_lengths = queue_lengths
        self.is_leader = is_leader
        self.lease_name = lease_name
        self.attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result.",
        )
        self.e2e_latency = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the "
            "scheduling queue until it is bound, over all attempts.",
            _LATENCY_BUCKETS,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            _ATTEMPT_BUCKETS,
        )

    def attempt(self, result: str, duration: float) -> None:
        self.attempts.inc(result=result, profile=self.profile)
        self.attempt_duration.observe(duration, result=result, profile=self.profile)

    def render(self) -> str:
        lines = [
            *self.attempts.render(),
            *self.e2e_latency.render(),
            *self.attempt_duration.render(),
        ]
        lines += [
            "# HELP scheduler_pending_pods Number of pending pods, by the queue type.",
            "# TYPE scheduler_pending_pods gauge",
        ]
        for queue, n in sorted(self.queue_lengths().items()):
            lines.append(f"scheduler_pending_pods{_labels({'queue': queue})} {n}")
        lines += [
            "# HELP leader_election_master_status 1 while this replica leads, 0 otherwise.",
            "# TYPE leader_election_master_status gauge",
            f"leader_election_master_status{_labels({'name': self.lease_name})} "
            f"{1 if self.is_leader() else 0}",
        ]
        return "\n".join(lines) + "\n"
