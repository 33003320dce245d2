"""autoscaling: Scale (the ``/scale`` subresource) and the v2 HorizontalPodAutoscaler.

Why: ``kubectl scale`` reads and writes ``.../scale`` rather than the whole object. The apiserver
builds a Scale from the parent (``spec.replicas``, ``status.replicas``, and ``status.selector``
as a label-selector *string*, e.g. ``app=web``) and applies a written Scale back to
``spec.replicas`` only. The HorizontalPodAutoscaler (autoscaling/v2) names such a scalable
target and the metrics to hold it at; the controller-manager's ``horizontal_pod_autoscaler``
acts on it through that same ``/scale``.

Defaults (``default_horizontal_pod_autoscaler``, Kubernetes' ``SetDefaults_HorizontalPodAutoscaler``):
``minReplicas`` 1; no metrics means CPU at 80% average utilisation; a ``behavior`` that is given
has its missing rules and fields filled with Kubernetes' (scale up: no stabilisation window, the
larger of 4 pods or 100% per 15 s; scale down: a 300 s window, 100% per 15 s; ``selectPolicy``
Max) — a missing ``behavior`` stays missing, and the controller applies the same rules.

autoscaling/v1 is served from the same storage, converted (``api.autoscaling_v1``).

Limits: the metric types other than ``Resource`` and
``ContainerResource`` are accepted and stored but not acted on (the controller reports them
as invalid metric sources).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.meta import KubeModel, ObjectMeta

__all__ = [
    "DEFAULT_CPU_UTILIZATION",
    "HorizontalPodAutoscaler",
    "Scale",
    "ScaleSpec",
    "ScaleStatus",
    "cpu_utilization_metric",
    "default_horizontal_pod_autoscaler",
    "scale_down_rules",
    "scale_up_rules",
]


class ScaleSpec(KubeModel):
    replicas: int | None = None


class ScaleStatus(KubeModel):
    replicas: int = 0
    selector: str | None = None


class Scale(KubeModel):
    api_version: str = "autoscaling/v1"
    kind: str = "Scale"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ScaleSpec = Field(default_factory=ScaleSpec)
    status: ScaleStatus = Field(default_factory=ScaleStatus)


class CrossVersionObjectReference(KubeModel):
    kind: str
    name: str
    api_version: str | None = None


class MetricTarget(KubeModel):
    type: str
    value: str | None = None
    average_value: str | None = None
    average_utilization: int | None = None


class ResourceMetricSource(KubeModel):
    name: str
    target: MetricTarget


class ContainerResourceMetricSource(KubeModel):
    name: str
    container: str
    target: MetricTarget


class MetricSpec(KubeModel):
    type: str
    resource: ResourceMetricSource | None = None
    container_resource: ContainerResourceMetricSource | None = None


class HPAScalingPolicy(KubeModel):
    type: str
    value: int
    period_seconds: int


class HPAScalingRules(KubeModel):
    stabilization_window_seconds: int | None = None
    select_policy: str | None = None
    policies: list[HPAScalingPolicy] | None = None


class HorizontalPodAutoscalerBehavior(KubeModel):
    scale_up: HPAScalingRules | None = None
    scale_down: HPAScalingRules | None = None


class HorizontalPodAutoscalerSpec(KubeModel):
    scale_target_ref: CrossVersionObjectReference
    max_replicas: int
    min_replicas: int | None = None
    metrics: list[MetricSpec] | None = None
    behavior: HorizontalPodAutoscalerBehavior | None = None


class HorizontalPodAutoscalerCondition(KubeModel):
    type: str
    status: str
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class HorizontalPodAutoscalerStatus(KubeModel):
    desired_replicas: int = 0
    current_replicas: int | None = None
    observed_generation: int | None = None
    last_scale_time: str | None = None
    current_metrics: list[dict[str, Any]] | None = None
    conditions: list[HorizontalPodAutoscalerCondition] | None = None


class HorizontalPodAutoscaler(KubeModel):
    api_version: str = "autoscaling/v2"
    kind: str = "HorizontalPodAutoscaler"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: HorizontalPodAutoscalerSpec
    status: HorizontalPodAutoscalerStatus = Field(default_factory=HorizontalPodAutoscalerStatus)


DEFAULT_CPU_UTILIZATION = 80
"""Kubernetes' target when an autoscaler names no metric (``autoscaling.DefaultCPUUtilization``)."""


def cpu_utilization_metric(percent: int) -> dict[str, Any]:
    """A v2 MetricSpec holding the pods' CPU at ``percent`` of their requests."""
    return {
        "type": "Resource",
        "resource": {
            "name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": percent},
        },
    }


def scale_up_rules(given: dict[str, Any] | None) -> dict[str, Any]:
    """``given`` with Kubernetes' scale-up defaults where it says nothing."""
    rules = dict(given or {})
    rules.setdefault("stabilizationWindowSeconds", 0)
    rules.setdefault("selectPolicy", "Max")
    if not rules.get("policies"):
        rules["policies"] = [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ]
    return rules


def scale_down_rules(given: dict[str, Any] | None) -> dict[str, Any]:
    """``given`` with Kubernetes' scale-down defaults where it says nothing."""
    rules = dict(given or {})
    rules.setdefault("stabilizationWindowSeconds", 300)
    rules.setdefault("selectPolicy", "Max")
    if not rules.get("policies"):
        rules["policies"] = [{"type": "Percent", "value": 100, "periodSeconds": 15}]
    return rules


def default_horizontal_pod_autoscaler(obj: dict[str, Any]) -> None:
    """Kubernetes' defaults for an autoscaling/v2 HorizontalPodAutoscaler, in place."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [cpu_utilization_metric(DEFAULT_CPU_UTILIZATION)]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = scale_up_rules(behavior.get("scaleUp"))
        behavior["scaleDown"] = scale_down_rules(behavior.get("scaleDown"))
