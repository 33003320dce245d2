"""``api.autoscaling_v1``'s conversions, as Kubernetes' ``conversion.go``: a v2 object with every
metric source, current metrics, conditions and a behavior comes back from v1 unchanged (its CPU
metric last, where Kubernetes puts it); v1 puts what it cannot say into the annotations in v1's
own metric shapes; a v1 object without a target gets v2's default CPU metric."""

from __future__ import annotations

import json
from typing import Any

from api.autoscaling_v1 import (
    BEHAVIOR_ANNOTATION,
    CONDITIONS_ANNOTATION,
    CURRENT_METRICS_ANNOTATION,
    METRICS_ANNOTATION,
    v1_from_v2,
    v2_from_v1,
)
from tests import factories

Obj = dict[str, Any]

SELECTOR = {"matchLabels": {"queue": "jobs"}}
METRICS: list[Obj] = [
    {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}},
    },
    {
        "type": "ContainerResource",
        "containerResource": {
            "name": "cpu",
            "container": "app",
            "target": {"type": "Utilization", "averageUtilization": 70},
        },
    },
    {
        "type": "Pods",
        "pods": {
            "metric": {"name": "requests", "selector": SELECTOR},
            "target": {"type": "AverageValue", "averageValue": "10"},
        },
    },
    {
        "type": "Object",
        "object": {
            "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "front"},
            "metric": {"name": "hits"},
            "target": {"type": "Value", "value": "100"},
        },
    },
    {
        "type": "External",
        "external": {
            "metric": {"name": "queue_depth", "selector": SELECTOR},
            "target": {"type": "AverageValue", "averageValue": "30"},
        },
    },
    {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
    },
]
CURRENT: list[Obj] = [
    {
        "type": "Resource",
        "resource": {"name": "cpu", "current": {"averageValue": "250m", "averageUtilization": 62}},
    },
    {"type": "Pods", "pods": {"metric": {"name": "requests"}, "current": {"averageValue": "8"}}},
    {
        "type": "Object",
        "object": {
            "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "front"},
            "metric": {"name": "hits"},
            "current": {"value": "90"},
        },
    },
    {
        "type": "External",
        "external": {"metric": {"name": "queue_depth"}, "current": {"value": "25"}},
    },
]
CONDITIONS: list[Obj] = [
    {
        "type": "AbleToScale",
        "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "reason": "ReadyForNewScale",
        "message": "recommended size matches current size",
    }
]


def _full_v2() -> Obj:
    hpa = factories.horizontal_pod_autoscaler(
        "full",
        target="web",
        metrics=METRICS,
        minReplicas=2,
        behavior={"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max"}},
    )
    hpa["metadata"].update(namespace="default", annotations={"team": "search"})
    hpa["status"] = {
        "observedGeneration": 3,
        "currentReplicas": 4,
        "desiredReplicas": 5,
        "currentMetrics": CURRENT,
        "conditions": CONDITIONS,
    }
    return hpa


def test_a_v2_object_comes_back_from_v1_unchanged() -> None:
    original = _full_v2()
    snapshot = json.loads(json.dumps(original))
    v1 = v1_from_v2(original)
    assert original == snapshot  # neither conversion changes its argument
    assert v2_from_v1(v1) == original


def test_v1_says_the_cpu_target_and_annotates_the_rest_in_v1_shapes() -> None:
    v1 = v1_from_v2(_full_v2())
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"] == {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 2,
        "maxReplicas": 5,
        "targetCPUUtilizationPercentage": 50,
    }
    assert v1["status"] == {
        "observedGeneration": 3,
        "currentReplicas": 4,
        "desiredReplicas": 5,
        "currentCPUUtilizationPercentage": 62,
    }
    annotations = v1["metadata"]["annotations"]
    assert annotations["team"] == "search"
    assert json.loads(annotations[METRICS_ANNOTATION]) == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "1Gi"}},
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": "cpu",
                "container": "app",
                "targetAverageUtilization": 70,
            },
        },
        {
            "type": "Pods",
            "pods": {"metricName": "requests", "targetAverageValue": "10", "selector": SELECTOR},
        },
        {
            "type": "Object",
            "object": {
                "target": {"apiVersion": "v1", "kind": "Service", "name": "front"},
                "metricName": "hits",
                "targetValue": "100",
            },
        },
        {
            "type": "External",
            "external": {
                "metricName": "queue_depth",
                "metricSelector": SELECTOR,
                "targetAverageValue": "30",
            },
        },
    ]
    assert json.loads(annotations[CURRENT_METRICS_ANNOTATION])[0] == {
        "type": "Resource",
        "resource": {"name": "cpu", "currentAverageUtilization": 62, "currentAverageValue": "250m"},
    }
    assert json.loads(annotations[CONDITIONS_ANNOTATION]) == CONDITIONS
    assert json.loads(annotations[BEHAVIOR_ANNOTATION]) == {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max"}
    }


def test_a_v1_object_without_a_target_gets_the_default_cpu_metric() -> None:
    v1: Obj = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "bare"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 3,
        },
    }
    v2 = v2_from_v1(v1)
    assert v2["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80},
            },
        }
    ]
    assert "annotations" not in v2["metadata"]
