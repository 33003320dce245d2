"""One Prometheus registry per component, rendered as its ``/metrics`` page.

Why: every component serves ``/metrics`` with Kubernetes' metric names, so dashboards and
alerts written for Kubernetes read kubelite unchanged. ``prometheus-client`` owns the metric
kinds, the text format and its escaping; this module owns what kubelite adds around it:

* ``Metrics``: a component's own ``CollectorRegistry`` (never the process-global one: tests run
  several components in one process, and each must count only its own requests);
  ``counter``/``gauge``/``histogram`` register on it, ``render()`` is the page;
* ``gauges(name, doc, labels, read)``: a gauge family whose values are read from the
  component's state when scraped (queue lengths, watcher counts, objects stored), instead of a
  gauge kept in step by every code path that changes the state;
* ``exponential_buckets`` / ``linear_buckets``: component-base's bucket helpers, so histogram
  buckets are written as Kubernetes writes them.

Counters are exposed without the ``_created`` series prometheus-client adds by default (set off
for the process): Kubernetes' components do not send them.

Not here: serving (``component.health.HealthServer.add_metrics``), authorization (the
apiserver's ``/metrics`` is checked by its RBAC; the other components bind it to loopback),
OpenMetrics, exemplars, stability levels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE",
    "Metrics",
    "Samples",
    "exponential_buckets",
    "linear_buckets",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""``text/plain; version=0.0.4; charset=utf-8``: Prometheus' text format."""

Samples = Iterable[tuple[Sequence[str], float]]
"""What a scrape-time gauge reads: ``(label values, value)`` pairs."""

disable_created_metrics()


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base's ``ExponentialBuckets``: ``start``, ``start*factor``, ... (``count``)."""
    return tuple(start * factor**i for i in range(count))


def linear_buckets(start: float, width: float, count: int) -> tuple[float, ...]:
    """component-base's ``LinearBuckets``: ``start``, ``start+width``, ... (``count``)."""
    return tuple(start + width * i for i in range(count))


class _ReadGauges(Collector):
    """One gauge family whose samples ``read()`` returns when the registry is collected."""

    def __init__(
        self, name: str, documentation: str, labels: Sequence[str], read: Callable[[], Samples]
    ) -> None:
        self.name, self.documentation, self.labels, self.read = name, documentation, labels, read

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=list(self.labels))
        for values, value in self.read():
            family.add_metric(list(values), value)
        yield family

    def describe(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(self.name, self.documentation, labels=list(self.labels))


class Metrics:
    """A component's metrics: register with the methods below, serve ``render()``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

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
        self.registry.register(_ReadGauges(name, documentation, labels, read))

    def render(self) -> str:
        """The ``/metrics`` page: every metric registered here, in Prometheus' text format."""
        return generate_latest(self.registry).decode()
