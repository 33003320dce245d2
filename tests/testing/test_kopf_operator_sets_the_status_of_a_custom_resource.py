"""A kopf operator, run by ``kopf.testing.KopfRunner``, handles a custom resource on the
``kubelite_cluster`` fixture: the CRD is created with the official client, the operator's
create handler patches the Widget's status, and the test reads that status back."""

from __future__ import annotations

from pathlib import Path

import pytest
from kopf.testing import KopfRunner
from kubernetes import client

from kubelite.testing.pytest_plugin import KubeliteCluster
from kubelite.testing.waiting import poll_until
from tests.factories import crd, widget

OPERATOR = """
import kopf


@kopf.on.login()
def login(**kwargs):
    return kopf.login_with_kubeconfig(**kwargs)  # reads KUBECONFIG: the cluster's kubeconfig


@kopf.on.create("example.com", "v1", "widgets")
def ready(spec, patch, **_):
    patch.status["ready"] = spec.get("size") == "small"
    patch.status["replicas"] = 1
"""


def test_kopf_handler_sets_status(
    kubelite_cluster: KubeliteCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubelite_cluster.kubeconfig))
    operator = tmp_path / "operator.py"
    operator.write_text(OPERATOR)
    with kubelite_cluster.api_client() as api_client:
        extensions = client.ApiextensionsV1Api(api_client)
        custom = client.CustomObjectsApi(api_client)
        extensions.create_custom_resource_definition(crd(versions=("v1",)))

        def established() -> bool:
            got = extensions.read_custom_resource_definition("widgets.example.com")
            conditions = got.status.conditions or []
            return any(c.type == "Established" and c.status == "True" for c in conditions)

        poll_until(established, what="the Widget CRD to be established")
        args = ["run", "--standalone", "--namespace", "default", str(operator)]
        with KopfRunner(args) as runner:
            custom.create_namespaced_custom_object(
                "example.com", "v1", "default", "widgets", widget("w1")
            )

            def status() -> object:
                got = custom.get_namespaced_custom_object(
                    "example.com", "v1", "default", "widgets", "w1"
                )
                return got.get("status", {}).get("ready")

            assert poll_until(status, what="the operator to set the Widget's status") is True
    assert runner.exception is None, runner.output
    assert runner.exit_code == 0, runner.output
    assert "Handler 'ready' succeeded." in runner.output
