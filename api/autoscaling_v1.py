"""autoscaling/v1 HorizontalPodAutoscaler: the older version, served beside v2 from v2's storage.

Why: ``kubectl autoscale`` (kubectl 1.32 and older) writes autoscaling/v1, and tools still read
it. Kubernetes stores one HorizontalPodAutoscaler and converts it for each version asked; this
module holds the v1 models (for validation of v1 bodies and the v1 OpenAPI) and the two
conversions, following ``pkg/apis/autoscaling/v1/conversion.go``:

* v1 has one metric, ``spec.targetCPUUtilizationPercentage``: a v2 ``Resource`` ``cpu`` metric
  with a ``Utilization`` target. A v1 object without it (and without other metrics) converts to
  v2's default, CPU at 80%;
* status: ``currentCPUUtilizationPercentage`` is the current CPU utilisation among the metrics;
* what v1 cannot say rides in annotations, so a v1 read-modify-write keeps it: the other metrics
  (``autoscaling.alpha.kubernetes.io/metrics``, in v1's metric shapes —
  ``targetAverageUtilization`` ...), the current metrics (``.../current-metrics``), the conditions
  (``.../conditions``) and the behavior (``.../behavior``, in v2's shape). Reading v2 from v1
  takes them out of the annotations again.

Limits: as Kubernetes, a v2 CPU-utilisation metric goes back after the other metrics (the order
of ``spec.metrics`` may change on a v1 round trip); a value v1 cannot leave out (a ``Pods``
target's or a current ``Resource``/``Pods`` average, an ``Object`` target's or current
``Object``/``External`` value) comes back as ``"0"`` where v2 had none, as Kubernetes' does.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field

from api.autoscaling import (
    DEFAULT_CPU_UTILIZATION,
    CrossVersionObjectReference,
    cpu_utilization_metric,
)
from api.meta import KubeModel, ObjectMeta

__all__ = [
    "BEHAVIOR_ANNOTATION",
    "CONDITIONS_ANNOTATION",
    "CURRENT_METRICS_ANNOTATION",
    "METRICS_ANNOTATION",
    "HorizontalPodAutoscalerV1",
    "v1_from_v2",
    "v2_from_v1",
]

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"

Obj = dict[str, Any]


# The classes carry a V1 suffix so that they do not shadow v2's in one OpenAPI build; ``go_name``
# is the Go type each stands for (the OpenAPI component ``io.k8s.api.autoscaling.v1.<go_name>``).


class HorizontalPodAutoscalerSpecV1(KubeModel):
    go_name: ClassVar[str] = "HorizontalPodAutoscalerSpec"
    scale_target_ref: CrossVersionObjectReference
    max_replicas: int
    min_replicas: int | None = None
    target_cpu_utilization_percentage: int | None = Field(
        default=None, alias="targetCPUUtilizationPercentage"
    )


class HorizontalPodAutoscalerStatusV1(KubeModel):
    go_name: ClassVar[str] = "HorizontalPodAutoscalerStatus"
    desired_replicas: int = 0
    current_replicas: int = 0
    observed_generation: int | None = None
    last_scale_time: str | None = None
    current_cpu_utilization_percentage: int | None = Field(
        default=None, alias="currentCPUUtilizationPercentage"
    )


class HorizontalPodAutoscalerV1(KubeModel):
    go_name: ClassVar[str] = "HorizontalPodAutoscaler"
    api_version: str = "autoscaling/v1"
    kind: str = "HorizontalPodAutoscaler"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: HorizontalPodAutoscalerSpecV1
    status: HorizontalPodAutoscalerStatusV1 = Field(default_factory=HorizontalPodAutoscalerStatusV1)


# -- v2 -> v1 ------------------------------------------------------------------------------------


def _is_cpu_utilization(metric: Obj) -> bool:
    resource = metric.get("resource") or {}
    return (
        metric.get("type") == "Resource"
        and resource.get("name") == "cpu"
        and (resource.get("target") or {}).get("averageUtilization") is not None
    )


def _pruned(values: Obj) -> Obj:
    return {k: v for k, v in values.items() if v is not None}


_SOURCE_KEYS = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}
"""The member of a MetricSpec or MetricStatus that holds the source of each metric type."""

_RESOURCE_FIELDS = (
    ("name", "source", "name"),
    ("container", "source", "container"),
    ("{side}AverageUtilization", "values", "averageUtilization"),
    ("{side}AverageValue", "values", "averageValue"),
)
_V1_FIELDS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "resource": _RESOURCE_FIELDS,
    "containerResource": _RESOURCE_FIELDS,
    "pods": (
        ("metricName", "metric", "name"),
        ("{side}AverageValue", "values", "averageValue"),
        ("selector", "metric", "selector"),
    ),
    "object": (
        ("target", "source", "describedObject"),
        ("metricName", "metric", "name"),
        ("{side}Value", "values", "value"),
        ("selector", "metric", "selector"),
        ("averageValue", "values", "averageValue"),
    ),
    "external": (
        ("metricName", "metric", "name"),
        ("metricSelector", "metric", "selector"),
        ("{side}Value", "values", "value"),
        ("{side}AverageValue", "values", "averageValue"),
    ),
}
"""Each v1 (v2beta1) field of a metric source, in v1's order, with where v2 keeps it: on the
source itself, in its ``metric`` identifier, or among its ``values`` — ``target`` in a MetricSpec,
``current`` in a MetricStatus, which is also the ``{side}`` of the v1 name. Both conversions
read it."""

_V1_REQUIRED_QUANTITIES = frozenset(
    {
        ("pods", "targetAverageValue"),
        ("object", "targetValue"),
        ("resource", "currentAverageValue"),
        ("containerResource", "currentAverageValue"),
        ("pods", "currentAverageValue"),
        ("object", "currentValue"),
        ("external", "currentValue"),
    }
)
"""v1 fields that are plain (not pointer) Quantities in Go, so ``"0"`` where v2 has no value."""


def _v1_metric(metric: Obj, *, side: str) -> Obj:
    """A v2 MetricSpec (``side="target"``) or MetricStatus (``side="current"``) in v1's
    (v2beta1's) shape, as the metrics and current-metrics annotations hold them."""
    kind = str(metric.get("type") or "")
    out: Obj = {"type": kind}
    key = _SOURCE_KEYS.get(kind)
    if key is None:
        return out
    source = metric.get(key) or {}
    found = {
        "source": source,
        "metric": source.get("metric") or {},
        "values": source.get(side) or {},
    }
    fields: Obj = {}
    for v1_name, where, v2_name in _V1_FIELDS[key]:
        name = v1_name.format(side=side)
        fields[name] = found[where].get(v2_name)
        if (key, name) in _V1_REQUIRED_QUANTITIES:
            fields[name] = fields[name] or "0"
    out[key] = _pruned(fields)
    return out


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def v1_from_v2(obj: Obj) -> Obj:
    """A stored (v2) HorizontalPodAutoscaler as autoscaling/v1 serves it; ``obj`` is not changed."""
    spec: Obj = obj.get("spec") or {}
    status: Obj = obj.get("status") or {}
    metrics: list[Obj] = list(spec.get("metrics") or [])
    current_metrics: list[Obj] = list(status.get("currentMetrics") or [])
    conditions: list[Obj] = list(status.get("conditions") or [])

    v1_spec: Obj = {
        k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec
    }
    cpu = next(
        (
            m
            for m in metrics
            if m.get("type") == "Resource" and (m.get("resource") or {}).get("name") == "cpu"
        ),
        None,
    )
    if cpu is not None and _is_cpu_utilization(cpu):
        v1_spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"]["averageUtilization"]

    v1_status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime") if k in status}
    # v1's replica counts have no omitempty: 0 is printed (v2 omits a current count of 0)
    v1_status["currentReplicas"] = status.get("currentReplicas") or 0
    v1_status["desiredReplicas"] = status.get("desiredReplicas") or 0
    for metric in current_metrics:
        resource = metric.get("resource") or {}
        utilization = (resource.get("current") or {}).get("averageUtilization")
        if (
            metric.get("type") == "Resource"
            and resource.get("name") == "cpu"
            and utilization is not None
        ):
            v1_status["currentCPUUtilizationPercentage"] = utilization

    meta: Obj = dict(obj.get("metadata") or {})
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    others = [_v1_metric(m, side="target") for m in metrics if not _is_cpu_utilization(m)]
    if others:
        annotations[METRICS_ANNOTATION] = _compact(others)
    if current_metrics:
        annotations[CURRENT_METRICS_ANNOTATION] = _compact(
            [_v1_metric(m, side="current") for m in current_metrics]
        )
    if conditions:
        annotations[CONDITIONS_ANNOTATION] = _compact(conditions)
    if spec.get("behavior") is not None:
        annotations[BEHAVIOR_ANNOTATION] = _compact(spec["behavior"])
    if annotations:
        meta["annotations"] = annotations

    out: Obj = {
        **obj,
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": v1_spec,
        "status": v1_status,
    }
    return out


# -- v1 -> v2 ------------------------------------------------------------------------------------


_V2_VALUE_ORDER = ("value", "averageValue", "averageUtilization")
"""The fields of v2's MetricTarget and MetricValueStatus, in Go's order."""


def _v2_target(key: str, values: Obj) -> Obj:
    """A v1 target as v2's MetricTarget, its ``type`` told by which value v1 set."""
    if key == "pods":  # v1's targetAverageValue is required: not pruned
        return {"type": "AverageValue", **values}
    if values.get("averageUtilization") is not None:
        kind = "Utilization"
    elif key == "object":
        kind = "AverageValue" if values.get("averageValue") is not None else "Value"
    else:
        kind = "Value" if values.get("value") is not None else "AverageValue"
    return _pruned({"type": kind, **values})


def _v2_current(key: str, values: Obj) -> Obj:
    """A v1 current value as v2's MetricValueStatus; a missing current average of a Resource
    or Pods metric comes back ``"0"`` (v1 requires it), a missing Object or External value stays
    absent."""
    if key in ("resource", "containerResource", "pods"):
        values["averageValue"] = values["averageValue"] or "0"
    return _pruned(values)


def _v2_metric(metric: Obj, *, side: str) -> Obj:
    """A metric of the v1 metrics (``side="target"``) or current-metrics (``side="current"``)
    annotation in v2's shape."""
    kind = str(metric.get("type") or "")
    out: Obj = {"type": kind}
    key = _SOURCE_KEYS.get(kind)
    if key is None:
        return out
    source = metric.get(key) or {}
    found: dict[str, Obj] = {"source": {}, "metric": {}, "values": {}}
    for v1_name, where, v2_name in _V1_FIELDS[key]:
        found[where][v2_name] = source.get(v1_name.format(side=side))
    values = {k: found["values"][k] for k in _V2_VALUE_ORDER if k in found["values"]}
    converted = _v2_target(key, values) if side == "target" else _v2_current(key, values)
    if key in ("resource", "containerResource"):
        out[key] = _pruned({**found["source"], side: converted})
    else:
        out[key] = {**found["source"], "metric": _pruned(found["metric"]), side: converted}
    return out


def _annotation_list(annotations: dict[str, Any], key: str) -> list[Obj] | None:
    """The JSON list an annotation holds, taken out of ``annotations``; None when absent or not
    a list of objects (Kubernetes refuses the body then; kubelite ignores it)."""
    raw = annotations.pop(key, None)
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        return None
    return value


def v2_from_v1(obj: Obj) -> Obj:
    """An autoscaling/v1 HorizontalPodAutoscaler as v2 (how it is stored); ``obj`` is not
    changed."""
    spec: Obj = obj.get("spec") or {}
    status: Obj = obj.get("status") or {}
    meta: Obj = dict(obj.get("metadata") or {})
    annotations: dict[str, Any] = dict(meta.get("annotations") or {})

    v2_spec: Obj = {
        k: spec[k] for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec
    }
    metrics = [
        _v2_metric(m, side="target")
        for m in _annotation_list(annotations, METRICS_ANNOTATION) or []
    ]
    cpu = spec.get("targetCPUUtilizationPercentage")
    if cpu is not None:
        metrics.append(cpu_utilization_metric(cpu))
    if not metrics:
        metrics = [cpu_utilization_metric(DEFAULT_CPU_UTILIZATION)]
    v2_spec["metrics"] = metrics
    behavior = annotations.pop(BEHAVIOR_ANNOTATION, None)
    if isinstance(behavior, str):
        try:
            decoded = json.loads(behavior)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            v2_spec["behavior"] = decoded

    v2_status: Obj = {
        k: status[k]
        for k in ("observedGeneration", "lastScaleTime", "desiredReplicas")
        if k in status
    }
    if status.get("currentReplicas"):
        v2_status["currentReplicas"] = status["currentReplicas"]
    current = _annotation_list(annotations, CURRENT_METRICS_ANNOTATION)
    if current is not None:
        v2_status["currentMetrics"] = [_v2_metric(m, side="current") for m in current]
    elif status.get("currentCPUUtilizationPercentage") is not None:
        v2_status["currentMetrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "current": {"averageUtilization": status["currentCPUUtilizationPercentage"]},
                },
            }
        ]
    conditions = _annotation_list(annotations, CONDITIONS_ANNOTATION)
    if conditions is not None:
        v2_status["conditions"] = conditions

    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {
        **obj,
        "apiVersion": "autoscaling/v2",
        "metadata": meta,
        "spec": v2_spec,
        "status": v2_status,
    }
