"""How many replicas a resource metric asks for: Kubernetes' ``replica_calculator.go``, in Python.

Why a module of its own: the arithmetic is the part of the HorizontalPodAutoscaler people
argue about ("why did it not scale?"), and it is pure — pods, their requests, their measured
usage and a target in, a replica count out — so it is tested apart from the controller.

The rules, as Kubernetes has them (``GetResourceReplicas`` / ``GetRawResourceReplicas``):

* pods being deleted, ``Failed`` or ``Pending`` are ignored; a pod without a measurement is
  *missing*; for CPU a pod is *unready* when it has no Ready condition or start time, or —
  within ``CPU_INITIALIZATION_PERIOD`` of its start — when it is not Ready or was measured less
  than one metric window after it became Ready, or — later — when it is not Ready and never
  was (its Ready condition last changed within ``DELAY_OF_INITIAL_READINESS`` of its start);
* the usage ratio is the measured pods' total usage over their total requests, divided by the
  target utilisation (``Utilization``), or their average usage over the target value
  (``AverageValue``); within ``TOLERANCE`` (10%) of 1 nothing changes;
* with no missing pods and no unready pods that matter, the answer is
  ``ceil(ratio * ready pods)``; otherwise missing pods count as using their whole request (or
  the target, if higher) on a scale-down and nothing on a scale-up, unready pods as nothing on
  a scale-up, and the ratio is taken again — and if that flips the direction or lands within the
  tolerance, nothing changes.

Values are in milli-units (``250m`` CPU is 250, 1 Ki memory is 1,024,000), as Kubernetes'
metrics client reads them.

Not provided: Pods, Object and External metrics (the controller reports them as unsupported).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from api.meta import parse_time
from api.quantity import parse_quantity

__all__ = [
    "CPU_INITIALIZATION_PERIOD",
    "DELAY_OF_INITIAL_READINESS",
    "TOLERANCE",
    "MetricsError",
    "PodMetric",
    "Replicas",
    "pod_requests",
    "resource_replicas",
]

Obj = dict[str, Any]

TOLERANCE = 0.1
"""``--horizontal-pod-autoscaler-tolerance``: a ratio within 10% of 1 changes nothing."""
CPU_INITIALIZATION_PERIOD = timedelta(minutes=5)
"""``--horizontal-pod-autoscaler-cpu-initialization-period``."""
DELAY_OF_INITIAL_READINESS = timedelta(seconds=30)
"""``--horizontal-pod-autoscaler-initial-readiness-delay``."""


class MetricsError(Exception):
    """The metric cannot give a replica count; the message is Kubernetes'."""


@dataclass(frozen=True, slots=True)
class PodMetric:
    """One pod's measured usage of one resource, in milli-units."""

    value: int
    timestamp: datetime
    window: timedelta


@dataclass(frozen=True, slots=True)
class Replicas:
    """What a metric asks for, and what it measured (for the HPA's ``currentMetrics``)."""

    replicas: int
    utilization: int | None
    """Percent of the requests (``Utilization`` targets only)."""
    average_value: int
    """The measured pods' average usage, milli-units."""


def _ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), None)


def _unready_for_cpu(pod: Mapping[str, Any], metric: PodMetric, now: datetime) -> bool:
    condition = _ready_condition(pod)
    started = (pod.get("status") or {}).get("startTime")
    if condition is None or not started:
        return True
    start = parse_time(str(started))
    changed = condition.get("lastTransitionTime")
    transition = parse_time(str(changed)) if changed else start
    if start + CPU_INITIALIZATION_PERIOD > now:
        # still starting: only a Ready pod measured a whole window after it became Ready counts
        return condition.get("status") == "False" or metric.timestamp < transition + metric.window
    # past its start: only a pod that has never been Ready is left out
    return condition.get("status") == "False" and start + DELAY_OF_INITIAL_READINESS > transition


@dataclass(slots=True)
class _Groups:
    ready: int = 0
    unready: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    ignored: set[str] = field(default_factory=set)


def _group_pods(
    pods: Iterable[Mapping[str, Any]],
    metrics: Mapping[str, PodMetric],
    *,
    resource: str,
    now: datetime,
) -> _Groups:
    groups = _Groups()
    for pod in pods:
        name = str(pod["metadata"]["name"])
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase in ("Failed", "Pending"):
            groups.ignored.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            groups.missing.add(name)
            continue
        if resource == "cpu" and _unready_for_cpu(pod, metric, now):
            groups.unready.add(name)
            continue
        groups.ready += 1
    return groups


def pod_requests(
    pods: Iterable[Mapping[str, Any]], *, resource: str, container: str | None = None
) -> dict[str, int]:
    """Each pod's request of ``resource`` in milli-units (of ``container`` only, if named);
    ``MetricsError`` when a container requests none, as Kubernetes refuses that too."""
    out: dict[str, int] = {}
    for pod in pods:
        name = str(pod["metadata"]["name"])
        total = 0
        for c in (pod.get("spec") or {}).get("containers") or []:
            if container and c.get("name") != container:
                continue
            request = ((c.get("resources") or {}).get("requests") or {}).get(resource)
            if request is None:
                raise MetricsError(
                    f"missing request for {resource} in container {c.get('name')} of Pod {name}"
                )
            total += int(parse_quantity(request) * 1000)
        out[name] = total
    return out


def _ratio(
    metrics: Mapping[str, PodMetric],
    requests: Mapping[str, int],
    *,
    utilization: int | None,
    average_value: int | None,
) -> tuple[float, int | None, int]:
    """(usage ratio, utilization percent or None, average usage) of the measured pods."""
    if utilization is not None:
        used = [(m.value, requests[n]) for n, m in metrics.items() if n in requests]
        total_request = sum(r for _, r in used)
        if total_request == 0:
            raise MetricsError("no metrics returned matched known pods")
        current = sum(v for v, _ in used) * 100 // total_request
        return current / utilization, current, sum(v for v, _ in used) // len(used)
    assert average_value is not None
    average = sum(m.value for m in metrics.values()) // max(len(metrics), 1)
    return average / average_value, None, average


def resource_replicas(
    current: int,
    *,
    pods: Sequence[Mapping[str, Any]],
    metrics: Mapping[str, PodMetric],
    resource: str,
    utilization: int | None = None,
    average_value: int | None = None,
    container: str | None = None,
    now: datetime,
    tolerance: float = TOLERANCE,
) -> Replicas:
    """The replicas a ``Utilization`` (percent of the requests) or ``AverageValue`` (milli-units
    per pod) target of ``resource`` asks for; ``MetricsError`` when it cannot say."""
    if not pods:
        raise MetricsError("no pods returned by selector while calculating replica count")
    groups = _group_pods(pods, metrics, resource=resource, now=now)
    measured = {
        n: m for n, m in metrics.items() if n not in groups.ignored and n not in groups.unready
    }
    if not measured:
        raise MetricsError("did not receive metrics for targeted pods (pods might be unready)")
    requests = pod_requests(pods, resource=resource, container=container) if utilization else {}
    ratio, percent, average = _ratio(
        measured, requests, utilization=utilization, average_value=average_value
    )

    def answer(replicas: int) -> Replicas:
        return Replicas(replicas=replicas, utilization=percent, average_value=average)

    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if abs(1.0 - ratio) <= tolerance:
            return answer(current)
        return answer(math.ceil(ratio * groups.ready))

    filled = dict(measured)
    if groups.missing:
        if ratio < 1.0:  # scaling down: a missing pod may be using all it asked for
            for name in groups.missing:
                fallback = (
                    requests[name] * max(100, utilization) // 100
                    if utilization is not None
                    else int(average_value or 0)
                )
                filled[name] = PodMetric(fallback, now, timedelta())
        elif ratio > 1.0:  # scaling up: a missing pod may be using nothing
            for name in groups.missing:
                filled[name] = PodMetric(0, now, timedelta())
    if scale_up_with_unready:
        for name in groups.unready:
            filled[name] = PodMetric(0, now, timedelta())
    new_ratio, _, _ = _ratio(filled, requests, utilization=utilization, average_value=average_value)
    if abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return answer(current)  # too small a change, or the direction would flip
    replicas = math.ceil(new_ratio * len(filled))
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return answer(current)
    return answer(replicas)
