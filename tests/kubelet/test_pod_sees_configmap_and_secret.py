"""A pod reads a ConfigMap and a Secret as env and as files, as Kubernetes users write them.

Real apiserver and kubelet processes (process runtime, namespace sandbox); the objects are made
with ``kubectl create``, the files and env read with ``kubectl exec ... cat`` / ``env`` at the
container's paths; the volume's layout on the node is read from the kubelet's state dir.
"""

from __future__ import annotations

import os

import pytest

from tests import factories
from tests.factories import sh
from tests.kubelet.conftest import Cluster
from tests.kubelet.pod_config import exec_out, kubectl, pod_env
from tests.kubelet.pods import create_and_wait, phase

pytestmark = [pytest.mark.e2e]


async def test_env_and_files_come_from_the_configmap_and_the_secret(cluster: Cluster) -> None:
    k = kubectl(cluster)
    k("create", "configmap", "app", "--from-literal=greeting=hello", "--from-literal=color=blue")
    k("create", "secret", "generic", "creds", "--from-literal=password=s3cret")
    container = sh("sleep 3600") | {
        "env": [
            {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "greeting"}}},
            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
            {"name": "COLOR", "value": "overridden"},
        ],
        "envFrom": [{"configMapRef": {"name": "app"}, "prefix": "APP_"}, {"configMapRef": {"name": "app"}}],
        "volumeMounts": [
            {"name": "cfg", "mountPath": "/etc/config"},
            {"name": "sec", "mountPath": "/etc/secret"},
        ],
    }  # fmt: skip
    p = await create_and_wait(
        cluster,
        factories.pod(
            "reader",
            container,
            namespace="default",
            nodeName=cluster.node,
            volumes=[
                {"name": "cfg", "configMap": {"name": "app"}},
                {"name": "sec", "secret": {"secretName": "creds"}},
            ],
        ),
        lambda p: phase(p) == "Running",
    )

    env = pod_env(k, "reader")
    assert env["GREETING"] == "hello" and env["PASSWORD"] == "s3cret"
    assert env["APP_greeting"] == "hello" and env["APP_color"] == "blue"
    assert env["COLOR"] == "overridden"  # env wins over envFrom
    assert exec_out(k, "reader", "cat", "/etc/config/greeting") == "hello"
    assert exec_out(k, "reader", "cat", "/etc/secret/password") == "s3cret"
    assert exec_out(k, "reader", "ls", "/etc/config").split() == ["color", "greeting"]

    volume = (
        cluster.kubelet.state_dir
        / "pods"
        / p["metadata"]["uid"]
        / "volumes"
        / "kubernetes.io~configmap"
        / "cfg"
    )
    assert os.readlink(volume / "greeting") == "..data/greeting"
    assert os.readlink(volume / "..data").startswith("..20")
    secret_file = (
        cluster.kubelet.state_dir / "pods" / p["metadata"]["uid"] / "volumes"
        / "kubernetes.io~secret" / "sec" / "password"
    )  # fmt: skip
    assert secret_file.stat().st_mode & 0o777 == 0o644


async def test_items_default_mode_and_optional_shape_the_files(cluster: Cluster) -> None:
    k = kubectl(cluster)
    k("create", "configmap", "shaped", "--from-literal=a=1", "--from-literal=b=2")
    container = sh("sleep 3600") | {
        "volumeMounts": [
            {"name": "picked", "mountPath": "/picked"},
            {"name": "absent", "mountPath": "/absent"},
        ],
    }
    await create_and_wait(
        cluster,
        factories.pod(
            "shaped",
            container,
            namespace="default",
            nodeName=cluster.node,
            volumes=[
                {
                    "name": "picked",
                    "configMap": {
                        "name": "shaped",
                        "defaultMode": 0o600,
                        "items": [
                            {"key": "a", "path": "sub/first"},
                            {"key": "b", "path": "second", "mode": 0o444},
                        ],
                    },
                },
                {"name": "absent", "configMap": {"name": "no-such-map", "optional": True}},
            ],
        ),
        lambda p: phase(p) == "Running",
    )
    assert exec_out(k, "shaped", "cat", "/picked/sub/first") == "1"
    assert exec_out(k, "shaped", "cat", "/picked/second") == "2"
    modes = exec_out(
        k, "shaped", "stat", "-L", "-c", "%a %n", "/picked/sub/first", "/picked/second"
    )
    assert modes.split("\n")[:2] == ["600 /picked/sub/first", "444 /picked/second"]
    assert exec_out(k, "shaped", "ls", "/picked").split() == ["second", "sub"]
    assert exec_out(k, "shaped", "ls", "/absent") == ""  # an optional, missing map: empty


async def test_downward_api_files_and_resource_env(cluster: Cluster) -> None:
    k = kubectl(cluster)
    container = sh("sleep 3600") | {
        "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}},
        "env": [
            {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "CPU_MILLIS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
            {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "MY_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "volumeMounts": [{"name": "info", "mountPath": "/etc/podinfo"}],
    }  # fmt: skip
    p = await create_and_wait(
        cluster,
        factories.pod(
            "downward",
            container,
            namespace="default",
            labels={"app": "demo", "tier": "web"},
            nodeName=cluster.node,
            volumes=[
                {
                    "name": "info",
                    "downwardAPI": {
                        "items": [
                            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                            {"path": "uid", "fieldRef": {"fieldPath": "metadata.uid"}},
                            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                            {
                                "path": "mem",
                                "resourceFieldRef": {
                                    "containerName": "main",
                                    "resource": "limits.memory",
                                    "divisor": "1Mi",
                                },
                            },
                        ]
                    },
                }
            ],
        ),
        lambda p: phase(p) == "Running",
    )
    env = pod_env(k, "downward")
    assert env["CPU_LIMIT"] == "1"  # 250m rounded up to whole cores
    assert env["CPU_MILLIS"] == "250" and env["MEM_MI"] == "64"
    assert env["MY_NAME"] == "downward"
    assert exec_out(k, "downward", "cat", "/etc/podinfo/name") == "downward"
    assert exec_out(k, "downward", "cat", "/etc/podinfo/uid") == p["metadata"]["uid"]
    assert exec_out(k, "downward", "cat", "/etc/podinfo/labels") == 'app="demo"\ntier="web"'
    assert exec_out(k, "downward", "cat", "/etc/podinfo/mem") == "64"


async def test_a_projected_volume_merges_its_sources(cluster: Cluster) -> None:
    k = kubectl(cluster)
    k("create", "configmap", "proj-cm", "--from-literal=config=c")
    k("create", "secret", "generic", "proj-secret", "--from-literal=token=t")
    container = sh("sleep 3600") | {"volumeMounts": [{"name": "all", "mountPath": "/all"}]}
    await create_and_wait(
        cluster,
        factories.pod(
            "projected",
            container,
            namespace="default",
            nodeName=cluster.node,
            volumes=[
                {
                    "name": "all",
                    "projected": {
                        "sources": [
                            {"configMap": {"name": "proj-cm"}},
                            {"secret": {"name": "proj-secret"}},
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "ns",
                                            "fieldRef": {"fieldPath": "metadata.namespace"},
                                        }
                                    ]
                                }
                            },
                        ]
                    },
                }
            ],
        ),
        lambda p: phase(p) == "Running",
    )
    assert exec_out(k, "projected", "ls", "/all").split() == ["config", "ns", "token"]
    assert exec_out(k, "projected", "cat", "/all/token") == "t"
    assert exec_out(k, "projected", "cat", "/all/ns") == "default"
