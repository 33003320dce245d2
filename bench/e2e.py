"""End to end: replication controllers of N pods on M sim nodes, from creation to Running.

Why: the figure a person feels is how long ``kubectl apply -f rc.yaml`` takes to turn into N
Running pods — the seed's whole 13-step flow (controller-manager creates pods, scheduler binds
them, kubelets start them and report status), every step a real process over HTTP. Anchors:
kwok creates pods at 20 pods/s by default; Kubernetes' pod startup SLO is p99 <= 5 s at a
churn of 20 pods/s.

Measurements (each on a fresh ``bench.cluster``, sim kubelets hosting M nodes):

* ``rc NxM``: ``controllers`` RCs (10 by default, 1 for N <= 1,000) with N replicas in all are
  created at once; a pod informer in this process records when each pod is first seen and when
  it is first seen ``Running``. Figures: seconds until all N are Running (from the first RC
  create), pods/s (N over that), and pod startup latency p50/p99 (first seen -> Running; the
  apiserver stamps ``creationTimestamp`` to the second only, so the watch's first sight stands
  in for it — it trails the real creation by the watch latency);
  Also where the time went: the CPU each process used meanwhile (% of one core, and CPU
  milliseconds per pod — the figure a shared machine's load moves least: pods/s and % of a
  core follow the load, the work done per pod much less), the median time from first sight to
  bound and from bound to Running, and when the last pod was first seen (how long the
  controller-manager took to create them all);
* ``startup at churn``: bare pods created open-loop at 20/s for a while; startup latency from
  the create request (a finer stand-in for ``creationTimestamp``, which has whole seconds) to
  Running seen on the watch: the SLO's own setting and definition. Two rows, each labelled with
  its runtime: ``sim`` (``--sim-start-delay 0``: Running as soon as the kubelet sees the pod,
  so the figure is the control plane's alone) and ``process`` (one ``--runtime process``
  kubelet; every pod is a ``busybox`` container running ``sleep 3600``, a real OS process
  started through the kubelet's shim, its IP from 127.0.0.0/8) — the figure a user of a
  real node feels, minus image pulls (kubelite has none).

Limits: all processes share the machine's cores (2 here), so the figures are what a laptop-size
machine does, not a ceiling. The process row keeps to 200 pods (400 host processes with their
shims) so that it fits the quick run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.cluster import Cluster, Runtime, resource, running_cluster
from bench.harness import (
    ANCHORS,
    Anchor,
    Context,
    Figure,
    ScenarioRun,
    collect_rounds,
    figure,
    percentile,
)
from client.informer import Informer
from client.rest import ApiClient

__all__ = [
    "PodClock",
    "cpu_per_pod",
    "measure_rc",
    "measure_startup_churn",
    "rc_scenario",
    "scheduler_scenario",
    "startup_label",
    "startup_scenario",
]

PODS = resource("", "Pod")
RCS = resource("", "ReplicationController")

NAMESPACE = "default"


def rc_body(name: str, *, replicas: int) -> dict[str, Any]:
    labels = {"app": "e2e", "rc": name}
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": labels,
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "web", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }]},
            },
        },
    }  # fmt: skip


def pod_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "startup"}},
        "spec": {"containers": [{
            "name": "web", "image": "nginx:1.27",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        }]},
    }  # fmt: skip


def sleep_pod_body(name: str) -> dict[str, Any]:
    """A ``busybox`` pod running ``sleep 3600``: on the process runtime, one real OS process."""
    body = pod_body(name)
    body["spec"] = {
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "sleep", "image": "busybox:1.36", "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        }],
    }  # fmt: skip
    return body


class PodClock:
    """A pod informer noting when each pod was first seen and first seen Running."""

    def __init__(self, client: ApiClient, *, expected: int, selector: str = "app=e2e") -> None:
        self.expected = expected
        self.first_seen: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.all_running = asyncio.Event()
        self.informer = Informer(client, PODS, namespace=NAMESPACE, label_selector=selector,
                                 name="bench e2e pods")  # fmt: skip
        self.informer.add_handler(on_add=self._saw, on_update=lambda _old, new: self._saw(new))

    def _saw(self, obj: Mapping[str, Any]) -> None:
        now = time.perf_counter()
        name = obj["metadata"]["name"]
        self.first_seen.setdefault(name, now)
        if name not in self.bound and (obj.get("spec") or {}).get("nodeName"):
            self.bound[name] = now
        if name not in self.running and (obj.get("status") or {}).get("phase") == "Running":
            self.running[name] = now
            if len(self.running) >= self.expected:
                self.all_running.set()

    def start(self) -> asyncio.Task[None]:
        return self.informer.start()


async def measure_rc(cluster: Cluster, *, pods: int, controllers: int) -> dict[str, float]:
    """Create ``controllers`` RCs totalling ``pods`` replicas; time until all are Running."""
    async with ApiClient(server=cluster.url) as client:
        clock = PodClock(client, expected=pods)
        task = clock.start()
        try:
            await clock.informer.wait_synced()
            cpu_before = cluster.cpu()
            start = time.perf_counter()
            share = [pods // controllers + (i < pods % controllers) for i in range(controllers)]
            await asyncio.gather(*(
                client.create(RCS, rc_body(f"e2e-{i}", replicas=n), namespace=NAMESPACE)
                for i, n in enumerate(share)
            ))  # fmt: skip
            await cluster.wait_for(clock.all_running, within=120 + pods / 5,
                                   what=f"{pods} Running pods")  # fmt: skip
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    took = max(clock.running.values()) - start
    cpu = {name: seconds - cpu_before.get(name, 0.0) for name, seconds in cluster.cpu().items()}
    startup = [clock.running[n] - clock.first_seen[n] for n in clock.running]
    to_bound = [clock.bound[n] - clock.first_seen[n] for n in clock.running]
    to_running = [clock.running[n] - clock.bound[n] for n in clock.running]
    return {
        "all Running": took,
        "pods/s": pods / took,
        "startup p50": percentile(startup, 0.5),
        "startup p99": percentile(startup, 0.99),
        "seen -> bound p50": percentile(to_bound, 0.5),
        "bound -> Running p50": percentile(to_running, 0.5),
        "last pod seen": max(clock.first_seen.values()) - start,
    } | {f"cpu {name}": seconds / took * 100 for name, seconds in cpu.items()}


async def measure_startup_churn(
    cluster: Cluster, *, rate: float, seconds: float,
    body: Callable[[str], dict[str, Any]] = pod_body,
) -> dict[str, float]:  # fmt: skip
    """Bare pods (``body(name)``) created open-loop at ``rate``/s for ``seconds``; create ->
    Running latency."""
    count = int(rate * seconds)
    sent: dict[str, float] = {}
    async with ApiClient(server=cluster.url) as client:
        clock = PodClock(client, expected=count, selector="app=startup")
        task = clock.start()
        try:
            await clock.informer.wait_synced()

            async def create(name: str) -> None:
                sent[name] = time.perf_counter()
                await client.create(PODS, body(name), namespace=NAMESPACE)

            creates = []
            began = time.perf_counter()
            for i in range(count):
                # pacing of an open-loop load: each create is sent at its own slot
                await asyncio.sleep(max(0.0, began + i / rate - time.perf_counter()))
                creates.append(asyncio.create_task(create(f"startup-{i:06d}")))
            await asyncio.gather(*creates)
            await cluster.wait_for(clock.all_running, within=120, what=f"{count} Running pods")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    startup = [clock.running[n] - sent[n] for n in sent]
    return {"startup p50": percentile(startup, 0.5), "startup p99": percentile(startup, 0.99)}


def cpu_per_pod(measured: Mapping[str, float], *, pods: int) -> dict[str, float]:
    """``measure_rc``'s ``cpu <process>`` (% of a core over the run) as CPU ms per pod."""
    took = measured["all Running"]
    return {
        f"cpu per pod {name.removeprefix('cpu ')}": share / 100 * took / pods * 1000
        for name, share in measured.items()
        if name.startswith("cpu ")
    }


def _units(name: str) -> str:
    if name.startswith("cpu per pod "):
        return "ms"
    if name.startswith("cpu "):
        return "% of a core"
    return {"all Running": "s", "pods/s": "pods/s"}.get(name, "s")


def _anchor(name: str, *, churn: bool) -> Anchor | None:
    if name == "pods/s":
        return ANCHORS["kwok"]
    if name == "startup p99" and churn:
        return ANCHORS["startup-slo"]
    return None


def rc_scenario(*, pods: int, nodes: int, controllers: int | None = None) -> ScenarioRun:
    """A scenario function for ``pods`` replicas on ``nodes`` sim nodes."""
    rcs = controllers or (1 if pods <= 1000 else 10)
    name = f"e2e {pods}x{nodes}"

    async def run(ctx: Context) -> list[Figure]:
        async def once(index: int) -> Mapping[str, float]:
            workdir = ctx.workdir / f"e2e-{pods}x{nodes}-{index}"
            async with running_cluster(workdir=workdir, nodes=nodes, store=ctx.store,
                                       max_pods=max(110, 2 * pods // nodes),
                                       profile=ctx.profile) as cluster:  # fmt: skip
                measured = await measure_rc(cluster, pods=pods, controllers=rcs)
            return {**measured, **cpu_per_pod(measured, pods=pods)}

        samples = await collect_rounds(once, rounds=_rounds(ctx, pods))
        note = f"{rcs} RC(s), {ctx.store} store; startup = first seen on the watch -> Running"
        return [
            figure(name, key, unit=_units(key), samples=values,
                   anchor=_anchor(key, churn=False), note=note if key == "all Running" else "")
            for key, values in samples.items()
        ]  # fmt: skip

    return run


def startup_label(*, rate: float, runtime: Runtime) -> str:
    """The row label says which runtime the pods ran on (and the sim's zero start delay)."""
    how = "sim runtime, 0 s start delay" if runtime == "sim" else "process runtime"
    return f"startup at {rate:.0f}/s, {how}"


def startup_scenario(*, nodes: int, rate: float = 20.0, runtime: Runtime = "sim") -> ScenarioRun:
    """Pod startup latency at ``rate`` creates/s on ``nodes`` nodes of ``runtime``.

    sim: 15 s of churn quick (300 pods), 60 s full; process: 10 s (200 ``busybox`` pods running
    ``sleep 3600``) either way — each pod is two host processes (container and shim)."""

    async def run(ctx: Context) -> list[Figure]:
        if runtime == "process":
            seconds, body, pods = 10.0, sleep_pod_body, "busybox pods (sleep 3600)"
        else:
            seconds, body, pods = (15.0 if ctx.quick else 60.0), pod_body, "bare pods"
        count = int(rate * seconds)

        async def once(index: int) -> Mapping[str, float]:
            workdir = ctx.workdir / f"startup-churn-{runtime}-{index}"
            async with running_cluster(
                workdir=workdir, nodes=nodes, store=ctx.store, runtime=runtime,
                max_pods=count + 10 if runtime == "process" else 110, profile=ctx.profile,
            ) as cluster:  # fmt: skip
                return await measure_startup_churn(cluster, rate=rate, seconds=seconds, body=body)

        samples = await collect_rounds(once, rounds=ctx.rounds)
        note = (f"{count} {pods} at {rate:.0f}/s on {nodes} {runtime} node(s), {ctx.store} "
                "store; create request -> Running seen on a watch")  # fmt: skip
        return [
            figure(startup_label(rate=rate, runtime=runtime), key, unit="s", samples=values,
                   anchor=_anchor(key, churn=True), note=note if key == "startup p99" else "")
            for key, values in samples.items()
        ]  # fmt: skip

    return run


def _rounds(ctx: Context, pods: int) -> int:
    """The 10,000-pod runs take minutes each: at most two rounds of them."""
    return ctx.rounds if pods <= 1000 else min(ctx.rounds, 2)


SCHEDULER_PHASES = ("backlog", "stream")
"""``bench.scheduler``'s phases, both reported: the scheduler alone, then create and schedule."""


def scheduler_scenario(*, pods: int, nodes: int) -> ScenarioRun:
    """``bench.scheduler``'s two phases on ``ctx.store``, plugged in as they are.

    ``backlog pods/s``: all pods pending, then the scheduler starts (its own throughput);
    ``stream pods/s``: pods created while the synced scheduler runs, first create -> last bound
    (every pod's create and binding share the apiserver and its store). Each is judged by
    kube-scheduler's floor; the stream figure also by the plain aiohttp POST ceiling, since no
    pod can be bound faster than it can be created."""

    async def run(ctx: Context) -> list[Figure]:
        from bench.scheduler import run_case

        async def once(index: int) -> Mapping[str, float]:
            values = {}
            for phase in SCHEDULER_PHASES:
                workdir = ctx.workdir / f"scheduler-{pods}x{nodes}-{index}"
                workdir.mkdir(parents=True, exist_ok=True)
                result = await run_case(pods, nodes, phase, concurrency=32,
                                        workdir=Path(workdir), store=ctx.store)  # fmt: skip
                values[f"{phase} pods/s"] = result.pods_per_s
            return values

        samples = await collect_rounds(once, rounds=ctx.rounds)
        return [scheduler_figure(key, values, pods=pods, nodes=nodes, store=ctx.store)
                for key, values in samples.items()]  # fmt: skip

    return run


def scheduler_figure(key: str, values: list[float], *, pods: int, nodes: int, store: str) -> Figure:
    """One phase's row: labelled with its store, anchored on kube-scheduler's floor."""
    notes = {
        "backlog pods/s": "all pods pending, then the scheduler starts; first -> last bound",
        "stream pods/s": "pods created (32 in flight) while the scheduler runs; first create "
        "-> last bound",
    }
    return figure(f"scheduler {pods}x{nodes} {store}", key, unit="pods/s", samples=values,
                  anchor=ANCHORS["scheduler"],
                  ceiling="ceilings/aiohttp POST" if key.startswith("stream") else None,
                  note=notes[key] + "; bindings over HTTP")  # fmt: skip
