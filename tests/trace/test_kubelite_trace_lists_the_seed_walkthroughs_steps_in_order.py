"""``kubelite trace`` on a real cluster (``tests/e2e/cluster.py``: the processes ``kubelite up``
runs, process runtime) for the seed's walkthrough.

node1 is labelled ``zz=cxk`` and the seed's ``pod-example`` (nodeSelector ``zz: cxk``, nginx,
here with a readiness probe) applied with the stock kubectl; ``kubelite trace pod pod-example``
lists every step in the lifecycle's order — created, scheduled onto node1, seen by the kubelet,
volumes and sandbox ready, image pulled, container created and started, (a probe failed before
nginx listened, perhaps,) probes passed — each
done by the component that does it, with offsets that never decrease. ``--watch`` started
before a pod exists prints its steps as they happen (with "running observed" once it saw phase
Running) and returns by itself once the pod is Running and Ready. ``kubelite trace rc web`` shows the seed's replica
flow: each of the 3 pods created by the controller-manager, scheduled, started.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from api.registry import REGISTRY
from kubelite.testing.waiting import Watcher
from tests.e2e.cluster import RCS, Cluster, running, started_cluster
from tests.factories import nginx_rc

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
WITHIN = 90.0

SERVICE_ACCOUNTS = REGISTRY.require("", "ServiceAccount")
SEED_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: pod-example}
spec:
  nodeSelector: {zz: cxk}
  containers:
  - name: web
    image: nginx
    ports: [{containerPort: 80}]
    readinessProbe: {httpGet: {path: /, port: 80}, periodSeconds: 1}
"""

SEED_STEPS = [
    ("created", "apiserver"),
    ("scheduled", "scheduler"),
    ("seen by kubelet", "kubelet"),
    ("volumes ready", "kubelet"),
    ("sandbox ready", "kubelet"),
    ("image pulled", "kubelet"),
    ("container created", "kubelet"),
    ("container started", "kubelet"),
    ("probes passed", "kubelet"),
]


async def run(*argv: str, stdin: str = "") -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), WITHIN)
    assert proc.returncode == 0, (argv, out.decode(), err.decode())
    return out.decode()


def trace(c: Cluster, *args: str) -> list[str]:
    return [sys.executable, "-m", "kubelite", "trace", *args, "--server", c.server]


def kubectl(c: Cluster, *args: str) -> list[str]:
    return ["kubectl", "--server", c.server, *args]


def steps_of(json_lines: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in json_lines.splitlines() if line.strip()]


def assert_in_time_order(steps: list[dict[str, Any]]) -> None:
    offsets = [s["offsetSeconds"] for s in steps]
    assert offsets[0] == 0.0 and offsets == sorted(offsets), offsets
    assert [s["time"] for s in steps] == sorted(s["time"] for s in steps)


async def test_trace_of_the_seed_pod_its_watch_and_the_replica_flow(tmp_path: Path) -> None:
    async with started_cluster(tmp_path) as c:
        await run(*kubectl(c, "label", "nodes", "node1", "zz=cxk"))
        # the pod's one volume is its ServiceAccount token, mounted only when the namespace's
        # `default` ServiceAccount (the controller-manager's to create) exists at the create
        async with Watcher(c.client, SERVICE_ACCOUNTS, namespace="default") as accounts:
            await accounts.wait_until(
                lambda objs: any(o["metadata"]["name"] == "default" for o in objs),
                what="the default ServiceAccount",
            )
        await run(*kubectl(c, "apply", "-f", "-"), stdin=SEED_POD)
        await c.until(
            lambda: running(c.pod("pod-example")) and ready(c.pod("pod-example")),
            within=WITHIN,
            what="pod-example Running and Ready",
        )

        steps = steps_of(await run(*trace(c, "pod", "pod-example", "-o", "json")))
        # a readiness probe may fail before nginx listens: between started and passed
        names = [s["step"] for s in steps]
        failed = [i for i, name in enumerate(names) if name == "probe failed"]
        assert all(
            names.index("container started") < i < names.index("probes passed") for i in failed
        ), names
        assert [(s["step"], s["component"]) for s in steps if s["step"] != "probe failed"] == (
            SEED_STEPS
        )
        assert_in_time_order(steps)
        by_step = {s["step"]: s for s in steps}
        assert "to node1" in by_step["scheduled"]["detail"]
        assert by_step["created"]["detail"] == "by kubectl-client-side-apply"
        pod_ip = c.pod("pod-example")["status"]["podIP"]
        assert by_step["sandbox ready"]["detail"] == f"pod IP {pod_ip}"

        table = (await run(*trace(c, "pod", "pod-example"))).splitlines()
        assert table[0].split() == ["OFFSET", "COMPONENT", "STEP", "DETAIL"]
        assert [line.split()[0] for line in table[1:]] == [
            f"+{s['offsetSeconds']:.3f}s" for s in steps
        ]

        # --watch before the pod exists: it prints as the steps happen, then returns
        watching = asyncio.create_task(
            run(*trace(c, "pod", "late", "--watch", "-o", "json")), name="trace --watch"
        )
        late = SEED_POD.replace("pod-example", "late")
        await run(*kubectl(c, "apply", "-f", "-"), stdin=late)
        watched = steps_of(await watching)
        printed = [s["step"] for s in watched]
        assert set(printed) >= {step for step, _ in SEED_STEPS} | {"running observed"}
        assert printed.index("container started") < printed.index("running observed")

        # the seed's replica flow: the RC's pods created, scheduled and started
        await c.client.create(RCS, nginx_rc("web", replicas=3), namespace="default")
        await c.until(
            lambda: (
                len(c.live_pods(label="app=web")) == 3
                and all(running(p) for p in c.live_pods(label="app=web"))
            ),
            within=WITHIN,
            what="3 web pods Running",
        )
        flow = steps_of(await run(*trace(c, "rc", "web", "-o", "json")))
        assert_in_time_order(flow)
        assert flow[0]["step"] == "created"
        for name in (p["metadata"]["name"] for p in c.live_pods(label="app=web")):
            mine = [s["step"] for s in flow if s["detail"].startswith(f"{name}:")]
            assert mine[:3] == ["pod created", "pod scheduled", "pod started"], (name, flow)


def ready(pod: dict[str, Any] | None) -> bool:
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
