"""Metrics the apiserver updates on every request: plain numbers on its event loop.

Why: every request updates several metrics — ``apiserver_request_total`` and
``apiserver_request_duration_seconds``, priority and fairness' dispatch count, wait and
in-flight gauge, ``etcd_request_duration_seconds`` once per store call. prometheus-client's
metrics are thread-safe: each ``inc`` and ``observe`` takes a mutex and checks the metric is
observable, and ``labels()`` validates and locks. Under a create and get load that was ~4% of
the apiserver's CPU; the apiserver updates these metrics only from its event loop's thread, so
it needs none of it. The families here keep plain numbers, and render them at each scrape.

What it owns: ``LoopCounter``, ``LoopGauge`` and ``LoopHistogram``, registered on a
``component.metrics.Metrics`` registry. ``labels(*values)`` returns the child of that label
set (made at the first call, as prometheus-client makes it: a child exists, with zeros, from
then on); children ``inc``, ``dec``, ``track_inprogress`` and ``observe`` as
prometheus-client's do. The ``/metrics`` text is the one prometheus-client's ``Counter``,
``Gauge`` and ``Histogram`` give for the same calls: same series in the same order, same
labels, ``le`` written as Go writes floats (pinned by
``tests/metrics/test_loop_metrics_render_as_prometheus_client.py``).

Limits: not thread-safe — only the event loop's thread may update them (reading, at the
scrape, happens there too); no exemplars, no ``_created`` series (kubelite turns those off
for the process), no removing a child; a ``NaN`` observation is counted in the first bucket
where prometheus-client counts it in none.
"""

from __future__ import annotations

import bisect
import math
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from component.metrics import Metrics

__all__ = ["LoopCounter", "LoopGauge", "LoopHistogram"]


class CounterChild:
    """One label set's count."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters can only be incremented by non-negative amounts")
        self.value += amount


class GaugeChild:
    """One label set's value; also its own ``with`` block for ``track_inprogress``."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def track_inprogress(self) -> GaugeChild:
        """One more for the ``with`` block, as prometheus-client's ``track_inprogress``."""
        return self

    def __enter__(self) -> None:
        self.value += 1

    def __exit__(self, *exc_info: object) -> None:
        self.value -= 1


class HistogramChild:
    """One label set's bucket counts (not cumulative) and sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0.0] * len(bounds)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        """Count ``amount`` in the first bucket whose upper bound is >= it."""
        self.counts[bisect.bisect_left(self.bounds, amount)] += 1
        self.sum += amount


Child = TypeVar("Child", CounterChild, GaugeChild, HistogramChild)


class _Family(Collector, Generic[Child]):
    """A metric family with labels: its children by label values, rendered at collection."""

    def __init__(
        self, metrics: Metrics, name: str, documentation: str, labels: Sequence[str]
    ) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labels)
        self._children: dict[tuple[str, ...], Child] = {}
        metrics.registry.register(self)

    def labels(self, *values: str) -> Child:
        """The child of ``values`` (one per label name), made at the first call."""
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values}")
            child = self._children[values] = self._child()
        return child

    @abstractmethod
    def _child(self) -> Child:
        """A new child, all zeros."""

    @abstractmethod
    def _family(self) -> Metric:
        """The empty metric family the children are added to."""

    @abstractmethod
    def _add(self, family: Metric, values: list[str], child: Child) -> None:
        """Add ``child``'s samples, labelled ``values``, to ``family``."""

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        for values, child in self._children.items():
            self._add(family, list(values), child)
        yield family

    def describe(self) -> Iterable[Metric]:
        yield self._family()


class LoopCounter(_Family[CounterChild]):
    """prometheus-client's ``Counter`` with labels, for the event loop's thread only."""

    def _child(self) -> CounterChild:
        return CounterChild()

    def _family(self) -> Metric:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, values: list[str], child: CounterChild) -> None:
        assert isinstance(family, CounterMetricFamily)
        family.add_metric(values, child.value)


class LoopGauge(_Family[GaugeChild]):
    """prometheus-client's ``Gauge`` with labels, for the event loop's thread only."""

    def _child(self) -> GaugeChild:
        return GaugeChild()

    def _family(self) -> Metric:
        return GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, values: list[str], child: GaugeChild) -> None:
        assert isinstance(family, GaugeMetricFamily)
        family.add_metric(values, child.value)


class LoopHistogram(_Family[HistogramChild]):
    """prometheus-client's ``Histogram`` with labels, for the event loop's thread only."""

    def __init__(
        self,
        metrics: Metrics,
        name: str,
        documentation: str,
        labels: Sequence[str],
        *,
        buckets: Sequence[float],
    ) -> None:
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError("histogram buckets must be in increasing order")
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        self.bounds = tuple(bounds)
        self._names = [floatToGoString(b) for b in self.bounds]  # type: ignore[no-untyped-call]
        super().__init__(metrics, name, documentation, labels)

    def _child(self) -> HistogramChild:
        return HistogramChild(self.bounds)

    def _family(self) -> Metric:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, values: list[str], child: HistogramChild) -> None:
        assert isinstance(family, HistogramMetricFamily)
        cumulative, total = [], 0.0
        for name, count in zip(self._names, child.counts, strict=True):
            total += count
            cumulative.append((name, total))
        family.add_metric(values, cumulative, child.sum)
