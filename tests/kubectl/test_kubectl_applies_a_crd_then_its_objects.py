"""kubectl and the official client on a custom kind: ``kubectl apply -f`` of a CRD and then of an
object of its kind (client-side apply), ``kubectl get`` with the CRD's printer columns,
``kubectl explain`` from its schema, a 422 with the schema's causes, CustomObjectsApi and
ApiextensionsV1Api, and ``kubectl delete crd`` taking its objects with it."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from kubelite.testing import ComponentProcess
from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl

GROUP = "kubectl.example.com"
CRD_NAME = f"widgets.{GROUP}"


def test_kubectl_applies_a_crd_then_its_objects(
    kubectl: Kubectl, kubectl_apiserver: ComponentProcess
) -> None:
    created = kubectl.apply(factories.crd(group=GROUP))
    assert created.stdout.strip() == (
        f"customresourcedefinition.apiextensions.k8s.io/{CRD_NAME} created"
    )
    kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")

    applied = kubectl.apply(factories.widget("w1", group=GROUP, replicas=2))
    assert applied.stdout.strip() == f"widget.{GROUP}/w1 created"
    assert applied.stderr == ""
    reapplied = kubectl.apply(factories.widget("w1", group=GROUP, replicas=3))
    assert reapplied.stdout.strip() == f"widget.{GROUP}/w1 configured"

    table = kubectl("get", f"widgets.{GROUP}").stdout.splitlines()
    assert table[0].split() == ["NAME", "SIZE", "REPLICAS", "AGE"]
    assert table[1].split()[:3] == ["w1", "small", "3"]
    wide = kubectl("get", f"widgets.{GROUP}", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "SIZE", "REPLICAS", "READY", "AGE"]

    explained = kubectl("explain", f"widgets.{GROUP}.spec").stdout
    assert "size\t<string>" in explained
    assert "replicas\t<integer>" in explained

    bad = factories.yaml_of(factories.widget("bad", group=GROUP, size="huge"))
    refused = kubectl("apply", "-f", "-", stdin=bad, check=False)
    assert refused.returncode == 1
    assert 'spec.size: Unsupported value: "huge": supported values: "small", "large"' in (
        refused.stderr
    )

    api = k8s.ApiClient(k8s.Configuration(host=kubectl_apiserver.url))
    try:
        definition = k8s.ApiextensionsV1Api(api).read_custom_resource_definition(CRD_NAME)
        assert definition.status.accepted_names.kind == "Widget"
        objects = k8s.CustomObjectsApi(api)
        objects.create_namespaced_custom_object(
            GROUP, "v1", "default", "widgets", factories.widget("w2", group=GROUP)
        )
        listed = objects.list_namespaced_custom_object(GROUP, "v1", "default", "widgets")
        assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["w1", "w2"]
        w2 = objects.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "w2")
        assert w2["spec"] == {"size": "small", "replicas": 1, "color": "blue"}
        with pytest.raises(k8s.ApiException) as invalid:
            objects.create_namespaced_custom_object(
                GROUP, "v1", "default", "widgets", factories.widget("w3", group=GROUP, size="huge")
            )
        assert invalid.value.status == 422
    finally:
        api.close()

    deleted = kubectl("delete", "crd", CRD_NAME)
    assert (
        deleted.stdout.strip()
        == f'customresourcedefinition.apiextensions.k8s.io "{CRD_NAME}" deleted'
    )
    gone = kubectl("get", f"crd/{CRD_NAME}", check=False)
    assert gone.returncode != 0
    assert "NotFound" in gone.stderr
