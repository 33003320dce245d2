"""``kubelite up``, Ctrl-C, ``kubelite up`` again on the same state dir: the cluster resumes.

The real command as a person runs it (a subprocess reading its prefixed output for the banner):
a component killed with SIGKILL is restarted, and ``up`` says so (the proxy's Service traffic and
the DNS's answers come back); an RC of 2 nginx pods and a
standalone pod run; SIGINT stops every component *and* every pod's process; the second ``kubelite up`` brings back the same objects (same uids, nothing created
twice) and the same pods running again on the same nodes and pod IPs, answering HTTP; a second
SIGINT leaves nothing behind again.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from ipaddress import IPv4Network
from pathlib import Path

import dns.asyncquery
import dns.message
import pytest
import yaml

from api.registry import REGISTRY
from kubelite import up
from kubelite.testing.waiting import apoll_until
from tests.e2e.cluster import (
    PODS,
    RCS,
    ClusterView,
    UpProcess,
    banner_api_url,
    http_get,
    leftover_processes,
    loopback_pod_cidr,
    pod_processes,
    running,
)
from tests.factories import nginx_rc, service, sleeper

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

SERVICES = REGISTRY.require("", "Service")
PREFIX = re.compile(r"^(up|apiserver|controller-manager|scheduler|proxy|dns|node1|node2) +\| ")


def child_pid(module: str, marker: str) -> int:
    """The pid of the one process running ``module`` whose command line holds ``marker``."""
    found = [
        pid
        for pid, cmdline in leftover_processes(marker=marker).items()
        if f"-m {module} " in cmdline
    ]
    assert len(found) == 1, found
    return found[0]


async def test_ctrl_c_then_up_again_resumes_objects_and_running_pods(tmp_path: Path) -> None:
    state = tmp_path / "state"
    cidr = loopback_pod_cidr(2)
    network = IPv4Network(cidr)

    def argv(port: int) -> list[str]:
        return [
            sys.executable, "-m", "kubelite", "up",
            "--state-dir", str(state), "--port", str(port), "--kubelet-port", "0",
            "--scheduler-port", "0", "--controller-manager-port", "0", "--proxy-port", "0",
            "--dns-health-port", "0", "--secure-port", "0",
            "--pod-cidr", cidr,
            "--no-color",
        ]  # fmt: skip

    marker = str(state)  # in every child's command line: its state or kubeconfig under it
    runs: list[UpProcess] = []
    try:
        # ---- first run: start, run things, Ctrl-C --------------------------------------------
        first = UpProcess(argv(0), tmp_path / "up-1.log")  # 0: any free port, read from the banner
        runs.append(first)
        await first.start()
        await first.wait_banner()
        port = int(banner_api_url(first.lines).rsplit(":", 1)[1])
        assert all(PREFIX.match(line) for line in first.lines), [
            line for line in first.lines if not PREFIX.match(line)
        ][:5]
        assert any(f"API at http://127.0.0.1:{port}" in line for line in first.lines)
        kubeconfig = yaml.safe_load((state / "kubeconfig").read_text())
        # the user's kubeconfig names the secure port, with the admin's client certificate
        assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
        assert kubeconfig["users"][0]["user"]["client-certificate"]

        view = ClusterView(f"http://127.0.0.1:{port}")
        await view.watch()
        try:
            await view.client.create(RCS, nginx_rc("web", replicas=2), namespace="default")
            await view.client.create(PODS, sleeper("solo"), namespace="default")
            web_service = service("web", selector={"app": "web"})
            cluster_ip = (await view.client.create(SERVICES, web_service, namespace="default"))[
                "spec"
            ]["clusterIP"]
            await view.until(
                lambda: len(view.live_pods()) == 3 and all(running(p) for p in view.live_pods()),
                within=60,
                what="2 web pods and solo Running",
            )
            before = {
                p["metadata"]["name"]: (
                    p["metadata"]["uid"], p["spec"]["nodeName"], p["status"]["podIP"]
                )
                for p in view.live_pods()
            }  # fmt: skip
            rc_uid = view.rcs.get("default/web")["metadata"]["uid"]
            assert set(pod_processes(network)) == {f"default/{n}" for n in before}
        finally:
            await view.close()

        # a component that dies is restarted, and up says so
        os.kill(child_pid("services.scheduler", marker), signal.SIGKILL)
        await first.wait_line(r"^up +\| scheduler exited with code -9; restarting in ")
        await first.wait_line(r"^scheduler +\| kubelite: scheduler health listening on ", count=2)
        # the cluster DNS too: restarted, it lists again and answers (port 53: we are root)
        os.kill(child_pid("services.dns", marker), signal.SIGKILL)
        await first.wait_line(r"^up +\| dns exited with code -9; restarting in ")
        await first.wait_line(r"^dns +\| kubelite: dns ready", count=2)
        dns_ip = up.cluster_dns_ip(up.cluster_service_cidr(state))
        query = dns.message.make_query("kubernetes.default.svc.cluster.local", "A")

        async def answered() -> bool:
            reply = await dns.asyncquery.udp(query, dns_ip, port=53, timeout=2)
            return bool(reply.answer)

        await apoll_until(answered, what="kubernetes.default.svc from the restarted DNS")
        # and the proxy: restarted, it lists again and the Service's ClusterIP answers again
        status, _ = await http_get(f"http://{cluster_ip}/", within=30)
        assert status == 200
        os.kill(child_pid("services.proxy", marker), signal.SIGKILL)
        await first.wait_line(r"^up +\| proxy exited with code -9; restarting in ")
        await first.wait_line(r"^proxy +\| kubelite: proxy ready", count=2)
        status, _ = await http_get(f"http://{cluster_ip}/", within=30)
        assert status == 200

        assert await first.interrupt() == 0
        assert first.lines[-1].endswith("| stopped")
        assert leftover_processes(root=state, network=network, marker=marker) == {}

        # ---- second run on the same state dir and port: the same cluster comes back ---------
        second = UpProcess(argv(port), tmp_path / "up-2.log")
        runs.append(second)
        await second.start()
        await second.wait_banner()
        view = ClusterView(f"http://127.0.0.1:{port}")
        await view.watch()
        try:
            # the API remembers the old status until each kubelet restarts its pod's container
            # in place: wait for a restart counted on every pod
            def resumed() -> bool:
                pods = view.live_pods()
                return len(pods) == 3 and all(
                    running(p)
                    and p["status"]["containerStatuses"][0].get("restartCount", 0) >= 1
                    and p["status"]["containerStatuses"][0].get("state", {}).get("running")
                    for p in pods
                )

            await view.until(resumed, within=90, what="every pod running again")
            after = {
                p["metadata"]["name"]: (
                    p["metadata"]["uid"], p["spec"]["nodeName"], p["status"]["podIP"]
                )
                for p in view.live_pods()
            }  # fmt: skip
            assert after == before  # same objects, same nodes, same pod IPs; nothing new
            assert view.rcs.get("default/web")["metadata"]["uid"] == rc_uid
            groups = pod_processes(network)
            assert set(groups) == {f"default/{n}" for n in before}
            assert all(len(g) == 1 for g in groups.values()), groups
            for name, (_, _, ip) in after.items():
                if name.startswith("web-"):
                    status, _ = await http_get(f"http://{ip}:80/")
                    assert status == 200
        finally:
            await view.close()

        assert await second.interrupt() == 0
        assert leftover_processes(root=state, network=network, marker=marker) == {}
    finally:
        for run in runs:
            await run.kill()
        for pid in leftover_processes(root=state, network=network, marker=marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
