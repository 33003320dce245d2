"""`kubectl apply --server-side`: managers own fields, a second manager's change to one of them is
a 409 kubectl prints, `--force-conflicts` takes it over, and a field dropped from the applied
configuration is removed; client-side `apply`, `edit`-style patches and `scale` record Update
managers that server-side apply then conflicts with.

Kubernetes' upgrade of a client-side-apply manager into server-side ownership
(``last-applied-configuration``) is not done, so the interplay shown is ownership by Update.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl

Obj = dict[str, Any]


def managers(obj: Obj) -> dict[str, Obj]:
    return {
        f"{e['manager']}/{e['operation']}": e["fieldsV1"] for e in obj["metadata"]["managedFields"]
    }


def get(kubectl: Kubectl, *args: str) -> Obj:
    out: Obj = json.loads(kubectl("get", *args, "-o", "json", "--show-managed-fields").stdout)
    return out


def test_two_managers_conflict_and_force_takes_over(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "ssa-force")
    web = factories.deployment("web", replicas=2, image="nginx:1.27")
    kubectl.apply(web, "-n", "ssa-force", "--server-side")
    live = get(kubectl, "-n", "ssa-force", "deployment/web")
    owned = managers(live)["kubectl/Apply"]
    assert "f:replicas" in owned["f:spec"]
    assert 'k:{"name":"app"}' in owned["f:spec"]["f:template"]["f:spec"]["f:containers"]

    other = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 5},
    }
    refused = kubectl(
        "apply",
        "-n",
        "ssa-force",
        "--server-side",
        "--field-manager=other",
        "-f",
        "-",
        stdin=factories.yaml_of(other),
        check=False,
    )
    assert refused.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas' in refused.stderr
    assert get(kubectl, "-n", "ssa-force", "deployment/web")["spec"]["replicas"] == 2

    kubectl.apply(
        other, "-n", "ssa-force", "--server-side", "--field-manager=other", "--force-conflicts"
    )
    live = get(kubectl, "-n", "ssa-force", "deployment/web")
    assert live["spec"]["replicas"] == 5
    assert managers(live)["other/Apply"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in managers(live)["kubectl/Apply"]["f:spec"]

    # hidden unless asked for
    plain = json.loads(kubectl("get", "-n", "ssa-force", "deployment/web", "-o", "json").stdout)
    assert "managedFields" not in plain["metadata"]


def test_a_field_dropped_from_the_applied_configuration_is_removed(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "ssa-drop")
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "labels": {"tier": "web", "team": "a"}},
        "data": {"keep": "1", "drop": "2"},
    }
    kubectl.apply(config, "-n", "ssa-drop", "--server-side")
    del config["data"]["drop"]
    del config["metadata"]["labels"]["team"]
    kubectl.apply(config, "-n", "ssa-drop", "--server-side")
    live = get(kubectl, "-n", "ssa-drop", "configmap/settings")
    assert live["data"] == {"keep": "1"}
    assert live["metadata"]["labels"] == {"tier": "web"}
    assert managers(live)["kubectl/Apply"] == {
        "f:data": {"f:keep": {}},
        "f:metadata": {"f:labels": {"f:tier": {}}},
    }


def test_client_side_writers_are_update_managers_server_side_apply_conflicts_with(
    kubectl: Kubectl,
) -> None:
    kubectl("create", "namespace", "ssa-mixed")
    kubectl.apply(factories.deployment("api", replicas=1), "-n", "ssa-mixed")
    live = get(kubectl, "-n", "ssa-mixed", "deployment/api")
    assert managers(live)["kubectl-client-side-apply/Update"]["f:spec"]["f:replicas"] == {}

    kubectl("scale", "-n", "ssa-mixed", "deployment/api", "--replicas=3")
    live = get(kubectl, "-n", "ssa-mixed", "deployment/api")
    scaled = [e for e in live["metadata"]["managedFields"] if e.get("subresource") == "scale"]
    assert scaled and scaled[0]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in managers(live)["kubectl-client-side-apply/Update"]["f:spec"]

    kubectl(
        "patch",
        "-n",
        "ssa-mixed",
        "deployment/api",
        "--field-manager=kubectl-edit",
        "-p",
        '{"spec":{"minReadySeconds":7}}',
    )
    config = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api"},
        "spec": {"minReadySeconds": 9, "replicas": 4},
    }
    refused = kubectl(
        "apply",
        "-n",
        "ssa-mixed",
        "--server-side",
        "-f",
        "-",
        stdin=factories.yaml_of(config),
        check=False,
    )
    assert "Apply failed with 2 conflicts" in refused.stderr
    assert 'conflicts with "kubectl-edit" using apps/v1:' in refused.stderr
    assert "with subresource \"scale\" using apps/v1:\n- .spec.replicas" in refused.stderr, refused.stderr
