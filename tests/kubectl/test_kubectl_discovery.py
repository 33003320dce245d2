"""kubectl learns what kubelite serves: version, api-resources, explain."""

from __future__ import annotations

import pytest

from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def test_version_reports_the_server(kubectl: Kubectl) -> None:
    out = kubectl("version").stdout
    assert "Server Version: v1.32.0-kubelite" in out


def test_api_resources_lists_every_kind_with_short_names(kubectl: Kubectl) -> None:
    done = kubectl("api-resources")
    assert done.stderr == ""
    rows: dict[str, list[str]] = {}
    for line in done.stdout.splitlines()[1:]:
        # the first row of a name: metrics.k8s.io's pods and nodes come after the core kinds
        rows.setdefault(line.split()[0], line.split())
    assert done.stdout.split()[:5] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    assert rows["pods"] == ["pods", "po", "v1", "true", "Pod"]
    assert rows["nodes"] == ["nodes", "no", "v1", "false", "Node"]
    assert rows["replicationcontrollers"][1] == "rc"
    assert rows["events"][1] == "ev"
    assert rows["namespaces"][1] == "ns"
    assert rows["deployments"] == ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    assert rows["replicasets"][:3] == ["replicasets", "rs", "apps/v1"]
    assert rows["leases"] == ["leases", "coordination.k8s.io/v1", "true", "Lease"]
    assert "pods metrics.k8s.io/v1beta1 true PodMetrics" in [
        " ".join(line.split()) for line in done.stdout.splitlines()
    ]


def test_explain_reads_the_openapi_schemas(kubectl: Kubectl) -> None:
    out = kubectl("explain", "pods.spec.containers").stdout
    assert "KIND:       Pod" in out
    assert "image\t<string>" in out
    assert "env\t<[]EnvVar>" in out
