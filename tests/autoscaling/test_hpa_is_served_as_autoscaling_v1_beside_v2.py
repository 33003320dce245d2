"""autoscaling/v1 HorizontalPodAutoscaler, served from the same storage as v2, against a real
apiserver process: stock kubectl 1.32's ``kubectl autoscale`` (an autoscaling/v1 body sent as
protobuf) creates an HPA that reads back in v2 with its CPU metric, and prints the same columns
through either version; a v2 object with a memory metric and a behavior reads in v1 with the
metrics and behavior annotations and, written back through v1, is the same v2 object; a v1 watch
gets v1 objects; the official client's AutoscalingV1Api creates, reads, lists, patches, replaces
(status too) and deletes; discovery prefers v2 and lists v1, whose OpenAPI names the v1 kind."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from kubelite.testing import ComponentProcess
from tests import factories
from tests.kubectl.harness import Kubectl

Obj = dict[str, Any]
NS = "default"
V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
METRICS = "autoscaling.alpha.kubernetes.io/metrics"
BEHAVIOR = "autoscaling.alpha.kubernetes.io/behavior"


def _call(url: str, method: str = "GET", body: Obj | None = None) -> Obj:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        decoded: Obj = json.loads(response.read())
    return decoded


def _cpu(percent: int) -> Obj:
    return {
        "type": "Resource",
        "resource": {
            "name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": percent},
        },
    }


def test_kubectl_autoscale_writes_v1_and_v2_reads_the_cpu_metric(
    kubelite_apiserver: ComponentProcess, tmp_path: Path
) -> None:
    kubectl = Kubectl.on(kubelite_apiserver.url, workdir=tmp_path)
    kubectl("create", "deployment", "web", "--image=nginx")
    kubectl("autoscale", "deployment", "web", "--cpu-percent=50", "--min=1", "--max=5")

    v2 = _call(f"{kubelite_apiserver.url}{V2}/web")
    assert v2["apiVersion"] == "autoscaling/v2"
    assert v2["spec"]["metrics"] == [_cpu(50)]
    assert (v2["spec"]["minReplicas"], v2["spec"]["maxReplicas"]) == (1, 5)
    assert v2["spec"]["scaleTargetRef"]["name"] == "web"
    v1 = _call(f"{kubelite_apiserver.url}{V1}/web")
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 50
    assert METRICS not in (v1["metadata"].get("annotations") or {})

    via_v2 = kubectl("get", "horizontalpodautoscalers.v2.autoscaling", "web").stdout
    via_v1 = kubectl("get", "horizontalpodautoscalers.v1.autoscaling", "web").stdout
    assert via_v1.split("\n")[0] == via_v2.split("\n")[0]
    assert via_v1.split()[:-1] == via_v2.split()[:-1]  # all but the age
    assert "cpu: <unknown>/50%" in via_v1


def test_v2_only_fields_ride_v1_annotations_and_come_back(
    kubelite_apiserver: ComponentProcess,
) -> None:
    base = kubelite_apiserver.url
    memory = {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}},
    }
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Min"}}
    created = _call(
        f"{base}{V2}",
        "POST",
        factories.horizontal_pod_autoscaler(
            "mem", target="web", metrics=[memory], behavior=behavior
        ),
    )

    v1 = _call(f"{base}{V1}/mem")
    annotations = v1["metadata"]["annotations"]
    assert "targetCPUUtilizationPercentage" not in v1["spec"]
    assert json.loads(annotations[METRICS]) == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "500Mi"}}
    ]
    assert json.loads(annotations[BEHAVIOR]) == created["spec"]["behavior"]

    v1["metadata"]["labels"] = {"touched": "through-v1"}
    _call(f"{base}{V1}/mem", "PUT", v1)
    after = _call(f"{base}{V2}/mem")
    assert after["spec"] == created["spec"]
    assert after["metadata"]["labels"] == {"touched": "through-v1"}
    assert "annotations" not in after["metadata"]


def test_a_v1_watch_sees_v1_objects(kubelite_apiserver: ComponentProcess) -> None:
    base = kubelite_apiserver.url
    _call(
        f"{base}{V2}",
        "POST",
        factories.horizontal_pod_autoscaler("watched", target="web", metrics=[_cpu(70)]),
    )
    url = f"{base}{V1}?watch=1&timeoutSeconds=30"
    with urllib.request.urlopen(url, timeout=30) as stream:
        added = json.loads(stream.readline())
        status = {"status": {"currentReplicas": 2, "desiredReplicas": 3}}
        request = urllib.request.Request(
            f"{base}{V2}/watched/status",
            data=json.dumps(status).encode(),
            method="PATCH",
            headers={"Content-Type": "application/merge-patch+json"},
        )
        urllib.request.urlopen(request, timeout=30).close()
        modified = json.loads(stream.readline())
    assert added["type"] == "ADDED"
    assert added["object"]["apiVersion"] == "autoscaling/v1"
    assert added["object"]["spec"]["targetCPUUtilizationPercentage"] == 70
    assert modified["type"] == "MODIFIED"
    assert modified["object"]["apiVersion"] == "autoscaling/v1"
    assert modified["object"]["status"]["desiredReplicas"] == 3


def test_official_client_autoscaling_v1_crud(kubelite_apiserver: ComponentProcess) -> None:
    api = client.AutoscalingV1Api(
        client.ApiClient(client.Configuration(host=kubelite_apiserver.url))
    )
    body = client.V1HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="crud"),
        spec=client.V1HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V1CrossVersionObjectReference(
                api_version="apps/v1", kind="Deployment", name="web"
            ),
            max_replicas=4,
            target_cpu_utilization_percentage=60,
        ),
    )
    created = api.create_namespaced_horizontal_pod_autoscaler(NS, body)
    assert created.spec.min_replicas == 1  # defaulted, as Kubernetes
    assert created.spec.target_cpu_utilization_percentage == 60

    listed = api.list_namespaced_horizontal_pod_autoscaler(NS)
    assert [h.metadata.name for h in listed.items] == ["crud"]

    patched = api.patch_namespaced_horizontal_pod_autoscaler(
        "crud", NS, {"spec": {"targetCPUUtilizationPercentage": 75}}
    )
    assert patched.spec.target_cpu_utilization_percentage == 75
    v2 = _call(f"{kubelite_apiserver.url}{V2}/crud")
    assert v2["spec"]["metrics"] == [_cpu(75)]

    patched.spec.max_replicas = 6
    replaced = api.replace_namespaced_horizontal_pod_autoscaler("crud", NS, patched)
    assert replaced.spec.max_replicas == 6

    replaced.status = client.V1HorizontalPodAutoscalerStatus(
        current_replicas=2, desired_replicas=2, current_cpu_utilization_percentage=40
    )
    status = api.replace_namespaced_horizontal_pod_autoscaler_status("crud", NS, replaced)
    assert status.status.current_cpu_utilization_percentage == 40
    v2 = _call(f"{kubelite_apiserver.url}{V2}/crud")
    assert v2["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 40
    assert (
        api.read_namespaced_horizontal_pod_autoscaler_status("crud", NS).status.desired_replicas
        == 2
    )

    api.delete_namespaced_horizontal_pod_autoscaler("crud", NS)
    try:
        api.read_namespaced_horizontal_pod_autoscaler("crud", NS)
    except ApiException as exc:
        assert exc.status == 404
    else:
        raise AssertionError("the deleted HPA still reads")


def test_discovery_prefers_v2_and_openapi_describes_v1(
    kubelite_apiserver: ComponentProcess,
) -> None:
    base = kubelite_apiserver.url
    group = _call(f"{base}/apis/autoscaling")
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]
    assert group["preferredVersion"]["version"] == "v2"
    v1_resources = _call(f"{base}/apis/autoscaling/v1")["resources"]
    assert {r["name"] for r in v1_resources} == {
        "horizontalpodautoscalers",
        "horizontalpodautoscalers/status",
    }
    document = _call(f"{base}/openapi/v3/apis/autoscaling/v1")
    schema = document["components"]["schemas"]["io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}
    ]
    spec = document["components"]["schemas"][
        "io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerSpec"
    ]
    assert "targetCPUUtilizationPercentage" in spec["properties"]


def test_kubectl_applies_and_patches_through_v1(
    kubelite_apiserver: ComponentProcess, tmp_path: Path
) -> None:
    kubectl = Kubectl.on(kubelite_apiserver.url, workdir=tmp_path)
    manifest: Obj = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "applied", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 3,
            "targetCPUUtilizationPercentage": 60,
        },
    }
    kubectl.apply(manifest, "--server-side")
    resource = "horizontalpodautoscalers.v1.autoscaling"
    kubectl("patch", resource, "applied", "-p", '{"spec":{"maxReplicas":7}}')  # strategic
    kubectl(
        "patch",
        resource,
        "applied",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/targetCPUUtilizationPercentage","value":65}]',
    )
    v2 = _call(f"{kubelite_apiserver.url}{V2}/applied")
    assert (v2["spec"]["maxReplicas"], v2["spec"]["metrics"]) == (7, [_cpu(65)])

    manifest["spec"]["targetCPUUtilizationPercentage"] = 55
    kubectl.apply(manifest, "--server-side", "--force-conflicts")
    v2 = _call(f"{kubelite_apiserver.url}{V2}/applied")
    assert v2["spec"]["metrics"] == [_cpu(55)]
