"""kubectl on PriorityClass, a built-in kind served from its schema (``api.schema_kinds``):
``kubectl create priorityclass`` (a protobuf body), ``get`` with Kubernetes' columns (the two
system classes the apiserver creates at start among them), ``describe``, ``explain`` from the
schema, client-side and server-side apply (a conflict, then ``--force-conflicts``), and Kubernetes'
refusals worded as Kubernetes words them."""

from __future__ import annotations

import pytest

from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def test_kubectl_creates_gets_and_describes_priority_classes(kubectl: Kubectl) -> None:
    created = kubectl("create", "priorityclass", "kc-high", "--value=1000", "--description=hi")
    assert created.stdout.strip() == "priorityclass.scheduling.k8s.io/kc-high created"

    table = kubectl("get", "pc").stdout.splitlines()
    assert table[0].split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows["kc-high"][1:3] == ["1000", "false"]
    assert rows["kc-high"][4] == "PreemptLowerPriority"
    assert rows["system-node-critical"][1] == "2000001000"
    assert rows["system-cluster-critical"][1] == "2000000000"

    described = kubectl("describe", "priorityclass", "kc-high").stdout
    assert "Value:             1000" in described
    assert "PreemptionPolicy:  PreemptLowerPriority" in described
    assert "Description:       hi" in described

    explained = kubectl("explain", "priorityclass.preemptionPolicy").stdout
    assert "GROUP:      scheduling.k8s.io" in explained
    assert "PreemptLowerPriority" in explained and "Never" in explained

    resources = kubectl("api-resources", "--api-group=scheduling.k8s.io").stdout.splitlines()
    assert resources[1].split() == [
        "priorityclasses",
        "pc",
        "scheduling.k8s.io/v1",
        "false",
        "PriorityClass",
    ]


def test_kubectl_applies_priority_classes_client_and_server_side(kubectl: Kubectl) -> None:
    first = factories.priority_class("kc-applied", 10, description="first")
    assert kubectl.apply(first).stdout.strip() == (
        "priorityclass.scheduling.k8s.io/kc-applied created"
    )
    second = factories.priority_class("kc-applied", 10, description="second")
    assert kubectl.apply(second).stdout.strip() == (
        "priorityclass.scheduling.k8s.io/kc-applied configured"
    )
    # server-side: the description belongs to client-side apply, so another manager conflicts
    third = factories.yaml_of(factories.priority_class("kc-applied", 10, description="third"))
    conflict = kubectl(
        "apply", "--server-side", "--field-manager=other", "-f", "-", stdin=third, check=False
    )
    assert conflict.returncode == 1
    assert 'conflict with "kubectl-client-side-apply"' in conflict.stderr
    assert ".description" in conflict.stderr
    forced = kubectl(
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        "-",
        stdin=third,
    )
    assert forced.stdout.strip() == "priorityclass.scheduling.k8s.io/kc-applied serverside-applied"
    current = kubectl("get", "pc", "kc-applied", "-o", "jsonpath={.description}").stdout
    assert current == "third"


def test_kubectl_shows_kubernetes_refusals(kubectl: Kubectl) -> None:
    reserved = kubectl("create", "priorityclass", "system-mine", "--value=1", check=False)
    assert reserved.returncode == 1
    assert (
        'PriorityClass.scheduling.k8s.io "system-mine" is invalid: metadata.name: Forbidden: '
        "priority class names with 'system-' prefix are reserved for system use only. error: "
        "system-mine is not a known system priority class"
    ) in reserved.stderr
    too_high = kubectl("create", "priorityclass", "kc-huge", "--value=1000000001", check=False)
    assert "value: Forbidden: maximum allowed value of a user defined priority is 1000000000" in (
        too_high.stderr
    )
    policy = kubectl(
        "create",
        "priorityclass",
        "kc-bad",
        "--value=1",
        "--preemption-policy=Sometimes",
        check=False,
    )
    assert (
        'preemptionPolicy: Unsupported value: "Sometimes": supported values: '
        '"PreemptLowerPriority", "Never"'
    ) in policy.stderr

    kubectl("create", "priorityclass", "kc-fixed", "--value=5")
    moved = kubectl("patch", "pc", "kc-fixed", "-p", '{"value": 6}', check=False)
    assert "value: Forbidden: may not be changed in an update." in moved.stderr
    never = kubectl("patch", "pc", "kc-fixed", "-p", '{"preemptionPolicy": "Never"}', check=False)
    assert 'preemptionPolicy: Invalid value: "Never": field is immutable' in never.stderr
    labelled = kubectl("label", "pc", "kc-fixed", "tier=gold")
    assert labelled.stdout.strip() == "priorityclass.scheduling.k8s.io/kc-fixed labeled"
    deleted = kubectl("delete", "pc", "kc-fixed")
    assert deleted.stdout.strip() == 'priorityclass.scheduling.k8s.io "kc-fixed" deleted'
