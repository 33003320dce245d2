"""Models read Kubernetes JSON and write back exactly the same JSON (aliases, unknown fields)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes import client as k8s

from api.apps import Deployment, ReplicaSet
from api.autoscaling import Scale
from api.coordination import Lease
from api.core import Binding, Event, Namespace, Node, Pod, ReplicationController
from api.meta import KubeModel, ObjectMeta, Status, WatchEvent, now_micro_time, now_time, parse_time

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "demo",
        "namespace": "default",
        "uid": "9e661f23-326e-4366-8559-3014ea917a95",
        "resourceVersion": "111",
        "generation": 1,
        "creationTimestamp": "2026-11-30T01:39:36Z",
        "deletionTimestamp": "2026-11-30T02:09:45Z",
        "deletionGracePeriodSeconds": 30,
        "labels": {"app": "demo"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "demo-abc",
                "uid": "0b5c7a64-1111-4b55-a2f2-4a9b3c2d0e11",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "finalizers": ["example.com/keep"],
        "managedFields": [{"manager": "kubectl", "operation": "Update"}],
    },
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["sh", "-c", "sleep 3600"],
                "args": ["--x"],
                "ports": [
                    {
                        "name": "http",
                        "containerPort": 8080,
                        "protocol": "TCP",
                        "hostIP": "127.0.0.1",
                    }
                ],
                "env": [
                    {"name": "FOO", "value": "bar"},
                    {
                        "name": "NODE",
                        "valueFrom": {
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}
                        },
                    },
                ],
                "resources": {
                    "limits": {"cpu": "500m", "memory": "128Mi"},
                    "requests": {"cpu": "100m"},
                },
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "livenessProbe": {"httpGet": {"path": "/", "port": 8080}},
                "securityContext": {"runAsUser": 1000},
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"zz": "cxk"},
        "nodeName": "node1",
        "hostPID": False,
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                    ]
                }
            },
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
        },
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "someFutureField": {"kept": ["verbatim"]},
    },
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T01:39:36Z"},
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": "2026-11-30T01:39:36Z",
            },
        ],
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.1.0.5",
        "podIPs": [{"ip": "127.1.0.5"}],
        "startTime": "2026-11-30T01:39:36Z",
        "containerStatuses": [
            {
                "name": "main",
                "state": {"running": {"startedAt": "2026-11-30T01:39:36Z"}},
                "lastState": {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "Error",
                        "startedAt": "2026-11-30T01:38:00Z",
                        "finishedAt": "2026-11-30T01:39:00Z",
                        "containerID": "process://4242",
                    }
                },
                "ready": True,
                "restartCount": 1,
                "image": "busybox:1.36",
                "imageID": "",
                "containerID": "process://4343",
                "started": True,
            }
        ],
        "qosClass": "Burstable",
    },
}

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node1", "labels": {"kubernetes.io/hostname": "node1", "zz": "cxk"}},
    "spec": {
        "podCIDR": "127.1.0.0/16",
        "podCIDRs": ["127.1.0.0/16"],
        "unschedulable": True,
        "taints": [
            {
                "key": "node.kubernetes.io/unschedulable",
                "effect": "NoSchedule",
                "timeAdded": "2026-11-30T01:00:00Z",
            }
        ],
    },
    "status": {
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "allocatable": {"cpu": "3800m", "memory": "7Gi", "pods": "110"},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "lastHeartbeatTime": "2026-11-30T02:09:45Z",
                "lastTransitionTime": "2026-11-30T01:00:00Z",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
            }
        ],
        "addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": "node1"},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": "m",
            "systemUUID": "s",
            "bootID": "b",
            "kernelVersion": "6.1.0",
            "osImage": "Debian GNU/Linux 12",
            "containerRuntimeVersion": "kubelite://0.1.0",
            "kubeletVersion": "v1.32.0",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
        "images": [{"names": ["busybox:1.36"], "sizeBytes": 4096}],
    },
}

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {
        "containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]
    },
}

RC: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ReplicationController",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"replicas": 3, "selector": {"app": "web"}, "template": TEMPLATE},
    "status": {
        "replicas": 3,
        "fullyLabeledReplicas": 3,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "observedGeneration": 1,
    },
}

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default", "generation": 2},
    "spec": {
        "replicas": 3,
        "selector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "Exists"}],
        },
        "template": TEMPLATE,
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1},
        },
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600,
    },
    "status": {
        "observedGeneration": 2,
        "replicas": 3,
        "updatedReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "lastUpdateTime": "2026-11-30T01:00:00Z",
                "lastTransitionTime": "2026-11-30T01:00:00Z",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.",
            }
        ],
    },
}

REPLICASET: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "metadata": {"name": "web-5d9c", "namespace": "default"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
    "status": {"replicas": 2, "readyReplicas": 2},
}

LEASE: dict[str, Any] = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "node1", "namespace": "kube-node-lease"},
    "spec": {
        "holderIdentity": "node1",
        "leaseDurationSeconds": 40,
        "acquireTime": "2026-11-30T02:09:45.123456Z",
        "renewTime": "2026-11-30T02:10:45.654321Z",
        "leaseTransitions": 0,
    },
}

EVENT: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "demo.0e93873c9ef8409c", "namespace": "default"},
    "involvedObject": {
        "kind": "Pod",
        "namespace": "default",
        "name": "demo",
        "uid": "9e661f23-326e-4366-8559-3014ea917a95",
        "apiVersion": "v1",
        "fieldPath": "spec.containers{main}",
    },
    "reason": "Created",
    "message": "Created container main",
    "source": {"component": "kubelet", "host": "node1"},
    "firstTimestamp": "2026-11-30T01:39:36Z",
    "lastTimestamp": "2026-11-30T01:39:36Z",
    "count": 1,
    "type": "Normal",
    "reportingComponent": "kubelet",
    "reportingInstance": "node1",
}

NAMESPACE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "team-a"},
    "spec": {"finalizers": ["kubernetes"]},
    "status": {"phase": "Active"},
}

BINDING: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Binding",
    "metadata": {"name": "demo", "namespace": "default"},
    "target": {"apiVersion": "v1", "kind": "Node", "name": "node1"},
}

SCALE: dict[str, Any] = {
    "kind": "Scale",
    "apiVersion": "autoscaling/v1",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"replicas": 1},
    "status": {"replicas": 1, "selector": "app=web"},
}


@pytest.mark.parametrize(
    ("model", "doc"),
    [
        (Pod, POD),
        (Node, NODE),
        (ReplicationController, RC),
        (Deployment, DEPLOYMENT),
        (ReplicaSet, REPLICASET),
        (Lease, LEASE),
        (Event, EVENT),
        (Namespace, NAMESPACE),
        (Binding, BINDING),
        (Scale, SCALE),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_kubernetes_json_round_trips_exactly(model: type[KubeModel], doc: dict[str, Any]) -> None:
    original = copy.deepcopy(doc)
    obj = model.model_validate(doc)
    assert obj.model_dump(by_alias=True, exclude_none=True, mode="json") == original
    assert obj.to_dict() == original
    assert doc == original  # validation never mutates its input


def test_typed_access_uses_snake_case_and_reads_aliases() -> None:
    pod = Pod.model_validate(POD)
    assert pod.spec.node_name == "node1"
    assert pod.status.pod_ip == "127.1.0.5"
    assert pod.status.host_ips is not None and pod.status.host_ips[0].ip == "127.0.0.1"
    assert pod.spec.containers[0].resources is not None
    assert pod.spec.containers[0].resources.limits == {"cpu": "500m", "memory": "128Mi"}
    assert pod.status.container_statuses is not None
    assert pod.status.container_statuses[0].container_id == "process://4343"
    assert pod.metadata.controller_ref() is not None
    ready = pod.status.condition("Ready")
    assert ready is not None and ready.status == "True"
    node = Node.model_validate(NODE)
    assert node.spec.pod_cidr == "127.1.0.0/16"
    assert node.status.daemon_endpoints is not None
    assert node.status.daemon_endpoints.kubelet_endpoint is not None
    assert node.status.daemon_endpoints.kubelet_endpoint.port == 10250
    assert node.status.node_info is not None and node.status.node_info.machine_id == "m"


def test_unknown_fields_are_kept_verbatim_at_every_level() -> None:
    pod = Pod.model_validate(POD)
    assert pod.spec.model_extra == {"someFutureField": {"kept": ["verbatim"]}}
    assert pod.to_dict()["spec"]["containers"][0]["livenessProbe"] == {
        "httpGet": {"path": "/", "port": 8080}
    }


def test_models_built_in_python_dump_kubernetes_json() -> None:
    pod = Pod(
        metadata=ObjectMeta(name="p", namespace="default"),
        spec={"containers": [{"name": "c", "image": "nginx"}]},
    )
    assert pod.to_dict() == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        "status": {},
    }


def test_numeric_quantities_are_accepted_and_kept_as_strings() -> None:
    doc = copy.deepcopy(NODE)
    doc["status"]["capacity"] = {"cpu": 4, "memory": "8Gi", "pods": 110}
    node = Node.model_validate(doc)
    assert node.status.capacity == {"cpu": "4", "memory": "8Gi", "pods": "110"}


def test_types_are_strict_like_gos_json_decoder() -> None:
    from pydantic import ValidationError

    bad = copy.deepcopy(POD)
    bad["metadata"]["labels"] = {"enabled": True}  # YAML's unquoted true
    with pytest.raises(ValidationError):
        Pod.model_validate(bad)
    bad = copy.deepcopy(POD)
    bad["spec"]["containers"][0]["ports"][0]["containerPort"] = "8080"
    with pytest.raises(ValidationError):
        Pod.model_validate(bad)


def test_official_client_reads_our_json() -> None:
    """The official client's own deserialiser accepts what our models write."""
    api = k8s.ApiClient()

    def read(doc: dict[str, Any], kind: str) -> Any:
        return api.deserialize(json.dumps(doc), kind, "application/json")

    pod = read(Pod.model_validate(POD).to_dict(), "V1Pod")
    assert pod.spec.node_name == "node1"
    assert pod.status.pod_ips[0].ip == "127.1.0.5"
    assert pod.spec.containers[0].resources.limits == {"cpu": "500m", "memory": "128Mi"}
    lease = read(Lease.model_validate(LEASE).to_dict(), "V1Lease")
    assert lease.spec.renew_time.microsecond == 654321
    node = read(Node.model_validate(NODE).to_dict(), "V1Node")
    assert node.status.daemon_endpoints.kubelet_endpoint.port == 10250
    assert node.spec.pod_cidr == "127.1.0.0/16"


def test_official_client_objects_round_trip_through_our_models() -> None:
    """JSON the official client writes (its attribute map is Kubernetes' own) survives us."""
    api = k8s.ApiClient()
    body = api.sanitize_for_serialization(
        k8s.V1Pod(
            api_version="v1",
            kind="Pod",
            metadata=k8s.V1ObjectMeta(name="p", namespace="default", labels={"a": "b"}),
            spec=k8s.V1PodSpec(
                containers=[
                    k8s.V1Container(
                        name="c",
                        image="nginx",
                        ports=[k8s.V1ContainerPort(container_port=80, host_ip="127.0.0.1")],
                        resources=k8s.V1ResourceRequirements(limits={"cpu": "1"}),
                    )
                ],
                node_selector={"zz": "cxk"},
                host_pid=True,
                tolerations=[k8s.V1Toleration(key="k", operator="Exists", effect="NoSchedule")],
            ),
            status=k8s.V1PodStatus(pod_ip="127.1.0.9", host_ips=[k8s.V1HostIP(ip="127.0.0.1")]),
        )
    )
    assert Pod.model_validate(body).to_dict() == body


def test_status_and_watch_event_shapes() -> None:
    status = Status.model_validate(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'pods "x" not found',
            "reason": "NotFound",
            "details": {"name": "x", "kind": "pods"},
            "code": 404,
        }
    )
    assert status.code == 404 and status.details is not None and status.details.name == "x"
    event = WatchEvent.model_validate({"type": "ADDED", "object": POD})
    assert event.object["metadata"]["name"] == "demo"


def test_times_format_as_kubernetes_writes_them() -> None:
    t = now_time()
    assert len(t) == 20 and t.endswith("Z") and "." not in t
    m = now_micro_time()
    assert len(m) == 27 and m.endswith("Z") and m[19] == "."
    assert parse_time("2026-11-30T02:09:45.123456Z").microsecond == 123456
    assert parse_time("2026-11-30T02:09:45Z").utcoffset() is not None
