"""Defaults: what a real cluster fills in on create, applied to the body dict."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from api.core import Pod
from api.defaults import apply_defaults, image_pull_policy, qos_class


def minimal_pod(**container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx", **container}]},
    }


def test_pod_gets_kubernetes_defaults() -> None:
    pod = minimal_pod(ports=[{"containerPort": 80}])
    apply_defaults("Pod", pod)
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True
    assert spec["priority"] == 0
    c = spec["containers"][0]
    assert c["imagePullPolicy"] == "Always"
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["terminationMessagePolicy"] == "File"
    assert c["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert c["resources"] == {}
    assert spec["tolerations"] == [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    Pod.model_validate(pod)  # the defaulted pod is still a valid model


def test_defaults_never_override_what_the_user_wrote() -> None:
    pod = minimal_pod(imagePullPolicy="Never", terminationMessagePolicy="FallbackToLogsOnError")
    pod["spec"].update(restartPolicy="Never", dnsPolicy="Default", terminationGracePeriodSeconds=5)
    pod["spec"]["tolerations"] = [
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 5,
        }
    ]
    apply_defaults("Pod", pod)
    spec = pod["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["terminationGracePeriodSeconds"]) == (
        "Never",
        "Default",
        5,
    )
    assert spec["containers"][0]["imagePullPolicy"] == "Never"
    assert spec["containers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert [t["key"] for t in spec["tolerations"]] == [
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/not-ready",
    ]
    assert spec["tolerations"][0]["tolerationSeconds"] == 5


def test_defaulting_is_idempotent_and_keeps_unknown_fields() -> None:
    pod = minimal_pod(livenessProbe={"exec": {"command": ["true"]}})
    pod["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]
    apply_defaults("Pod", pod)
    once = copy.deepcopy(pod)
    apply_defaults("Pod", pod)
    assert pod == once
    assert pod["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]
    assert pod["spec"]["containers"][0]["livenessProbe"] == {"exec": {"command": ["true"]}}


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("registry.local:5000/team/app", "Always"),
        ("registry.local:5000/team/app:v2", "IfNotPresent"),
        ("busybox@sha256:abcd", "IfNotPresent"),
    ],
)
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


def test_limits_become_requests_and_quantities_are_canonical() -> None:
    pod = minimal_pod(
        resources={"limits": {"cpu": 0.5, "memory": "1Gi"}, "requests": {"cpu": "0.25"}}
    )
    apply_defaults("Pod", pod)
    res = pod["spec"]["containers"][0]["resources"]
    assert res == {
        "limits": {"cpu": "500m", "memory": "1Gi"},
        "requests": {"cpu": "250m", "memory": "1Gi"},
    }
    assert pod["status"]["qosClass"] == "Burstable"


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        ({}, "BestEffort"),
        ({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
        (
            {
                "limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "1000m", "memory": "1Gi"},
            },
            "Guaranteed",
        ),
        ({"limits": {"cpu": "1"}}, "Burstable"),
        ({"requests": {"memory": "1Gi"}}, "Burstable"),
        ({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}, "Burstable"),
    ],
)
def test_qos_class(resources: dict[str, Any], qos: str) -> None:
    pod = minimal_pod(resources=copy.deepcopy(resources))
    apply_defaults("Pod", pod)
    assert pod["status"]["qosClass"] == qos
    assert qos_class(pod["spec"]) == qos


def test_replication_controller_selector_and_labels_come_from_the_template() -> None:
    rc: dict[str, Any] = {
        "metadata": {"name": "web"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
            }
        },
    }
    apply_defaults("ReplicationController", rc)
    assert rc["spec"]["selector"] == {"app": "web"}
    assert rc["metadata"]["labels"] == {"app": "web"}
    assert rc["spec"]["replicas"] == 1
    template_spec = rc["spec"]["template"]["spec"]
    assert template_spec["restartPolicy"] == "Always"
    assert template_spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert "tolerations" not in template_spec  # admission defaults are for pods, not templates
    assert "status" not in rc["spec"]["template"]


def test_deployment_defaults() -> None:
    d: dict[str, Any] = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    apply_defaults("Deployment", d)
    spec = d["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    recreate: dict[str, Any] = {"spec": {"strategy": {"type": "Recreate"}}}
    apply_defaults("Deployment", recreate)
    assert recreate["spec"]["strategy"] == {"type": "Recreate"}


def test_replica_set_namespace_and_node_defaults() -> None:
    rs: dict[str, Any] = {"spec": {}}
    apply_defaults("ReplicaSet", rs)
    assert rs["spec"]["replicas"] == 1
    ns: dict[str, Any] = {"metadata": {"name": "team-a"}}
    apply_defaults("Namespace", ns)
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}
    node: dict[str, Any] = {
        "metadata": {"name": "n"},
        "status": {"capacity": {"cpu": 4, "memory": "8Gi"}},
    }
    apply_defaults("Node", node)
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi"}


def test_wrong_types_are_left_for_validation() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {"containers": "nope", "tolerations": 3},
    }
    apply_defaults("Pod", pod)
    assert pod["spec"]["containers"] == "nope" and pod["spec"]["tolerations"] == 3
    apply_defaults("Pod", {"spec": []})  # does not raise
    apply_defaults("Lease", {"spec": {}})  # kinds without defaults are untouched
