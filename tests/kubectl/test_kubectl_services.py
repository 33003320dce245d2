"""Stock kubectl with Services against a real apiserver process: ``expose deployment`` and
``expose pod``, ``create service clusterip|nodeport|loadbalancer|externalname`` (protobuf
bodies), ``get svc`` with Kubernetes' columns (``<none>``, ``<pending>``, ``80:30080/TCP``,
``-o wide`` SELECTOR), ``describe svc`` and ``cluster-info``."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.factories import deployment, pod, yaml_of
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def get_json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(kubectl("get", *args, "-o", "json").stdout)
    return loaded


def rows(output: str) -> dict[str, list[str]]:
    """``kubectl get`` output: the header row under "NAME", then each row by its name."""
    lines = [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]
    return {line[0]: line for line in lines}


def test_expose_a_deployment_and_a_pod(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "expose")
    kubectl.apply(yaml_of(deployment("web", replicas=1)), "-n", "expose")
    done = kubectl("expose", "deployment", "web", "-n", "expose", "--port=80", "--target-port=8080")
    assert done.stdout.strip() == "service/web exposed"
    svc = get_json(kubectl, "svc", "web", "-n", "expose")
    assert (
        svc["spec"]["selector"] == deployment("web", replicas=1)["spec"]["selector"]["matchLabels"]
    )
    assert svc["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 8080}]
    assert svc["spec"]["clusterIP"].startswith("127.128.")

    kubectl.apply(yaml_of(pod("solo", labels={"run": "solo"})), "-n", "expose")
    kubectl("expose", "pod", "solo", "-n", "expose", "--port=8080", "--name=solo-svc")
    solo = get_json(kubectl, "svc", "solo-svc", "-n", "expose")
    assert solo["spec"]["selector"] == {"run": "solo"}
    assert solo["spec"]["ports"][0]["port"] == 8080


def test_create_service_of_each_type_and_get_its_columns(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "kinds")
    kubectl("create", "service", "clusterip", "cip", "-n", "kinds", "--tcp=80:8080")
    kubectl("create", "service", "nodeport", "np", "-n", "kinds", "--tcp=80:8080",
            "--node-port=30080")  # fmt: skip
    kubectl("create", "service", "loadbalancer", "lb", "-n", "kinds", "--tcp=443:8443")
    kubectl("create", "service", "externalname", "ext", "-n", "kinds",
            "--external-name=example.org")  # fmt: skip
    kubectl("create", "service", "clusterip", "headless", "-n", "kinds", "--clusterip=None")

    table = rows(kubectl("get", "svc", "-n", "kinds").stdout)
    assert table["NAME"] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    cip = get_json(kubectl, "svc", "cip", "-n", "kinds")["spec"]["clusterIP"]
    assert table["cip"][1:5] == ["ClusterIP", cip, "<none>", "80/TCP"]
    assert table["np"][1] == "NodePort" and table["np"][4] == "80:30080/TCP"
    lb_port = get_json(kubectl, "svc", "lb", "-n", "kinds")["spec"]["ports"][0]["nodePort"]
    assert table["lb"][3:5] == ["<pending>", f"443:{lb_port}/TCP"]
    assert table["ext"][1:5] == ["ExternalName", "<none>", "example.org", "<none>"]
    assert table["headless"][1:3] == ["ClusterIP", "None"]

    wide = rows(kubectl("get", "svc", "cip", "-n", "kinds", "-o", "wide").stdout)
    assert wide["NAME"][-1] == "SELECTOR"
    assert wide["cip"][-1] == "app=cip"

    clash = kubectl("create", "service", "nodeport", "np2", "-n", "kinds", "--tcp=80:8080",
                    "--node-port=30080", check=False)  # fmt: skip
    assert clash.returncode != 0
    assert clash.stderr.strip() == (
        'error: failed to create NodePort service: Service "np2" is invalid: '
        "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    )


def test_describe_service(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "desc")
    kubectl("create", "service", "nodeport", "shop", "-n", "desc", "--tcp=80:8080")
    svc = get_json(kubectl, "svc", "shop", "-n", "desc")
    out = kubectl("describe", "svc", "shop", "-n", "desc").stdout
    fields = dict(
        re.split(r":\s+", line, maxsplit=1)
        for line in out.splitlines()
        if re.match(r"^[A-Z][A-Za-z ]+:\s+\S", line)
    )
    assert fields["Name"] == "shop"
    assert fields["Namespace"] == "desc"
    assert fields["Selector"] == "app=shop"
    assert fields["Type"] == "NodePort"
    assert fields["IP"] == svc["spec"]["clusterIP"]
    assert fields["IP Family Policy"] == "SingleStack"
    assert fields["TargetPort"] == "8080/TCP"
    assert fields["NodePort"] == f"80-8080  {svc['spec']['ports'][0]['nodePort']}/TCP"
    assert fields["Session Affinity"] == "None"
    assert fields["External Traffic Policy"] == "Cluster"


def test_cluster_info_names_the_server_and_the_cluster_services(kubectl: Kubectl) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kube-dns-test",
            "namespace": "kube-system",
            "labels": {"kubernetes.io/cluster-service": "true"},
        },
        "spec": {"ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]},
    }
    kubectl.apply(yaml_of(manifest))
    out = kubectl("cluster-info").stdout
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert f"Kubernetes control plane is running at {kubectl.server}" in plain
    assert (
        f"kube-dns-test is running at {kubectl.server}"
        "/api/v1/namespaces/kube-system/services/kube-dns-test:dns/proxy"
    ) in plain
