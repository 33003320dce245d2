"""HTTP requests/s through a Service's ClusterIP beside requests/s straight to the pod, same run.

Why: ``kubelite proxy`` relays every byte of Service traffic in user space (kube-proxy leaves
that to the kernel), so what it costs is the ratio of the two figures measured side by side,
against the same pod, on the same machine, minutes apart at most.

The scenario starts a real cluster (apiserver, controller-manager, one process-runtime kubelet,
``kubelite proxy``), one ``nginx`` pod (kubelite's built-in web server) and a ClusterIP Service
in front of it, then runs a small raw-socket HTTP/1.1 load generator for ``duration`` seconds
against each address in turn, ``concurrency`` clients at once, in two modes:

* ``keep-alive``: each client sends its requests over one connection (the relay's per-byte
  cost);
* ``new connection``: each request on a connection of its own (adds the proxy's accept, endpoint
  choice and upstream connect per request).

The load generator, the proxy and the pod share the machine's cores, so absolute figures say
little; the ratio ``via ClusterIP / direct`` is the figure.

The keep-alive figures are bounded by the built-in web server itself: it writes a response's
headers and body as two segments, so each response waits for the client's delayed ACK (about
40 ms) — both addresses alike, so the ratio still holds, but the new-connection mode is the one
that shows the proxy's cost.

``python -m bench.service_throughput [--quick]`` prints the table; ``python -m bench --only
service-throughput`` puts the figures in the suite's table.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from bench.cluster import ROOT, resource, running_cluster
from bench.harness import Context, Figure, figure, run_alone
from client.rest import ApiClient
from kubelite import commands
from kubelite.testing import ComponentProcess

__all__ = ["SCENARIO", "main", "run"]

SCENARIO = "service-throughput"
PODS = resource("", "Pod")
SERVICES = resource("", "Service")
REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: kubelite-bench\r\n\r\n"
MODES = ("keep-alive", "new connection")


async def _response(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)


async def _client(ip: str, port: int, *, keep_alive: bool, until: float) -> int:
    done = 0
    reader, writer = await asyncio.open_connection(ip, port)
    try:
        while time.monotonic() < until:
            if not keep_alive and done:
                writer.close()
                reader, writer = await asyncio.open_connection(ip, port)
            writer.write(REQUEST)
            await _response(reader)
            done += 1
    finally:
        writer.close()
    return done


async def requests_per_second(
    ip: str, port: int, *, keep_alive: bool, concurrency: int, duration: float
) -> float:
    start = time.monotonic()
    until = start + duration
    counts = await asyncio.gather(
        *(_client(ip, port, keep_alive=keep_alive, until=until) for _ in range(concurrency))
    )
    return sum(counts) / (time.monotonic() - start)


def _nginx_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "containers": [{"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}]}],
            "terminationGracePeriodSeconds": 1,
        },
    }


def _service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 80}]},
    }


async def _answers(ip: str, port: int, *, within: float) -> None:
    """Until one request to ``ip:port`` is answered (the pod binding, the proxy syncing)."""
    deadline = time.monotonic() + within
    while True:
        try:
            await requests_per_second(ip, port, keep_alive=True, concurrency=1, duration=0)
            return
        except (OSError, asyncio.IncompleteReadError):
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing answers on {ip}:{port} after {within:.0f}s") from None
            await asyncio.sleep(0.2)


async def measure(workdir: Path, *, concurrency: int, duration: float) -> dict[str, float]:
    """One round: requests/s for each (mode, address); keys ``"<mode> direct|via ClusterIP"``."""
    async with running_cluster(workdir=workdir, nodes=1, runtime="process", scheduler=True) as c:
        proxy = commands.proxy(
            server=c.url, hostname_override="node-0", healthz_port=0, log_level="WARNING"
        )
        await c.add(ComponentProcess(
            proxy.python(), name="proxy", component="proxy", endpoint="health",
            log_path=workdir / "proxy.log", cwd=ROOT,
        ))  # fmt: skip
        async with ApiClient(server=c.url) as client:
            await client.create(PODS, _nginx_pod(), namespace="default")
            service = await client.create(SERVICES, _service(), namespace="default")
            pod_ip = ""
            deadline = time.monotonic() + 60
            while not pod_ip:
                c.check_alive()
                if time.monotonic() > deadline:
                    raise TimeoutError("the web pod has no IP after 60s")
                pod = await client.get(PODS, "web", namespace="default")
                pod_ip = (pod.get("status") or {}).get("podIP") or ""
                await asyncio.sleep(0.2)
        cluster_ip = service["spec"]["clusterIP"]
        await _answers(pod_ip, 80, within=30)
        await _answers(cluster_ip, 80, within=30)
        out: dict[str, float] = {}
        for mode in MODES:
            for where, ip in (("direct", pod_ip), ("via ClusterIP", cluster_ip)):
                out[f"{mode} {where}"] = await requests_per_second(
                    ip, 80, keep_alive=mode == "keep-alive", concurrency=concurrency,
                    duration=duration,
                )  # fmt: skip
        return out


async def run(ctx: Context) -> list[Figure]:
    concurrency, duration = (4, 3.0) if ctx.quick else (8, 10.0)
    samples: dict[str, list[float]] = {}
    for index in range(ctx.rounds):
        got = await measure(ctx.workdir / f"round-{index}", concurrency=concurrency,
                            duration=duration)  # fmt: skip
        for key, value in got.items():
            samples.setdefault(key, []).append(value)
    note = f"{concurrency} clients, {duration:g}s each, one nginx pod"
    figures = []
    for mode in MODES:
        direct = f"{mode} direct"
        figures.append(figure(SCENARIO, direct, unit="req/s", samples=samples[direct], note=note))
        figures.append(figure(
            SCENARIO, f"{mode} via ClusterIP", unit="req/s",
            samples=samples[f"{mode} via ClusterIP"], ceiling=f"{SCENARIO}/{direct}", note=note,
        ))  # fmt: skip
    return figures


def main(argv: list[str] | None = None) -> int:
    figures = run_alone(
        run,
        argv,
        prog="python -m bench.service_throughput",
        description=__doc__.split("\n")[0],
        quick_help="4 clients, 3 s, 1 round",
    )
    by_name = {f.name: f for f in figures}
    print(f"{'HTTP through a Service':<30} {'median':>10} {'min':>10} {'max':>10} {'ratio':>7}")
    for fig in figures:
        direct = by_name[fig.name.replace("via ClusterIP", "direct")]
        print(
            f"{fig.name:<30} {fig.median:>10.0f} {fig.min:>10.0f} {fig.max:>10.0f} "
            f"{fig.median / direct.median:>7.2f}"
        )
    print(figures[0].note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
