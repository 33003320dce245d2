"""One Prometheus registry per component, rendered as its ``/metrics`` page.

Why: every component serves ``/metrics`` with Kubernetes' metric names, so dashboards and
alerts written for Kubernetes read kubelite unchanged. ``prometheus-client`` owns the metric
kinds, the text format and its escaping; this module owns what kubelite adds around it:

* ``Metrics``: a component's own ``CollectorRegistry`` (never the process-global one: tests run
  several components in one process, and each must count only its own requests);
  ``counter``/``gauge``/``histogram`` register on it, ``render()`` is the page;
* ``gauges(name, doc, labels, read)`` / ``counters(...)``: a family whose values are read from
  the component's state when scraped (queue lengths, objects stored, events a cache has
  counted in a plain integer), instead of a metric kept in step by every code path that
  changes the state;
* ``exponential_buckets`` / ``linear_buckets``: component-base's bucket helpers, so histogram
  buckets are written as Kubernetes writes them;
* ``leader_election_status``: client-go's ``leader_election_master_status{name}``, the one
  metric every replicated component (scheduler, controller-manager) reports alike;
* on every registry, the garbage collector's pauses (``component.gcpauses``):
  ``python_gc_pauses_total``, ``python_gc_pause_seconds_total`` and
  ``python_gc_pause_max_seconds``, each by ``generation``.

Counters are exposed without the ``_created`` series prometheus-client adds by default (set off
for the process): Kubernetes' components do not send them.

Not here: serving (``component.health.HealthServer.add_metrics``), authorization (the
apiserver's ``/metrics`` is checked by its RBAC; the other components bind it to loopback),
OpenMetrics, exemplars, stability levels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from component.gcpauses import PAUSES

__all__ = [
    "CONTENT_TYPE",
    "Metrics",
    "Samples",
    "exponential_buckets",
    "leader_election_status",
    "linear_buckets",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus' text format, as Kubernetes' components label it (what ``render`` writes)."""

Samples = Iterable[tuple[Sequence[str], float]]
"""What a scrape-time gauge reads: ``(label values, value)`` pairs."""

disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus-client


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base's ``ExponentialBuckets``: ``start``, ``start*factor``, ... (``count``)."""
    return tuple(start * factor**i for i in range(count))


def linear_buckets(start: float, width: float, count: int) -> tuple[float, ...]:
    """component-base's ``LinearBuckets``: ``start``, ``start+width``, ... (``count``)."""
    return tuple(start + width * i for i in range(count))


class _ReadFamily(Collector):
    """One metric family whose samples ``read()`` returns when the registry is collected."""

    def __init__(
        self,
        family: type[GaugeMetricFamily] | type[CounterMetricFamily],
        name: str,
        documentation: str,
        labels: Sequence[str],
        read: Callable[[], Samples],
    ) -> None:
        self.family, self.name, self.documentation = family, name, documentation
        self.labels, self.read = list(labels), read

    def collect(self) -> Iterable[Metric]:
        family = self.family(self.name, self.documentation, labels=self.labels)
        for values, value in self.read():
            family.add_metric(list(values), value)
        yield family

    def describe(self) -> Iterable[Metric]:
        yield self.family(self.name, self.documentation, labels=self.labels)


class Metrics:
    """A component's metrics: register with the methods below, serve ``render()``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._collector_pauses()

    def _collector_pauses(self) -> None:
        """The garbage collector's pauses (``component.gcpauses``), per generation."""

        def by_generation(values: list[int] | list[float]) -> Samples:
            return [((str(g),), float(v)) for g, v in enumerate(values)]

        self.counters(
            "python_gc_pauses_total",
            "Collections of each generation by the cyclic garbage collector, timed.",
            ("generation",),
            lambda: by_generation(PAUSES.count),
        )
        self.counters(
            "python_gc_pause_seconds_total",
            "Seconds the cyclic garbage collector spent collecting each generation; the event "
            "loop stands still meanwhile.",
            ("generation",),
            lambda: by_generation(PAUSES.seconds),
        )
        self.gauges(
            "python_gc_pause_max_seconds",
            "The longest collection of each generation since the process started.",
            ("generation",),
            lambda: by_generation(PAUSES.longest),
        )

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(name, documentation, labelnames=labels, registry=self.registry)

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(name, documentation, labelnames=labels, registry=self.registry)

    def histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str] = (),
        *,
        buckets: Sequence[float],
    ) -> Histogram:
        return Histogram(
            name, documentation, labelnames=labels, buckets=buckets, registry=self.registry
        )

    def gauges(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        read: Callable[[], Samples],
    ) -> None:
        """A gauge family read from the component's state at each scrape."""
        self.registry.register(_ReadFamily(GaugeMetricFamily, name, documentation, labels, read))

    def counters(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        read: Callable[[], Samples],
    ) -> None:
        """A counter family read from the component's state at each scrape (``name`` ends in
        ``_total``; ``read`` must never go down)."""
        self.registry.register(_ReadFamily(CounterMetricFamily, name, documentation, labels, read))

    def render(self) -> str:
        """The ``/metrics`` page: every metric registered here, in Prometheus' text format."""
        return generate_latest(self.registry).decode()


def leader_election_status(
    metrics: Metrics, *, lease_name: str, is_leader: Callable[[], bool]
) -> None:
    """client-go's ``leader_election_master_status{name}`` (``tools/leaderelection/metrics.go``):
    1 while ``is_leader()``, else 0, for the lease ``lease_name``; read at each scrape."""
    metrics.gauges(
        "leader_election_master_status",
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
        "backup, 1 indicates master. 'name' is the string used to identify the lease.",
        ("name",),
        lambda: [((lease_name,), 1.0 if is_leader() else 0.0)],
    )
