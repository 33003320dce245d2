"""The seed's walkthrough verbs: apply (create and configure paths), get -o yaml, delete -f."""

from __future__ import annotations

import pytest
import yaml

from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def test_apply_pod_creates_configures_and_leaves_unchanged(kubectl: Kubectl) -> None:
    created = kubectl.apply(factories.sleeper("apply-demo", image="busybox:1.36"))
    assert created.stdout.strip() == "pod/apply-demo created"
    assert created.stderr == ""  # no validation or patch warnings

    configured = kubectl.apply(
        factories.sleeper(
            "apply-demo",
            namespace=None,
            image="busybox:1.37",
            labels={"app": "apply-demo", "tier": "b"},
        )
    )
    assert configured.stdout.strip() == "pod/apply-demo configured"
    assert configured.stderr == ""

    unchanged = kubectl.apply(
        factories.sleeper(
            "apply-demo",
            namespace=None,
            image="busybox:1.37",
            labels={"app": "apply-demo", "tier": "b"},
        )
    )
    assert unchanged.stdout.strip() == "pod/apply-demo unchanged"

    live = yaml.safe_load(kubectl("get", "pod", "apply-demo", "-o", "yaml").stdout)
    assert live["kind"] == "Pod"
    assert live["spec"]["containers"][0]["image"] == "busybox:1.37"
    assert live["metadata"]["labels"] == {"app": "apply-demo", "tier": "b"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in live["metadata"]["annotations"]
    assert live["metadata"]["resourceVersion"]
    assert live["metadata"]["uid"]


def test_apply_replication_controller_and_get_wide(kubectl: Kubectl) -> None:
    created = kubectl.apply(
        factories.rc("apply-rc", replicas=2, image="nginx:1.27", container_name="web")
    )
    assert created.stdout.strip() == "replicationcontroller/apply-rc created"
    assert created.stderr == ""
    configured = kubectl.apply(
        factories.rc("apply-rc", replicas=4, image="nginx:1.27", container_name="web")
    )
    assert configured.stdout.strip() == "replicationcontroller/apply-rc configured"
    assert configured.stderr == ""

    lines = kubectl("get", "rc", "apply-rc", "-o", "wide").stdout.splitlines()
    assert lines[0].split() == [
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]
    row = lines[1].split()
    assert row[:2] == ["apply-rc", "4"]
    assert row[5:] == ["web", "nginx:1.27", "app=apply-rc"]


def test_apply_deployment_and_get(kubectl: Kubectl) -> None:
    created = kubectl.apply(
        factories.deployment("apply-deploy", replicas=3, image="nginx:1.27", container_name="web")
    )
    assert created.stdout.strip() == "deployment.apps/apply-deploy created"
    assert created.stderr == ""
    configured = kubectl.apply(
        factories.deployment("apply-deploy", replicas=3, image="nginx:1.28", container_name="web")
    )
    assert configured.stdout.strip() == "deployment.apps/apply-deploy configured"
    assert configured.stderr == ""

    lines = kubectl("get", "deploy", "apply-deploy").stdout.splitlines()
    assert lines[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert lines[1].split()[0] == "apply-deploy"
    assert lines[1].split()[1].endswith("/3")
    live = yaml.safe_load(kubectl("get", "deployment", "apply-deploy", "-o", "yaml").stdout)
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"


def test_get_list_as_yaml(kubectl: Kubectl) -> None:
    kubectl.apply(factories.namespace("yaml-list"))
    kubectl.apply(factories.sleeper("listed", image="busybox:1.36"), "-n", "yaml-list")
    listed = yaml.safe_load(kubectl("get", "pods", "-n", "yaml-list", "-o", "yaml").stdout)
    assert listed["kind"] == "List"
    assert [item["metadata"]["name"] for item in listed["items"]] == ["listed"]
    assert listed["items"][0]["kind"] == "Pod"


def test_delete_f_removes_what_apply_created(kubectl: Kubectl) -> None:
    kubectl.apply(factories.namespace("delete-f"))
    manifest = factories.sleeper("doomed", image="busybox:1.36")
    kubectl.apply(manifest, "-n", "delete-f")
    deleted = kubectl("delete", "-f", "-", "-n", "delete-f", stdin=factories.yaml_of(manifest))
    assert deleted.stdout.strip() == 'pod "doomed" deleted'
    empty = kubectl("get", "pods", "-n", "delete-f")
    assert empty.stdout == ""
    assert empty.stderr.strip() == "No resources found in delete-f namespace."
    missing = kubectl("get", "pod", "doomed", "-n", "delete-f", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Error from server (NotFound): pods "doomed" not found'
