"""Defaults: what a real cluster fills in on create, applied to the body dict."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from api.apps import ReplicaSet
from api.core import Event, Node, Pod, ReplicationController
from api.defaults import apply_defaults, fill_serialised, image_pull_policy, qos_class
from api.registry import REGISTRY


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
    lease: dict[str, Any] = {"spec": {}}
    apply_defaults("Lease", lease)  # no defaulting rules; only what is always serialised
    assert lease["spec"] == {}


# -- fields Kubernetes always serialises (Go fields without omitempty) -------------------------


def test_replica_counts_are_always_serialised() -> None:
    """An RC or ReplicaSet just created answers ``status.replicas: 0``, as Kubernetes does."""
    rc: dict[str, Any] = {"kind": "ReplicationController", "spec": {}, "status": {}}
    fill_serialised("ReplicationController", rc)
    assert rc["status"] == {"replicas": 0}
    rs: dict[str, Any] = {"kind": "ReplicaSet", "spec": {}}
    fill_serialised("ReplicaSet", rs)
    assert rs["status"] == {"replicas": 0}
    # apply_defaults (create, update, patch) ends with the same filling
    rs2: dict[str, Any] = {"spec": {"selector": {"matchLabels": {"a": "b"}}}, "status": {}}
    apply_defaults("ReplicaSet", rs2)
    assert rs2["status"] == {"replicas": 0}
    deployment: dict[str, Any] = {"spec": {}, "status": {}}
    fill_serialised("Deployment", deployment)
    assert deployment["status"] == {}  # every DeploymentStatus field is omitempty


def test_container_statuses_carry_every_required_field() -> None:
    pod: dict[str, Any] = {
        "spec": {"containers": [{"name": "c"}]},
        "status": {
            "containerStatuses": [
                {"name": "c", "state": {"terminated": {"reason": "Error"}}},
                {"name": "d", "ready": True, "restartCount": 3, "image": "x", "imageID": "y"},
            ],
            "initContainerStatuses": [{"name": "i"}],
        },
    }
    fill_serialised("Pod", pod)
    first, second = pod["status"]["containerStatuses"]
    assert first == {
        "name": "c",
        "state": {"terminated": {"reason": "Error", "exitCode": 0}},
        "lastState": {},
        "ready": False,
        "restartCount": 0,
        "image": "",
        "imageID": "",
    }
    assert (second["ready"], second["restartCount"], second["image"], second["imageID"]) == (
        True,
        3,
        "x",
        "y",
    )
    assert pod["status"]["initContainerStatuses"][0]["imageID"] == ""


def test_node_info_daemon_endpoints_and_event_fields() -> None:
    node: dict[str, Any] = {"kind": "Node", "metadata": {"name": "n"}}
    fill_serialised("Node", node)
    assert node["spec"] == {}
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    assert node["status"]["nodeInfo"] == {
        key: ""
        for key in (
            "machineID",
            "systemUUID",
            "bootID",
            "kernelVersion",
            "osImage",
            "containerRuntimeVersion",
            "kubeletVersion",
            "kubeProxyVersion",
            "operatingSystem",
            "architecture",
        )
    }
    partial: dict[str, Any] = {"status": {"nodeInfo": {"kubeletVersion": "v1.32.0"}}}
    fill_serialised("Node", partial)
    assert partial["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.0"
    assert partial["status"]["nodeInfo"]["bootID"] == ""
    event: dict[str, Any] = {"metadata": {"name": "e"}, "reason": "R"}
    fill_serialised("Event", event)
    assert event["involvedObject"] == {} and event["source"] == {}
    assert event["reportingComponent"] == "" and event["reportingInstance"] == ""


def test_filling_keeps_what_is_there_and_is_idempotent() -> None:
    rc: dict[str, Any] = {"status": {"replicas": 3, "readyReplicas": 2}}
    fill_serialised("ReplicationController", rc)
    assert rc["status"] == {"replicas": 3, "readyReplicas": 2}
    odd: dict[str, Any] = {"status": {"replicas": "three"}, "spec": []}
    fill_serialised("ReplicaSet", odd)  # wrong types are validation's to report
    assert odd["status"] == {"replicas": "three"} and odd["spec"] == []
    node: dict[str, Any] = {}
    fill_serialised("Node", node)
    once = copy.deepcopy(node)
    fill_serialised("Node", node)
    assert node == once
    fill_serialised("NoSuchKind", node)
    fill_serialised(None, node)
    fill_serialised("Node", "not an object")  # does not raise


def test_zero_values_are_fresh_for_every_object() -> None:
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    fill_serialised("Node", a)
    fill_serialised("Node", b)
    a["status"]["nodeInfo"]["bootID"] = "changed"
    a["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = 10250
    assert b["status"]["nodeInfo"]["bootID"] == ""
    assert b["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 0


@pytest.mark.parametrize(
    "model,obj",
    [
        (ReplicationController, {"spec": {"selector": {"a": "b"}}, "status": {}}),
        (ReplicaSet, {"metadata": {"name": "x"}, "spec": {"replicas": 1}}),
        (
            Pod,
            {
                "spec": {"containers": [{"name": "c"}]},
                "status": {"containerStatuses": [{"name": "c", "state": {"terminated": {}}}]},
            },
        ),
        (Node, {"status": {"nodeInfo": {"osImage": "x"}, "daemonEndpoints": {}}}),
        (Event, {"metadata": {"name": "e"}}),
    ],
)
def test_filling_adds_what_a_model_round_trip_adds(model: Any, obj: dict[str, Any]) -> None:
    """``fill_serialised`` is the cheap form of ``Model.model_validate(obj).to_dict()``."""
    filled = copy.deepcopy(obj)
    model.fill_serialised(filled)
    assert filled == model.model_validate(copy.deepcopy(obj)).to_dict()


def test_served_kind_names_are_unique() -> None:
    """``apply_defaults`` and ``fill_serialised`` find a kind's rules by its name alone."""
    kinds = [rt.kind for rt in REGISTRY]
    assert len(kinds) == len(set(kinds))
