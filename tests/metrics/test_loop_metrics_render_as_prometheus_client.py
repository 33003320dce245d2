"""The apiserver's lock-free request metrics (``services.apiserver.loop_metrics``) render the
very ``/metrics`` text prometheus-client's own ``Counter``, ``Gauge`` and ``Histogram`` render
for the same calls: every series, label, bucket bound and value, in the same order.

Each case feeds one registry of ours and one of prometheus-client's the same calls, in the
same order, and compares the two pages byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from component.metrics import Metrics
from services.apiserver.flowcontrol import WAIT_BUCKETS
from services.apiserver.loop_metrics import LoopCounter, LoopGauge, LoopHistogram
from services.apiserver.metrics import REQUEST_BUCKETS

LABELS = ("verb", "resource")
Feed = Callable[[Any], None]


def _pages(kind: str, feed: Feed, **options: Any) -> tuple[str, str]:
    """``feed`` run on our metric and on prometheus-client's; both ``/metrics`` pages."""
    ours, theirs = Metrics(), Metrics()
    name = {"counter": "kubelite_test_total", "gauge": "kubelite_test_requests"}.get(
        kind, "kubelite_test_seconds"
    )
    made = {
        "counter": (LoopCounter, theirs.counter),
        "gauge": (LoopGauge, theirs.gauge),
        "histogram": (LoopHistogram, theirs.histogram),
    }
    loop_kind, reference = made[kind]
    feed(loop_kind(ours, name, "What the test counts.", LABELS, **options))
    feed(reference(name, "What the test counts.", LABELS, **options))
    return ours.render(), theirs.render()


def _counts(metric: Any) -> None:
    metric.labels("GET", "pods").inc()
    metric.labels("POST", "pods").inc(2.5)
    metric.labels("GET", "pods").inc()
    metric.labels("LIST", "nodes")  # made, never counted: a zero series


def _gauges(metric: Any) -> None:
    metric.labels("WATCH", "pods").inc()
    metric.labels("WATCH", "pods").inc(3)
    metric.labels("CONNECT", "pods").dec()
    with metric.labels("GET", "nodes").track_inprogress():
        pass
    with metric.labels("GET", "pods").track_inprogress():
        metric.labels("WATCH", "pods").dec()


def _observations(metric: Any) -> None:
    for seconds in (0, 0.001, 0.005, 0.0050001, 0.1, 0.999, 1, 2.5, 60, 61, 1e9):
        metric.labels("GET", "pods").observe(seconds)
    metric.labels("POST", "pods").observe(0.03)
    metric.labels("LIST", "pods")  # made, never observed: zero buckets, count and sum


def test_a_counter_renders_as_prometheus_clients() -> None:
    ours, theirs = _pages("counter", _counts)
    assert "kubelite_test_total{" in ours
    assert ours == theirs


def test_a_gauge_renders_as_prometheus_clients() -> None:
    ours, theirs = _pages("gauge", _gauges)
    assert 'kubelite_test_requests{resource="pods",verb="GET"} 0.0' in ours
    assert ours == theirs


@pytest.mark.parametrize("buckets", [REQUEST_BUCKETS, WAIT_BUCKETS], ids=["request", "wait"])
def test_a_histogram_renders_as_prometheus_clients(buckets: tuple[float, ...]) -> None:
    ours, theirs = _pages("histogram", _observations, buckets=buckets)
    assert 'le="+Inf"' in ours
    assert ours == theirs


def test_a_child_needs_one_value_per_label_name() -> None:
    counter = LoopCounter(Metrics(), "kubelite_test_total", "What the test counts.", LABELS)
    with pytest.raises(ValueError, match="takes labels"):
        counter.labels("GET")
