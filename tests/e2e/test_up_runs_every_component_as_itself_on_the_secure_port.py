"""``kubelite up --port -1``: the plain port closed, every component on 6443 as itself.

With the insecure port closed there is nothing to fall back to: a component that did not reach
the secure port with its own kubeconfig could do nothing at all. One real ``kubelite up`` (two
process-runtime nodes) is started so, and then, as the admin over HTTPS (the kubeconfig it
wrote):

* every component's command line names its own kubeconfig under ``<state-dir>/kubeconfigs``
  and no ``--server``;
* a Deployment whose pods read a ConfigMap (env) and a Secret (volume) and a Service: the
  controller-manager makes the pods, the scheduler binds them, each kubelet reads what its pods
  reference (the Node authorizer), runs them and reports them Running and Ready (NodeRestriction
  lets a node write its own pods' status), the endpointslice controller fills the Service's
  slice, and the DNS answers the Service's name with its ClusterIP;
* each node's Lease is renewed, and the scheduler, the controllers and the kubelets post Events;
* scaled down, the pod that goes is deleted for good by its kubelet (a node deleting a pod
  bound to itself);
* Ctrl-C stops it all with exit code 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
from pathlib import Path
from typing import Any

import dns.asyncquery
import dns.message
import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite.testing.waiting import apoll_until
from tests.e2e.cluster import leftover_processes, loopback_pod_cidr
from tests.factories import container, deployment, service

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

PODS = REGISTRY.require("", "Pod")
SERVICES = REGISTRY.require("", "Service")
SECRETS = REGISTRY.require("", "Secret")
CONFIGMAPS = REGISTRY.require("", "ConfigMap")
DEPLOYMENTS = REGISTRY.require("apps", "Deployment")
SLICES = REGISTRY.require("discovery.k8s.io", "EndpointSlice")
LEASES = REGISTRY.require("coordination.k8s.io", "Lease")
EVENTS = REGISTRY.require("", "Event")
BANNER = re.compile(r"kubelite is up: API at (\S+)")
DNS_LINE = re.compile(r"kubelite: dns dns listening on dns://([\d.]+):(\d+)")
COMPONENTS = {
    "services.controller_manager": "controller-manager",
    "services.scheduler": "scheduler",
    "services.proxy": "proxy",
    "services.dns": "dns",
}
Obj = dict[str, Any]


async def read_until_banner(stream: asyncio.StreamReader, log: Path) -> list[str]:
    """``up``'s output (copied to ``log``) up to and including its banner line."""
    lines: list[str] = []
    with log.open("w") as out:
        while not lines or not BANNER.search(lines[-1]):
            raw = await stream.readline()
            if not raw:
                raise AssertionError(f"kubelite up ended before its banner; see {log}")
            lines.append(raw.decode(errors="replace").rstrip("\n"))
            out.write(lines[-1] + "\n")
    return lines


def web_deployment() -> Obj:
    body = deployment("web", replicas=2, image="nginx:1.27")
    env = {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "web", "key": "hi"}}}
    web = container("app", "nginx:1.27", env=[env], ports=[{"containerPort": 80}])
    web["volumeMounts"] = [{"name": "creds", "mountPath": "/creds"}]
    web["readinessProbe"] = {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1}
    spec = body["spec"]["template"]["spec"]
    spec["containers"] = [web]
    spec["volumes"] = [{"name": "creds", "secret": {"secretName": "web"}}]
    spec["terminationGracePeriodSeconds"] = 5
    return body


def ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def test_every_component_works_as_itself_with_the_plain_port_closed(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    argv = [
        sys.executable, "-m", "kubelite", "up", "--state-dir", str(state),
        "--port", "-1", "--secure-port", "0", "--kubelet-port", "0", "--scheduler-port", "0",
        "--controller-manager-port", "0", "--proxy-port", "0", "--dns-health-port", "0",
        "--pod-cidr", loopback_pod_cidr(2), "--no-color",
    ]  # fmt: skip
    up = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    assert up.stdout is not None
    try:
        lines = await asyncio.wait_for(read_until_banner(up.stdout, tmp_path / "up.log"), 120)
        banner = BANNER.search(lines[-1])
        assert banner is not None and banner[1].startswith("https://127.0.0.1:")
        drain = asyncio.create_task(up.stdout.read(), name="drain up's output")

        # ---- every component is started as itself -----------------------------------------
        kubeconfigs = state / "kubeconfigs"
        processes = leftover_processes(marker=str(kubeconfigs))
        seen: dict[str, str] = {}
        for cmdline in processes.values():
            for module, name in COMPONENTS.items():
                if f"-m {module} " in cmdline:
                    seen[name] = cmdline
            if "-m services.kubelet " in cmdline:
                node = re.search(r"--node-name=(\S+)", cmdline)
                assert node is not None
                seen[node[1]] = cmdline
        assert set(seen) == {*COMPONENTS.values(), "node1", "node2"}
        for name, cmdline in seen.items():
            own = f"node-{name}" if name.startswith("node") else name
            assert f"--kubeconfig={kubeconfigs / own}.conf" in cmdline, name
            assert "--server" not in cmdline, name

        # ---- the seed flow, as the admin over HTTPS -----------------------------------------
        async with ApiClient.from_kubeconfig(str(state / "kubeconfig")) as admin:
            await flow(admin, dns_at=dns_address(lines))
    finally:
        with contextlib.suppress(ProcessLookupError):
            up.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(up.wait(), 120)
    await drain
    assert code == 0


def dns_address(lines: list[str]) -> tuple[str, int]:
    for line in lines:
        if found := DNS_LINE.search(line):
            return found[1], int(found[2])
    raise AssertionError("the DNS announced no address")


async def flow(admin: ApiClient, *, dns_at: tuple[str, int]) -> None:
    ns = "default"
    await admin.create(
        CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}, "data": {"hi": "1"}},
        namespace=ns,
    )
    await admin.create(
        SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web"}, "data": {"k": "MQ=="}},
        namespace=ns,
    )
    await admin.create(DEPLOYMENTS, web_deployment(), namespace=ns)
    svc = await admin.create(SERVICES, service("web", selector={"app": "web"}), namespace=ns)
    cluster_ip = svc["spec"]["clusterIP"]

    async def web_pods() -> list[Obj]:
        listing = await admin.list(PODS, namespace=ns, label_selector="app=web")
        return [p for p in listing["items"] if not p["metadata"].get("deletionTimestamp")]

    async def two_ready() -> list[Obj] | None:
        pods = await web_pods()
        return pods if len(pods) == 2 and all(ready(p) for p in pods) else None

    pods = await apoll_until(two_ready, what="2 web pods Running and Ready", within=120)
    assert {p["status"]["phase"] for p in pods} == {"Running"}
    ips = {p["status"]["podIP"] for p in pods}

    async def slice_filled() -> bool:
        listing = await admin.list(
            SLICES, namespace=ns, label_selector="kubernetes.io/service-name=web"
        )
        addresses = {
            a
            for s in listing["items"]
            for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready")
            for a in e.get("addresses") or []
        }
        return addresses == ips

    await apoll_until(slice_filled, what="web's EndpointSlice holds both ready pods", within=60)

    query = dns.message.make_query("web.default.svc.cluster.local", "A")
    answer = await dns.asyncquery.udp(query, dns_at[0], port=dns_at[1], timeout=5)
    assert [item.address for rrset in answer.answer for item in rrset] == [cluster_ip]

    # ---- leases renew, events post ------------------------------------------------------------
    async def node_leases() -> dict[str, str]:
        listing = await admin.list(LEASES, namespace="kube-node-lease")
        return {lease["metadata"]["name"]: lease["spec"]["renewTime"] for lease in listing["items"]}

    async def both() -> dict[str, str] | None:
        leases = await node_leases()
        return leases if set(leases) == {"node1", "node2"} else None

    first = await apoll_until(both, what="a Lease for each node")

    async def renewed() -> bool:
        now = await node_leases()
        return set(now) == set(first) and all(now[name] != first[name] for name in first)

    await apoll_until(renewed, what="both node Leases renewed", within=60)

    async def reasons() -> set[str] | None:
        found = {e.get("reason") for e in (await admin.list(EVENTS, namespace=ns))["items"]}
        wanted = {"ScalingReplicaSet", "SuccessfulCreate", "Scheduled", "Started"}
        return found if wanted <= found else None

    await apoll_until(reasons, what="events from the controllers, scheduler and kubelets")

    # ---- scaled down, the pod that goes is deleted for good by its kubelet ----------------------
    await admin.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 1}}, namespace=ns)

    async def one_left() -> bool:
        listing = await admin.list(PODS, namespace=ns, label_selector="app=web")
        return len(listing["items"]) == 1

    await apoll_until(one_left, what="the scaled-down pod gone from the API", within=90)
