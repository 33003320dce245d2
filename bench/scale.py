"""Scale: hold 1,000 sim nodes with fresh leases and 30,000 pods; memory and list time.

Why: throughput figures say little about whether the control plane *holds* a cluster of a size
Kubernetes' own scalability tests start from. This scenario builds one — M sim nodes (their
kubelets renewing a Lease every 10 s and reporting status), and P pods from RCs of 1,000
replicas, all Running — then holds it for a while and measures:

* ``leases fresh``: the share of the M node Leases renewed within the lease duration (40 s),
  read from ``kube-node-lease`` at the end of the hold — 1.0 means the apiserver kept up with
  every heartbeat while carrying the pods;
* ``nodes Ready``: the share of nodes still Ready (the node-lifecycle controller would have
  turned them Unknown had their leases gone stale);
* ``RSS <process>``: resident memory of each process (apiserver, scheduler, controller-manager,
  sim kubelet) from ``/proc/<pid>/status``;
* ``full pod list``: seconds for one ``GET /api/v1/pods`` of all P pods, read to the last byte
  (median of several); ``full pod list rv=0`` the same served from the watch cache.

``time_list`` is shared with the API scenario's "list of 10k pods".

Limits: one sim kubelet process hosts all nodes, so its RSS is the sum of M node agents; the
"fresh" check reads the Leases once, at the end of the hold, not continuously.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import UTC, datetime

import aiohttp

from bench.cluster import Cluster, resource, running_cluster
from bench.e2e import measure_rc
from bench.harness import ANCHORS, Context, Figure, ScenarioRun, collect_rounds, figure
from client.rest import ApiClient

__all__ = ["lease_freshness", "scale_scenario", "time_list"]

LEASES = resource("coordination.k8s.io", "Lease")
NODES = resource("", "Node")
LEASE_DURATION = 40.0
"""The kubelet's node lease duration (s): older renewals mean a node going Unknown."""


async def time_list(
    url: str, *, path: str = "/api/v1/pods", params: Mapping[str, str] | None = None,
    repeats: int = 3,
) -> tuple[list[float], int]:  # fmt: skip
    """Seconds for each of ``repeats`` full GETs of ``path`` (body read); and its item count."""
    seconds: list[float] = []
    items = 0
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(url, timeout=timeout) as session:
        for _ in range(repeats):
            start = time.perf_counter()
            async with session.get(path, params=dict(params or {})) as resp:
                body = await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"GET {path} answered {resp.status}: {body[:300]!r}")
            seconds.append(time.perf_counter() - start)
        items = body.count(b'"kind":"Pod"') or body.count(b'"kind": "Pod"')
    return seconds, items


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def lease_freshness(client: ApiClient, *, nodes: int) -> float:
    """Share of ``nodes`` node Leases renewed within ``LEASE_DURATION`` seconds."""
    body = await client.list(LEASES, namespace="kube-node-lease")
    now = datetime.now(UTC)
    fresh = 0
    for lease in body["items"]:
        renewed = (lease.get("spec") or {}).get("renewTime")
        if renewed and (now - _parse_time(renewed)).total_seconds() <= LEASE_DURATION:
            fresh += 1
    return fresh / nodes


async def ready_share(client: ApiClient, *, nodes: int) -> float:
    body = await client.list(NODES)
    ready = 0
    for node in body["items"]:
        for c in (node.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready" and c.get("status") == "True":
                ready += 1
    return ready / nodes


async def hold_and_measure(
    cluster: Cluster, *, nodes: int, pods: int, hold: float
) -> dict[str, float]:
    values: dict[str, float] = {}
    # a hold is a stretch of wall time by definition: the cluster runs, nothing is awaited
    end = time.monotonic() + hold
    while time.monotonic() < end:
        cluster.check_alive()
        await asyncio.sleep(min(5.0, max(0.0, end - time.monotonic())))
    async with ApiClient(server=cluster.url) as client:
        values["leases fresh"] = await lease_freshness(client, nodes=nodes)
        values["nodes Ready"] = await ready_share(client, nodes=nodes)
    for name, rss in cluster.rss().items():
        values[f"RSS {name}"] = rss / 2**20
    listed, items = await time_list(cluster.url)
    if items != pods:
        raise RuntimeError(f"full pod list returned {items} pods, expected {pods}")
    values["full pod list"] = sorted(listed)[len(listed) // 2]
    cached, _ = await time_list(cluster.url, params={"resourceVersion": "0"})
    values["full pod list rv=0"] = sorted(cached)[len(cached) // 2]
    return values


def _unit(name: str) -> str:
    if name.startswith("build: cpu"):
        return "% of a core"
    if name == "build: pods/s":
        return "pods/s"
    if name.startswith("RSS"):
        return "MiB"
    if name in ("leases fresh", "nodes Ready"):
        return "share"
    return "s"


def scale_scenario(*, nodes: int, pods: int) -> ScenarioRun:
    async def run(ctx: Context) -> list[Figure]:
        hold = 10.0 if ctx.quick else 60.0

        async def once(index: int) -> dict[str, float]:
            workdir = ctx.workdir / f"scale-{nodes}x{pods}-{index}"
            async with running_cluster(workdir=workdir, nodes=nodes, store=ctx.store,
                                       max_pods=max(110, 2 * pods // nodes),
                                       profile=ctx.profile) as cluster:  # fmt: skip
                built = await measure_rc(cluster, pods=pods, controllers=max(1, pods // 1000))
                values = {f"build: {k}": v for k, v in built.items() if not k.startswith("startup")}
                values |= await hold_and_measure(cluster, nodes=nodes, pods=pods, hold=hold)
                return values

        samples = await collect_rounds(once, rounds=1 if pods > 1000 else ctx.rounds)
        name = f"scale {nodes} nodes {pods} pods"
        note = (f"{ctx.store} store; held {hold:.0f}s after all pods Running; "
                "leases fresh = renewed within 40 s at the end of the hold")  # fmt: skip
        return [
            figure(name, key, unit=_unit(key), samples=values,
                   anchor=ANCHORS["list-cluster-slo"] if key.startswith("full pod list") else None,
                   note=note if key == "leases fresh" else "")
            for key, values in samples.items()
        ]  # fmt: skip

    return run
