"""The autoscaler's arithmetic, case by case as Kubernetes' ``replica_calculator_test.go`` and
``horizontal_test.go`` pin it: the 10% tolerance, missing and unready pods, the scale-up limit
without ``behavior``, and ``behavior``'s policies and stabilisation windows over time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.meta import format_time
from services.controller_manager.hpa_behavior import Normalizer, Proposal
from services.controller_manager.replica_calculator import (
    MetricsError,
    PodMetric,
    resource_replicas,
)

Obj = dict[str, Any]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def pod(name: str, *, request: str = "1000m", ready: bool = True, age: float = 600) -> Obj:
    start = NOW - timedelta(seconds=age)
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": request}}}]},
        "status": {
            "phase": "Running",
            "startTime": format_time(start),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": format_time(start + timedelta(seconds=5)),
                }
            ],
        },
    }


def usage(**millicores: int) -> dict[str, PodMetric]:
    return {
        n: PodMetric(v, NOW - timedelta(seconds=5), timedelta(seconds=1))
        for n, v in millicores.items()
    }


def replicas(current: int, pods: list[Obj], metrics: dict[str, PodMetric], target: int = 50) -> int:
    found = resource_replicas(
        current, pods=pods, metrics=metrics, resource="cpu", utilization=target, now=NOW
    )
    return found.replicas


def test_within_the_tolerance_nothing_changes() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    assert replicas(3, pods, usage(a=540, b=540, c=540)) == 3  # 54% of 50%: ratio 1.08


def test_usage_over_the_target_scales_up_in_proportion() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    assert replicas(3, pods, usage(a=900, b=900, c=900)) == 6  # ceil(3 × 90/50)


def test_a_missing_pod_counts_as_using_its_request_on_a_scale_down() -> None:
    pods = [pod("a"), pod("b"), pod("c"), pod("d")]
    # measured: 10% -> 1 replica; with d at 100%: 32% of 4 pods -> ceil(4 × 32/50) = 3
    assert replicas(4, pods, usage(a=100, b=100, c=100)) == 3


def test_an_unready_pod_counts_as_using_nothing_on_a_scale_up() -> None:
    pods = [pod("a"), pod("b"), pod("c", ready=False)]
    # measured: 90% -> ratio 1.8; with c at 0: 60% of 3 pods -> ceil(3 × 60/50) = 4
    assert replicas(3, pods, usage(a=900, b=900, c=900)) == 4


def test_a_pod_without_a_request_is_an_error() -> None:
    bare = pod("a")
    bare["spec"]["containers"][0]["resources"] = {}
    with pytest.raises(MetricsError, match="missing request for cpu in container app of Pod a"):
        replicas(1, [bare], usage(a=100))


def test_without_behavior_one_scaling_at_most_doubles() -> None:
    normalizer = Normalizer()
    decision = normalizer.normalize("ns/web", Proposal(3, 20, 1, 50), now=NOW)
    assert (decision.replicas, decision.limited, decision.limit_reason) == (6, True, "ScaleUpLimit")


def test_behavior_policies_limit_each_period() -> None:
    behavior = {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    normalizer = Normalizer()
    first = normalizer.normalize_with_behavior(
        "ns/web", Proposal(2, 8, 1, 10), behavior=behavior, now=NOW
    )
    assert (first.replicas, first.limit_reason) == (3, "ScaleUpLimit")
    normalizer.record_scaling("ns/web", behavior, before=2, after=3, now=NOW)
    later = NOW + timedelta(seconds=30)  # the same period: the one pod is spent
    held = normalizer.normalize_with_behavior(
        "ns/web", Proposal(3, 8, 1, 10), behavior=behavior, now=later
    )
    assert held.replicas == 3
    next_period = NOW + timedelta(seconds=61)
    assert (
        normalizer.normalize_with_behavior(
            "ns/web", Proposal(3, 8, 1, 10), behavior=behavior, now=next_period
        ).replicas
        == 4
    )


def test_behavior_scale_down_waits_out_its_window() -> None:
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 60}}
    normalizer = Normalizer()
    normalizer.record_initial("ns/web", 5, now=NOW)
    held = normalizer.normalize_with_behavior(
        "ns/web", Proposal(5, 2, 1, 10), behavior=behavior, now=NOW + timedelta(seconds=30)
    )
    assert (held.replicas, held.stabilized_reason) == (5, "ScaleDownStabilized")
    after = normalizer.normalize_with_behavior(
        "ns/web", Proposal(5, 2, 1, 10), behavior=behavior, now=NOW + timedelta(seconds=91)
    )
    assert (after.replicas, after.limited) == (2, False)
