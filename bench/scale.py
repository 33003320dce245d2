"""Scale: hold M sim nodes and P pods; memory per object, list time, and fresh leases throughout.

Why: throughput figures say little about whether the control plane *holds* a cluster of a size
Kubernetes' own scalability tests start from. These scenarios build one — M sim nodes (their
kubelets renewing a Lease every 10 s and reporting status) and P pods, all Running — in steps,
and measure each step:

1. the control plane alone (apiserver, scheduler, controller-manager), and a 1-node sim kubelet
   (started, measured, stopped, its Node deleted): the baselines;
2. the M-node sim kubelet, held ``hold`` seconds;
3. the P pods — from RCs of 1,000 replicas through the controller-manager and the scheduler
   (``build="rc"``), or seeded as bound pods straight through the API (``build="seed"``:
   ``spec.nodeName`` set, 64 creates in flight; no controller and no scheduling work, the way to
   reach 150,000 pods in minutes rather than the better part of an hour) — then held again.

Figures:

* ``RSS <process>``: resident memory at the end (``/proc/<pid>/status``);
* ``RSS <process> per 1,000 nodes`` / ``per 1,000 pods``: the difference between two holds over
  the objects added between them, so a per-object cost, not a baseline. The kubelet's per-node
  cost is over the 1-node kubelet of step 1 (its process did not exist before step 2);
* ``leases fresh``: the share of lease samples — every node's Lease, every ``SAMPLE_PERIOD``
  seconds from nodes Ready to the end, read from a watch — renewed within the lease duration
  (40 s); ``oldest lease`` the oldest renewal any sample saw; ``lease watch lag`` the worst
  sample's *newest* renewal — with renewals spread over 10 s, a newest one many seconds old means
  the watch (the apiserver's fan-out, or this process) delivered late, not that kubelets renewed
  late, and ``oldest lease`` includes that lag; ``nodes ever NotReady`` the nodes
  whose Ready condition left ``True`` at any moment (from the same watch);
* ``full pod list``: seconds for one ``GET /api/v1/pods`` of all P pods, read to the last byte
  (median of several); ``full pod list rv=0`` the same served from the watch cache; ``pods
  listed`` how many it held (fewer than P if nodes went NotReady and their pods were evicted).

``burst_scenario`` is the 10,000-pod burst: an RC of P pods on M nodes, the leases and Ready
conditions sampled the same way during it — Kubernetes' priority and fairness keeps leases out
of the user's queues, and this says whether they stayed fresh.

``time_list`` is shared with the API scenario's "list of 10k pods".

Limits: one sim kubelet process hosts all nodes; RSS is what the kernel reports, so a process
that freed memory to its allocator but not to the kernel still counts it (per-object figures
are upper bounds); the seeded build stops early, with a ``pods held`` figure below P, if the
machine's available memory falls below ``MEMORY_FLOOR``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import aiohttp

from api.errors import NotFound
from bench.cluster import (
    ROOT,
    Cluster,
    kubelet_argv,
    resource,
    running_cluster,
)
from bench.e2e import measure_rc
from bench.harness import ANCHORS, Context, Figure, ScenarioRun, collect_rounds, figure
from client.informer import Informer
from client.rest import ApiClient
from kubelite.testing.process import ComponentProcess

__all__ = [
    "NodeWatch",
    "available_memory",
    "burst_scenario",
    "create_seeds",
    "lease_age",
    "per_thousand",
    "scale_scenario",
    "time_list",
]

LEASES = resource("coordination.k8s.io", "Lease")
NODES = resource("", "Node")
PODS = resource("", "Pod")
LEASE_DURATION = 40.0
"""The kubelet's node lease duration (s): older renewals mean a node going Unknown."""
SAMPLE_PERIOD = 2.0
"""Seconds between lease samples: five per renewal interval (10 s), so a late renewal shows."""
MEMORY_FLOOR = 4 * 2**30
"""Available memory (bytes) below which a seeded build stops: the machine is shared."""
SEED_IN_FLIGHT = 64
SEED_LABELS = {"app": "scale-seed"}
PROBE_INDEX = 99
"""The 1-node baseline kubelet's index: its node is ``sim99``, no clash with ``sim0-*``."""
CONTROL_PLANE = ("apiserver", "scheduler", "controller-manager")

Build = Literal["rc", "seed"]


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


def available_memory() -> int:
    """``MemAvailable`` of ``/proc/meminfo``, in bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def per_thousand(
    after: Mapping[str, int], before: Mapping[str, int], *, count: int
) -> dict[str, float]:
    """MiB per 1,000 objects of each process in both: (after - before) / count."""
    return {
        name: (after[name] - before[name]) / 2**20 / count * 1000
        for name in after
        if name in before and count > 0
    }


def lease_age(lease: Mapping[str, Any], *, now: datetime) -> float | None:
    """Seconds since ``spec.renewTime`` (None: never renewed)."""
    renewed = (lease.get("spec") or {}).get("renewTime")
    if not renewed:
        return None
    return (now - datetime.fromisoformat(renewed.replace("Z", "+00:00"))).total_seconds()


def _lease_only(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "resourceVersion")},
        "spec": {"renewTime": (obj.get("spec") or {}).get("renewTime")},
    }


def _ready_status(obj: Mapping[str, Any]) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return None


def _ready_only(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "resourceVersion")},
        "status": {"conditions": [{"type": "Ready", "status": _ready_status(obj)}]},
    }


@dataclass(slots=True)
class NodeWatch:
    """Node Leases and Ready conditions, watched, with the leases sampled every
    ``SAMPLE_PERIOD`` seconds once every node has one (a sim kubelet creates its nodes' Leases
    over their first renewal interval, after they are Ready); the informers keep only the
    fields sampled (their ``transform``)."""

    client: ApiClient
    nodes: int
    samples: int = 0
    fresh: int = 0
    oldest: float = 0.0
    lag: float = 0.0
    not_ready: set[str] = field(default_factory=set)
    leases: Informer = field(init=False)
    node_informer: Informer = field(init=False)
    every_lease: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.leases = Informer(self.client, LEASES, namespace="kube-node-lease",
                               name="bench leases", transform=_lease_only)  # fmt: skip
        self.leases.add_handler(on_add=self._saw_lease)
        self.node_informer = Informer(self.client, NODES, name="bench node Ready",
                                      transform=_ready_only)  # fmt: skip
        self.node_informer.add_handler(on_change=self._saw_node)

    def _saw_lease(self, _lease: Mapping[str, Any]) -> None:
        if len(self.leases.keys()) >= self.nodes:
            self.every_lease.set()

    def _saw_node(self, obj: Mapping[str, Any]) -> None:
        status = _ready_status(obj)
        if status is not None and status != "True":
            self.not_ready.add(str(obj["metadata"]["name"]))

    def sample(self) -> None:
        """One sample of every node's Lease; a node without one counts as not fresh."""
        now = datetime.now(UTC)
        ages = [lease_age(lease, now=now) for lease in self.leases.list()]
        self.samples += self.nodes
        self.fresh += sum(1 for age in ages if age is not None and age <= LEASE_DURATION)
        known = [age for age in ages if age is not None]
        if known:
            self.oldest = max(self.oldest, *known)
            self.lag = max(self.lag, min(known))

    async def _sample_forever(self) -> None:
        await self.every_lease.wait()
        while True:
            self.sample()
            await asyncio.sleep(SAMPLE_PERIOD)  # a sampling period, not a wait for something

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[NodeWatch]:
        tasks = [self.leases.start(), self.node_informer.start(),
                 asyncio.create_task(self._sample_forever(), name="bench lease samples")]  # fmt: skip
        try:
            yield self
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.every_lease.is_set():
                self.sample()

    def figures(self) -> dict[str, float]:
        return {
            "leases fresh": self.fresh / self.samples if self.samples else 0.0,
            "lease samples": float(self.samples),
            "oldest lease": self.oldest,
            "lease watch lag": self.lag,
            "nodes ever NotReady": float(len(self.not_ready)),
        }


async def _hold(cluster: Cluster, seconds: float) -> None:
    """Let the cluster run ``seconds`` (a hold is wall time by definition), failing early if a
    component dies."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        cluster.check_alive()
        await asyncio.sleep(min(5.0, left))


async def _probe_kubelet(cluster: Cluster, *, max_pods: int) -> int:
    """RSS of a 1-node sim kubelet once its node is Ready; it is stopped, its Node and Lease
    deleted (a stale Lease would count in the samples)."""
    argv = kubelet_argv(server=cluster.url, runtime="sim", index=PROBE_INDEX, nodes=1,
                        workdir=cluster.workdir, max_pods=max_pods,
                        extra=("--log-level=WARNING",))  # fmt: skip
    probe = await cluster.add(ComponentProcess(
        argv, name="kubelet-probe", component="kubelet", endpoint="server",
        log_path=cluster.workdir / "kubelet-probe.log", cwd=ROOT,
    ))  # fmt: skip
    await cluster.wait_nodes_ready(1, within=60)
    rss = probe.rss_bytes()
    await probe.astop()
    cluster.components.remove(probe)
    async with ApiClient(server=cluster.url) as client:
        await client.delete(NODES, f"sim{PROBE_INDEX}")
        with contextlib.suppress(NotFound):  # the garbage collector may have been first
            await client.delete(LEASES, f"sim{PROBE_INDEX}", namespace="kube-node-lease")
    return rss


async def _add_sim_nodes(cluster: Cluster, *, nodes: int, max_pods: int) -> None:
    argv = kubelet_argv(server=cluster.url, runtime="sim", index=0, nodes=nodes,
                        workdir=cluster.workdir, max_pods=max_pods,
                        extra=("--log-level=WARNING",))  # fmt: skip
    await cluster.add(ComponentProcess(
        argv, name="kubelet-0", component="kubelet", endpoint="server",
        log_path=cluster.workdir / "kubelet-0.log", cwd=ROOT,
    ))  # fmt: skip
    await cluster.wait_nodes_ready(nodes, within=60 + nodes / 10)


def _seed_body(index: int, *, nodes: int) -> bytes:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"seed-{index:06d}", "namespace": "default",
                     "labels": SEED_LABELS},
        "spec": {"nodeName": f"sim0-{index % nodes}" if nodes > 1 else "sim0",
                 "containers": [{"name": "web", "image": "nginx:1.27",
                                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
    }).encode()  # fmt: skip


def _phase_only(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "resourceVersion")},
        "status": {"phase": (obj.get("status") or {}).get("phase")},
    }


SEED_ATTEMPTS = 5
"""Tries per seeded pod: a loaded apiserver may reset a kept-alive connection under a request."""


async def _create_seed(session: aiohttp.ClientSession, body: bytes) -> None:
    """POST one seeded pod; a connection reset is retried, and then ``409 AlreadyExists`` means
    the earlier attempt did create it (the name is fixed)."""
    for attempt in range(1, SEED_ATTEMPTS + 1):
        try:
            async with session.post("/api/v1/namespaces/default/pods", data=body,
                                    headers={"Content-Type": "application/json"}) as resp:  # fmt: skip
                if resp.status == 201 or (resp.status == 409 and attempt > 1):
                    return
                raise RuntimeError(f"seed create answered {resp.status}: {await resp.text()}")
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
            if attempt == SEED_ATTEMPTS:
                raise


async def create_seeds(
    url: str, *, pods: int, nodes: int, enough_memory: Callable[[], bool]
) -> int:
    """Create up to ``pods`` bound pods, ``SEED_IN_FLIGHT`` at a time; how many were created
    (fewer if ``enough_memory()`` turned false)."""
    names = iter(range(pods))
    created = 0
    low = False  # set once memory ran low: every worker stops taking names
    connector = aiohttp.TCPConnector(limit=SEED_IN_FLIGHT)
    async with aiohttp.ClientSession(url, connector=connector) as session:

        async def worker() -> None:
            nonlocal created, low
            for i in names:
                low = low or (i % 1000 == 0 and not enough_memory())
                if low:
                    return
                await _create_seed(session, _seed_body(i, nodes=nodes))
                created += 1

        await asyncio.gather(*(worker() for _ in range(SEED_IN_FLIGHT)))
    return created


@dataclass(slots=True)
class _RunningCount:
    """Names of the pods seen Running, and an event set once ``expected`` of them are."""

    expected: int
    names: set[str] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def saw(self, obj: Mapping[str, Any]) -> None:
        if (obj.get("status") or {}).get("phase") == "Running":
            self.names.add(obj["metadata"]["name"])
        if len(self.names) >= self.expected:
            self.done.set()


async def seed_pods(cluster: Cluster, *, pods: int, nodes: int) -> dict[str, float]:
    """Bound pods created straight through the API until all are Running (or memory ran low)."""
    count = _RunningCount(expected=pods)
    async with ApiClient(server=cluster.url) as client:
        informer = Informer(client, PODS, namespace="default", label_selector="app=scale-seed",
                            name="bench seeded pods", transform=_phase_only)  # fmt: skip
        informer.add_handler(on_add=count.saw, on_update=lambda _old, new: count.saw(new))
        task = informer.start()
        try:
            await informer.wait_synced()
            start = time.perf_counter()
            created = await create_seeds(cluster.url, pods=pods, nodes=nodes,
                                          enough_memory=lambda: available_memory() > MEMORY_FLOOR)  # fmt: skip
            sent = time.perf_counter() - start
            count.expected = created
            count.saw({})
            await cluster.wait_for(count.done, within=300 + created / 20,
                                   what=f"{created} Running seeded pods ({len(count.names)})")  # fmt: skip
            took = time.perf_counter() - start
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return {"pods held": float(created), "all Running": took, "pods/s": created / took,
            "creates/s": created / sent}  # fmt: skip


def _unit(name: str) -> str:
    if name.startswith("build: cpu"):
        return "% of a core"
    if name.endswith("pods/s") or name.endswith("creates/s"):
        return "pods/s"
    if name.startswith("RSS"):
        return "MiB"
    if name in ("leases fresh", "nodes Ready"):
        return "share"
    if name in ("lease samples", "nodes ever NotReady", "build: pods held", "pods listed"):
        return "count"
    return "s"


async def _list_figures(cluster: Cluster) -> dict[str, float]:
    """The list timings and how many pods the list held: fewer than were built when nodes
    went NotReady long enough for the node-lifecycle controller to evict their pods."""
    listed, items = await time_list(cluster.url)
    cached, _ = await time_list(cluster.url, params={"resourceVersion": "0"})
    return {"full pod list": sorted(listed)[len(listed) // 2],
            "full pod list rv=0": sorted(cached)[len(cached) // 2],
            "pods listed": float(items)}  # fmt: skip


def _rss(cluster: Cluster) -> dict[str, int]:
    cluster.check_alive()
    return cluster.rss()


async def measure_scale(
    cluster: Cluster, ctx: Context, *, nodes: int, pods: int, hold: float, build: Build,
) -> dict[str, float]:  # fmt: skip
    """Steps 1-3 of the module docstring on a control plane without nodes; the figures."""
    max_pods = max(110, 2 * pods // nodes)
    base = _rss(cluster)
    base["kubelet-0"] = await _probe_kubelet(cluster, max_pods=max_pods)
    await _add_sim_nodes(cluster, nodes=nodes, max_pods=max_pods)
    values: dict[str, float] = {}
    async with ApiClient(server=cluster.url) as client:
        async with NodeWatch(client, nodes).running() as watch:
            await _hold(cluster, hold)
            with_nodes = _rss(cluster)
            if build == "rc":
                built = await measure_rc(cluster, pods=pods, controllers=max(1, pods // 1000))
            else:
                built = await seed_pods(cluster, pods=pods, nodes=nodes)
            held = int(built.get("pods held", pods))
            await _hold(cluster, hold)
            with_pods = _rss(cluster)
        values |= {f"build: {k}": v for k, v in built.items() if not k.startswith("startup")}
        values |= watch.figures()
        values["nodes Ready"] = 1.0 - len(watch.not_ready) / nodes
    for name, rss in with_pods.items():
        values[f"RSS {name}"] = rss / 2**20
    node_base = {k: v for k, v in base.items() if k != "kubelet-0"}
    for name, mib in per_thousand(with_nodes, node_base, count=nodes).items():
        values[f"RSS {name} per 1,000 nodes"] = mib
    if nodes > 1:  # over the 1-node kubelet: the per-node part of M nodes
        kubelet = (with_nodes["kubelet-0"] - base["kubelet-0"]) / 2**20 / (nodes - 1) * 1000
        values["RSS kubelet-0 per 1,000 nodes"] = kubelet
    for name, mib in per_thousand(with_pods, with_nodes, count=held).items():
        values[f"RSS {name} per 1,000 pods"] = mib
    return values | await _list_figures(cluster)


def _figures(name: str, samples: Mapping[str, list[float]], *, note: str) -> list[Figure]:
    return [
        figure(name, key, unit=_unit(key), samples=values,
               anchor=ANCHORS["list-cluster-slo"] if key.startswith("full pod list") else None,
               note=note if key == "leases fresh" else "")
        for key, values in samples.items()
    ]  # fmt: skip


def scale_scenario(*, nodes: int, pods: int, build: Build = "rc") -> ScenarioRun:
    async def run(ctx: Context) -> list[Figure]:
        hold = 10.0 if ctx.quick else 60.0

        async def once(index: int) -> dict[str, float]:
            workdir = ctx.workdir / f"scale-{nodes}x{pods}-{index}"
            async with running_cluster(workdir=workdir, nodes=0, store=ctx.store,
                                       profile=ctx.profile) as cluster:  # fmt: skip
                return await measure_scale(cluster, ctx, nodes=nodes, pods=pods, hold=hold,
                                           build=build)  # fmt: skip

        samples = await collect_rounds(once, rounds=1 if pods > 1000 else ctx.rounds)
        how = ("RCs of 1,000 through the controller-manager and scheduler" if build == "rc"
               else f"bound pods seeded through the API, {SEED_IN_FLIGHT} in flight")  # fmt: skip
        note = (f"{ctx.store} store; pods from {how}; held {hold:.0f}s with nodes only, then "
                f"{hold:.0f}s with all pods Running; leases fresh = share of lease samples "
                f"(every node, every {SAMPLE_PERIOD:.0f} s, from nodes Ready to the end) renewed "
                f"within {LEASE_DURATION:.0f} s; per 1,000 = RSS difference between the holds")  # fmt: skip
        return _figures(f"scale {nodes} nodes {pods} pods", samples, note=note)

    return run


def burst_scenario(*, nodes: int, pods: int, quick_nodes: int, quick_pods: int) -> ScenarioRun:
    """An RC of ``pods`` on ``nodes`` sim nodes (quick: the smaller sizes), node Leases and
    Ready conditions watched and sampled throughout."""

    async def run(ctx: Context) -> list[Figure]:
        m, p = (quick_nodes, quick_pods) if ctx.quick else (nodes, pods)

        async def once(index: int) -> dict[str, float]:
            workdir = ctx.workdir / f"burst-{p}x{m}-{index}"
            async with running_cluster(workdir=workdir, nodes=m, store=ctx.store,
                                       max_pods=max(110, 2 * p // m),
                                       profile=ctx.profile) as cluster:  # fmt: skip
                async with ApiClient(server=cluster.url) as client:
                    async with NodeWatch(client, m).running() as watch:
                        built = await measure_rc(cluster, pods=p, controllers=1)
                return {k: v for k, v in built.items() if k in ("pods/s", "all Running")} | (
                    watch.figures()
                )

        samples = await collect_rounds(once, rounds=1)
        note = (f"one RC of {p:,} pods on {m} sim nodes, {ctx.store} store; every node's Lease "
                f"sampled every {SAMPLE_PERIOD:.0f} s from the RC's create to all Running, fresh = "
                f"renewed within {LEASE_DURATION:.0f} s; NotReady = Ready left True on the watch")  # fmt: skip
        return _figures(f"burst {p} pods on {m} nodes", samples, note=note)

    return run
