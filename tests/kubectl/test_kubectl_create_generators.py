"""Stock kubectl's generator commands work: ``create namespace``, ``create deployment``, ``run``,
``debug node/…``.

kubectl 1.32+ sends the first two (and ``debug``) as protobuf bodies, asking for protobuf back;
the apiserver decodes the body and answers JSON, which kubectl reads. ``run`` sends JSON, and is
here because people type it right after ``create deployment``. Each test checks the stored object
with ``get -o json``, so a decoded-but-wrong field (a dropped ``replicas: 0``, a lost port) fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubelite.testing import ComponentProcess
from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def get_json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(kubectl("get", *args, "-o", "json").stdout)
    return loaded


def test_create_namespace(kubectl: Kubectl) -> None:
    done = kubectl("create", "namespace", "gen-ns")
    assert (done.stdout.strip(), done.stderr) == ("namespace/gen-ns created", "")
    ns = get_json(kubectl, "namespace", "gen-ns")
    assert ns["status"]["phase"] == "Active"
    assert ns["spec"]["finalizers"] == ["kubernetes"]

    again = kubectl("create", "namespace", "gen-ns", check=False)
    assert again.returncode == 1
    assert again.stderr.strip() == (
        'Error from server (AlreadyExists): namespaces "gen-ns" already exists'
    )


def test_create_deployment_with_replicas_port_and_command(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "gen-deploy")
    done = kubectl(
        "create", "deployment", "sleeper", "-n", "gen-deploy", "--image=busybox:1.36",
        "--replicas=3", "--port=8080", "--", "sleep", "3600",
    )  # fmt: skip
    assert (done.stdout.strip(), done.stderr) == ("deployment.apps/sleeper created", "")

    deploy = get_json(kubectl, "deployment", "sleeper", "-n", "gen-deploy")
    assert deploy["metadata"]["labels"] == {"app": "sleeper"}
    spec = deploy["spec"]
    assert spec["replicas"] == 3
    assert spec["selector"] == {"matchLabels": {"app": "sleeper"}}
    assert spec["template"]["metadata"]["labels"] == {"app": "sleeper"}
    (container,) = spec["template"]["spec"]["containers"]
    assert container["name"] == "busybox" and container["image"] == "busybox:1.36"
    assert container["command"] == ["sleep", "3600"]
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]  # TCP defaulted
    assert spec["strategy"]["type"] == "RollingUpdate"  # defaults ran on the decoded body


def test_create_deployment_with_zero_replicas_and_two_images(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "gen-zero")
    done = kubectl(
        "create", "deployment", "multi", "-n", "gen-zero", "--image=nginx:1.27",
        "--image=busybox:1.36", "--replicas=0",
    )  # fmt: skip
    assert done.stdout.strip() == "deployment.apps/multi created"
    deploy = get_json(kubectl, "deployment", "multi", "-n", "gen-zero")
    assert deploy["spec"]["replicas"] == 0  # an explicit zero, not the default of one
    containers = deploy["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [
        ("nginx", "nginx:1.27"),
        ("busybox", "busybox:1.36"),
    ]


def test_create_deployment_errors_come_back_as_kubectl_prints_them(kubectl: Kubectl) -> None:
    missing = kubectl(
        "create", "deployment", "x", "--image=nginx", "-n", "gen-missing", check=False
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        'error: failed to create deployment: namespaces "gen-missing" not found'
    )
    invalid = kubectl("create", "deployment", "Bad_Name", "--image=nginx", check=False)
    assert invalid.returncode == 1
    assert 'Deployment.apps "Bad_Name" is invalid: metadata.name: Invalid value' in invalid.stderr


def test_run_pod_with_labels_env_and_port(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "gen-run")
    done = kubectl(
        "run", "web", "-n", "gen-run", "--image=nginx:1.27", "--labels=tier=front",
        "--env=MODE=demo", "--port=80",
    )  # fmt: skip
    assert (done.stdout.strip(), done.stderr) == ("pod/web created", "")
    pod = get_json(kubectl, "pod", "web", "-n", "gen-run")
    assert pod["metadata"]["labels"] == {"tier": "front"}
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "nginx:1.27"
    assert container["env"] == [{"name": "MODE", "value": "demo"}]
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


def test_debug_node_creates_a_host_pod_on_that_node(kubectl: Kubectl) -> None:
    kubectl.apply(
        factories.node("gen-node", ready=None, labels={"node-role.kubernetes.io/worker": ""})
    )
    kubectl("create", "namespace", "gen-debug")
    done = kubectl("debug", "node/gen-node", "-n", "gen-debug", "--image=busybox:1.36")
    assert "Creating debugging pod node-debugger-gen-node-" in done.stdout
    (pod,) = get_json(kubectl, "pods", "-n", "gen-debug")["items"]
    spec = pod["spec"]
    assert spec["nodeName"] == "gen-node"
    assert (spec["hostNetwork"], spec["hostPID"], spec["hostIPC"]) == (True, True, True)
    assert spec["volumes"][0]["hostPath"]["path"] == "/"
    assert spec["containers"][0]["volumeMounts"] == [{"name": "host-root", "mountPath": "/host"}]


@pytest.mark.parametrize("minor", [31, 33])
def test_other_kubectl_minors_create_namespaces_and_deployments(
    minor: int, kubectl_apiserver: ComponentProcess, tmp_path: Path
) -> None:
    """1.33 sends protobuf like 1.32; 1.31 still sends JSON. Both must work."""
    kubectl = Kubectl.on(kubectl_apiserver.url, workdir=tmp_path, minor=minor)
    ns = f"gen-minor-{minor}"
    assert kubectl("create", "namespace", ns).stdout.strip() == f"namespace/{ns} created"
    done = kubectl("create", "deployment", "web", "-n", ns, "--image=nginx", "--replicas=2")
    assert done.stdout.strip() == "deployment.apps/web created"
    assert get_json(kubectl, "deployment", "web", "-n", ns)["spec"]["replicas"] == 2
