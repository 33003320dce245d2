"""``services/{name}/proxy`` and ``pods/{name}/proxy`` through a real apiserver to real pods.

One apiserver, a controller-manager (the EndpointSlices), a kubelet (process runtime) and the
cluster DNS, each a process on loopback; two pods on the node: ``web`` (nginx) behind the
Service ``web`` (port 80), and ``echo`` (a python server answering any HTTP request with its
method, path, headers and body) behind ``echo`` (port ``http`` 8080). It shows:

* ``kubectl get --raw .../services/web:80/proxy/`` and the official client's
  ``connect_get_namespaced_service_proxy_with_path`` / ``connect_get_namespaced_pod_proxy``
  reach nginx, by every name form (``web``, ``web:80``, ``http:web:80``, ``echo:http``);
* every method is relayed with its path, query and body, without the caller's credentials;
  ``.../proxy`` without a path is a 301 to ``.../proxy/``;
* Kubernetes' errors: a Service without endpoints is a 503 ``no endpoints available for service
  "empty"``, an undeclared port number 503 ``no service port 81 found``, a malformed name 400;
* ``kubectl cluster-info`` lists the DNS's URL (``kube-dns:dns``); it answers 503 as Kubernetes
  does for a Service no pod backs (kubelite's DNS is a process, not a pod).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from kubernetes import client as k8s

from kubelite import up
from kubelite.testing import Processes
from kubelite.testing.waiting import poll_until
from tests import factories
from tests.e2e.cluster import loopback_pod_cidr
from tests.kubectl.harness import Kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.kubectl, pytest.mark.timeout(300)]


@dataclass(frozen=True)
class Cluster:
    server: str
    workdir: Path


def _listening(port: int) -> dict[str, object]:
    return {"tcpSocket": {"port": port}, "periodSeconds": 1}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("proxy-subresource")
    processes = Processes(root)
    try:
        service_cidr = up.cluster_service_cidr(root)
        api = processes.apiserver(
            store="memory://", args=[f"--service-cluster-ip-range={service_cidr}"]
        )
        processes.controller_manager(api.url)
        processes.dns(api.url, address=up.cluster_dns_ip(service_cidr))
        node = f"px-{random.randint(1000, 9999)}"
        processes.kubelet(
            api.url, node, runtime="process",
            args=["--pod-cidr", loopback_pod_cidr(1), "--stop-pods-on-exit"],
        )  # fmt: skip
        kubectl = Kubectl.on(api.url, workdir=root)
        web = factories.pod(
            "web",
            factories.container(
                "web", "nginx", ports=[{"containerPort": 80}], readinessProbe=_listening(80)
            ),
            labels={"app": "web"},
            nodeName=node,
        )
        echo = factories.pod(
            "echo",
            factories.http_echo_server(readinessProbe=_listening(factories.HTTP_ECHO_PORT)),
            labels={"app": "echo"},
            nodeName=node,
        )
        services = [
            factories.service("web", selector={"app": "web"}),
            factories.service(
                "echo",
                selector={"app": "echo"},
                ports=[{"name": "http", "port": 8080, "targetPort": "http"}],
            ),
            factories.service("empty", selector={"app": "nothing"}),
        ]
        for obj in (web, echo, *services):
            kubectl.apply(obj, "--validate=false")
        for service in ("web", "echo"):  # a ready endpoint in the Service's slice
            poll_until(
                lambda s=service: "true"
                in kubectl(
                    "get", "endpointslices", "-l", f"kubernetes.io/service-name={s}",
                    "-o", "jsonpath={.items[*].endpoints[*].conditions.ready}", check=False,
                ).stdout,
                what=f"{service} has a ready endpoint",
            )  # fmt: skip
        yield Cluster(server=api.url, workdir=root)
    finally:
        processes.stop_all()


@pytest.fixture
def kubectl(cluster: Cluster, tmp_path: Path) -> Kubectl:
    return Kubectl.on(cluster.server, workdir=tmp_path)


@pytest.fixture
def core(cluster: Cluster) -> Iterator[k8s.CoreV1Api]:
    api = k8s.ApiClient(k8s.Configuration(host=cluster.server))
    try:
        yield k8s.CoreV1Api(api)
    finally:
        api.close()


SERVICES = "/api/v1/namespaces/default/services"


def test_kubectl_get_raw_reaches_nginx_through_the_service_by_every_name_form(
    kubectl: Kubectl,
) -> None:
    for name in ("web", "web:80", "http:web:80", "web:"):
        out = kubectl("get", "--raw", f"{SERVICES}/{name}/proxy/").stdout
        assert "Welcome to nginx" in out, name
    assert "Welcome to nginx" in kubectl("get", "--raw", f"{SERVICES}/web/proxy/index.html").stdout


def test_the_official_client_connects_to_service_and_pod_proxies(core: k8s.CoreV1Api) -> None:
    body = core.connect_get_namespaced_service_proxy_with_path("web:80", "default", "index.html")
    assert "Welcome to nginx" in body
    # no path: Kubernetes answers 301 to .../proxy/, which the client follows
    assert "Welcome to nginx" in core.connect_get_namespaced_pod_proxy("web", "default")
    # a JSON answer: read raw, as the client would turn it into the str() of a dict
    answer = core.connect_get_namespaced_pod_proxy_with_path(
        "echo:http", "default", "who", path2="x", _preload_content=False
    )
    said = json.loads(answer.data)
    assert (said["method"], said["path"]) == ("GET", "/who?path=x")


async def test_every_method_is_relayed_with_path_query_and_body_but_no_credentials(
    cluster: Cluster,
) -> None:
    url = f"{cluster.server}{SERVICES}/echo:http/proxy/some/where?a=1&b=two"
    headers = {"Authorization": "Bearer secret", "X-Custom": "kept"}
    async with aiohttp.ClientSession() as session:
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
            async with session.request(method, url, data=b"payload", headers=headers) as r:
                assert r.status == 200, (method, await r.text())
                said = await r.json()
            assert said["method"] == method and said["path"] == "/some/where?a=1&b=two"
            assert said["body"] == "payload"
            assert said["headers"]["X-Custom"] == "kept"
            assert "Authorization" not in said["headers"]
            assert "X-Forwarded-For" in said["headers"]
        async with session.head(url) as r:
            assert r.status == 200
        bare = f"{cluster.server}{SERVICES}/web/proxy"
        async with session.get(bare + "?q=1", allow_redirects=False) as r:
            assert r.status == 301
            assert r.headers["Location"] == f"{SERVICES}/web/proxy/?q=1"


def _status(kubectl: Kubectl, path: str) -> str:
    result = kubectl("get", "--raw", path, check=False)
    assert result.returncode != 0, result.stdout
    return result.stderr.strip()


def test_kubernetes_errors_for_what_cannot_be_reached(kubectl: Kubectl) -> None:
    assert _status(kubectl, f"{SERVICES}/empty/proxy/") == (
        'Error from server (ServiceUnavailable): no endpoints available for service "empty"'
    )
    assert _status(kubectl, f"{SERVICES}/web:81/proxy/") == (
        'Error from server (ServiceUnavailable): no service port 81 found for service "web"'
    )
    assert _status(kubectl, f"{SERVICES}/echo:nope/proxy/") == (
        'Error from server (ServiceUnavailable): no endpoints available for service "echo:nope"'
    )
    assert _status(kubectl, f"{SERVICES}/ftp:web:80/proxy/") == (
        'Error from server (BadRequest): invalid service request "ftp:web:80"'
    )
    assert _status(kubectl, f"{SERVICES}/missing/proxy/") == (
        'Error from server (NotFound): services "missing" not found'
    )


def test_cluster_info_lists_the_dns_url_which_answers_as_kubernetes_does(
    kubectl: Kubectl, cluster: Cluster
) -> None:
    out = re.sub(r"\x1b\[[0-9;]*m", "", kubectl("cluster-info").stdout)  # its colours
    dns = f"{cluster.server}/api/v1/namespaces/kube-system/services/kube-dns:dns/proxy"
    assert f"CoreDNS is running at {dns}" in out
    path = dns.removeprefix(cluster.server)
    # the DNS is no pod: no endpoint passes Kubernetes' check that it is a pod's address
    assert _status(kubectl, path + "/") == (
        'Error from server (ServiceUnavailable): no endpoints available for service "kube-dns:dns"'
    )


def test_a_pod_address_off_loopback_is_never_dialled(kubectl: Kubectl, cluster: Cluster) -> None:
    """DESIGN.md §6: the proxy dials only 127.0.0.0/8. A pod whose status names another address
    (192.0.2.0/24, documentation space) is refused as Kubernetes refuses an address it will not
    dial."""
    ghost = factories.pod("ghost", nodeName="nowhere")
    kubectl.apply(ghost, "--validate=false")
    kubectl(
        "patch", "pod", "ghost", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"podIP": "192.0.2.10", "podIPs": [{"ip": "192.0.2.10"}]}}),
    )  # fmt: skip
    path = "/api/v1/namespaces/default/pods/ghost:80/proxy/"
    assert _status(kubectl, path) == "Error from server (BadRequest): address not allowed"
