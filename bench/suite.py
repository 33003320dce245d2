"""The suite ``python -m bench`` runs: which scenarios, in what order, at what sizes.

Why a module of its own: the harness knows nothing of kubelite, and each scenario module knows
nothing of the others; this is where they meet. It is also where other engineers' benches plug
in as they are — ``bench.api`` (``measure_requests``, ``measure_fanout``, ``server_process``)
and ``bench.scheduler`` (``run_case``) are imported and called, never copied. Imports happen
inside each scenario, so a module that fails to import fails its own scenario only.

Order: the ceilings come first (every ratio refers to them), then the API, watch, scheduler,
end-to-end and scale sections. Scenarios marked ``quick=False`` (the 10,000- and 30,000-pod
runs, 1,000-node clusters) run only without ``--quick``. The largest scale scenario
(``scale-5000x150000`` by default, seeded pods) is registered only when asked for
(``build_registry(scale=(nodes, pods))``, ``python -m bench --scale``): it is run by hand.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import aiohttp

from bench import ceilings
from bench.e2e import rc_scenario, scheduler_scenario, startup_scenario
from bench.harness import ANCHORS, Context, Figure, Registry, Scenario, collect_rounds, figure
from bench.scale import burst_scenario, scale_scenario, time_list

__all__ = ["build_registry"]

CHURN_RATE = 20.0
"""Requests/s of the steady churn: the load Kubernetes' SLOs are stated at."""
LIST_PODS = 10_000
"""Pods in the API scenario's list (3,000 with ``--quick``: filling 10,000 takes a minute)."""


def _store_url(ctx: Context, name: str) -> str:
    return "memory://" if ctx.store == "memory" else f"sqlite:///{ctx.workdir}/{name}.db"


async def _fill(url: str, *, count: int, prefix: str, in_flight: int = 64) -> None:
    """Create ``count`` small pods as fast as the apiserver takes them."""
    from bench.api import pod_body

    names = iter(range(count))
    async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=in_flight)) as s:

        async def worker() -> None:
            for i in names:
                body = pod_body(i)
                body["metadata"]["name"] = f"{prefix}-{i:06d}"
                async with s.post("/api/v1/namespaces/default/pods", data=json.dumps(body),
                                  headers={"Content-Type": "application/json"}) as resp:  # fmt: skip
                    await resp.read()
                    if resp.status != 201:
                        raise RuntimeError(f"fill create answered {resp.status}")

        await asyncio.gather(*(worker() for _ in range(in_flight)))


async def run_api(ctx: Context) -> list[Figure]:
    from bench.api import apiserver_argv, measure_requests, server_process
    from bench.churn import measure_churn

    async def once(index: int) -> Mapping[str, float]:
        values: dict[str, float] = {}
        pids: list[int] = []
        async with server_process(apiserver_argv(_store_url(ctx, f"api-{index}")),
                                  pids=pids) as url:  # fmt: skip
            figures = await measure_requests(url, "apiserver", count=ceilings.request_count(ctx),
                                             in_flight=ceilings.REQUEST_CONCURRENCY,
                                             pid=pids[-1])  # fmt: skip
            for f in figures:
                values[f"{f.op}s/s"] = f.per_s
                if f.cpu_ms is not None:
                    values[f"cpu per {f.op}"] = f.cpu_ms
                values[f"{f.op} p50 at saturation"] = f.p50_ms
                values[f"{f.op} p99 at saturation"] = f.p99_ms
            churn = await measure_churn(url, rate=CHURN_RATE, seconds=10 if ctx.quick else 30,
                                        prefix=f"churn{index}")  # fmt: skip
            for key, value in churn.items():
                values[f"{key} at {CHURN_RATE:.0f}/s"] = value
        listed = 3000 if ctx.quick else LIST_PODS
        async with server_process(apiserver_argv(_store_url(ctx, f"list-{index}"))) as url:
            await _fill(url, count=listed, prefix="list")
            path = "/api/v1/namespaces/default/pods"
            seconds, items = await time_list(url, path=path)
            if items != listed:
                raise RuntimeError(f"list returned {items} pods, expected {listed}")
            values[f"list {listed // 1000}k pods"] = sorted(seconds)[len(seconds) // 2]
            cached, _ = await time_list(url, path=path, params={"resourceVersion": "0"})
            values[f"list {listed // 1000}k pods rv=0"] = sorted(cached)[len(cached) // 2]
        return values

    samples = await collect_rounds(once, rounds=ctx.rounds)
    return [_api_figure(key, values, ctx=ctx) for key, values in samples.items()]


_API_CEILINGS = {
    "creates/s": "ceilings/aiohttp POST",
    "gets/s": "ceilings/aiohttp GET",
    "create p50 at saturation": "ceilings/aiohttp POST p50",
    "create p99 at saturation": "ceilings/aiohttp POST p99",
    "get p50 at saturation": "ceilings/aiohttp GET p50",
    "get p99 at saturation": "ceilings/aiohttp GET p99",
}


def _api_figure(key: str, values: list[float], *, ctx: Context) -> Figure:
    """Unit, anchor, ceiling and note of one of ``run_api``'s values."""
    scenario, name, unit, anchor, note = "api", key, "ms", None, ""
    if key in ("creates/s", "gets/s") or key.startswith("creates/s sent"):
        unit = "req/s"
    if key == "creates/s":
        note = f"{ceilings.REQUEST_CONCURRENCY} in flight, {ctx.store} store"
    if key.startswith("cpu per "):
        note = "the apiserver's CPU (user + system) per request at saturation"
    if " p99 " in f"{key} ":
        anchor = ANCHORS["api-slo"]
    if key.startswith("create p99 at 20"):
        note = "open loop: 20 creates/s and 20 gets/s, each request sent at its slot"
    if key.startswith("watch "):
        scenario, name, anchor = "watch", key.replace("watch ", "latency "), None
        if key.startswith("watch p99"):
            note = "write acknowledged -> ADDED read by a watcher (read before the ack = 0)"
    if key.startswith("list"):
        unit, anchor = "s", ANCHORS["list-namespace-slo"]
        if key.endswith("rv=0"):
            note = "rv=0: served from the watch cache; without it, read from the store"
    return figure(scenario, name, unit=unit, samples=values, ceiling=_API_CEILINGS.get(key),
                  anchor=anchor, note=note)  # fmt: skip


async def run_watch(ctx: Context) -> list[Figure]:
    from bench.api import apiserver_argv, server_process

    async def once(index: int) -> Mapping[str, float]:
        values = {}
        for watchers in ceilings.FANOUT_WATCHERS:
            store = _store_url(ctx, f"watch-{index}-{watchers}")
            async with server_process(apiserver_argv(store)) as url:
                fan = await ceilings.fanout(url, watchers=watchers, quick=ctx.quick)
            values[f"fan-out to {watchers} watchers"] = fan.deliveries_per_s
            values[f"keeping up, {watchers} watchers"] = fan.keeping_up
            values[f"closed early, {watchers} watchers"] = fan.closed
        return values

    samples = await collect_rounds(once, rounds=ctx.rounds)
    return [_watch_figure(key, values, store=ctx.store) for key, values in samples.items()]


_WATCH_UNITS = {"fan-out": "events/s", "keeping": "share", "closed": "watchers"}
_WATCH_NOTES = {
    "fan-out": "events the watchers really received, all together, per second (a watcher "
    "closed early counts what it got), {store} store",
    "keeping": "delivered/s over watchers x creates/s; 1.00 = every watcher got every event "
    "as fast as it was written",
    "closed": "watchers the apiserver closed for falling behind before they had every event",
}


def _watch_figure(key: str, values: list[float], *, store: str) -> Figure:
    """Unit, ceiling and note (on the first watcher count's rows) of a ``run_watch`` value."""
    kind = key.split(" ", 1)[0]
    first = key.endswith(f" {ceilings.FANOUT_WATCHERS[0]} watchers")
    note = _WATCH_NOTES[kind].format(store=store) if first else ""
    ceiling = f"ceilings/{key}" if kind == "fan-out" else None
    return figure("watch", key, unit=_WATCH_UNITS[kind], samples=values, ceiling=ceiling,
                  note=note)  # fmt: skip


async def run_pod_start_sandbox(ctx: Context) -> list[Figure]:
    from bench import pod_start_sandbox

    return await pod_start_sandbox.run(ctx)


async def run_service_throughput(ctx: Context) -> list[Figure]:
    from bench import service_throughput

    return await service_throughput.run(ctx)


async def run_job_completions(ctx: Context) -> list[Figure]:
    from bench import job_completions

    return await job_completions.run(ctx)


async def run_dns_answers(ctx: Context) -> list[Figure]:
    from bench import dns_answers

    return await dns_answers.run(ctx)


async def run_tls_create(ctx: Context) -> list[Figure]:
    from bench import tls_create

    return await tls_create.run(ctx)


async def run_ha_e2e(ctx: Context) -> list[Figure]:
    from bench import ha_e2e

    return await ha_e2e.run(ctx)


async def run_fixture_start(ctx: Context) -> list[Figure]:
    from bench import fixture_start

    return await fixture_start.run(ctx)


async def run_audit_cost(ctx: Context) -> list[Figure]:
    from bench import audit_cost

    return await audit_cost.run(ctx)


async def run_apf_leases(ctx: Context) -> list[Figure]:
    from bench import apf_leases

    return await apf_leases.run(ctx)


async def run_cr_create(ctx: Context) -> list[Figure]:
    from bench import cr_create

    return await cr_create.run(ctx)


async def run_apply_rate(ctx: Context) -> list[Figure]:
    from bench import apply_rate

    return await apply_rate.run(ctx)


async def run_status_writes(ctx: Context) -> list[Figure]:
    from bench import status_writes

    return await status_writes.run_scenario(ctx)


async def run_lease_renewals(ctx: Context) -> list[Figure]:
    from bench import lease_renewals

    return await lease_renewals.run_scenario(ctx)


async def run_writes_per_pod(ctx: Context) -> list[Figure]:
    from bench import writes_per_pod

    return await writes_per_pod.run(ctx)


def scale_name(nodes: int, pods: int) -> str:
    """The name of the seeded scale scenario of ``nodes`` x ``pods`` (``--scale``)."""
    return f"scale-{nodes}x{pods}"


def build_registry(*, scale: tuple[int, int] | None = None) -> Registry:
    """The suite; with ``scale=(nodes, pods)`` also the seeded scale scenario of that size."""
    registry = Registry([
        Scenario("ceilings", "ceilings", ceilings.run,
                 "plain aiohttp GET/POST, sqlite3 commits, chunked fan-out"),
        Scenario("api", "api", run_api,
                 "creates/gets at saturation, latency at 20 req/s, list of 10k pods"),
        Scenario("watch", "watch", run_watch, "events/s to 10/100/1,000 watchers"),
        Scenario("scheduler-1000x100", "scheduler", scheduler_scenario(pods=1000, nodes=100),
                 "bench.scheduler backlog and stream: 1,000 pods on 100 nodes"),
        Scenario("scheduler-1000x1000", "scheduler", scheduler_scenario(pods=1000, nodes=1000),
                 "bench.scheduler backlog and stream: 1,000 pods on 1,000 nodes", quick=False),
        Scenario("e2e-1000x100", "e2e", rc_scenario(pods=1000, nodes=100),
                 "RC of 1,000 pods on 100 sim nodes until all Running"),
        Scenario("writes-per-pod", "e2e", run_writes_per_pod,
                 "store writes per pod of an RC of 1,000 on 100 sim nodes, counted from the "
                 "audit log by component, beside Kubernetes' minimum"),
        Scenario("startup-churn", "e2e", startup_scenario(nodes=100),
                 "pod startup latency at 20 pods/s on 100 sim nodes (0 s start delay)"),
        Scenario("startup-churn-process", "e2e", startup_scenario(nodes=1, runtime="process"),
                 "pod startup latency at 20 pods/s, 200 busybox pods on 1 process node"),
        Scenario("pod-start-sandbox", "e2e", run_pod_start_sandbox,
                 "process runtime container start with and without the pod sandbox, and a bare "
                 "posix_spawn"),
        Scenario("service-throughput", "e2e", run_service_throughput,
                 "HTTP req/s through a ClusterIP (kubelite proxy) beside straight to the pod"),
        Scenario("job-1000", "e2e", run_job_completions,
                 "a Job of 1,000 completions beside a Deployment of 1,000 replicas, 10 sim nodes"),
        Scenario("dns-answers", "e2e", run_dns_answers,
                 "kubelite dns answers/s for a cluster name and for distinct names, beside a "
                 "UDP echo server"),
        Scenario("tls-create", "api", run_tls_create,
                 "ConfigMap creates/s over TLS with a client certificate beside plain HTTP"),
        Scenario("fixture-start", "api", run_fixture_start,
                 "kubelite_cluster start to ready: in-process apiserver beside a subprocess"),
        Scenario("audit-cost", "api", run_audit_cost,
                 "ConfigMap creates/s with an audit policy (Metadata, RequestResponse) beside "
                 "none"),
        Scenario("apf-leases", "api", run_apf_leases,
                 "a node's Lease renewal p50/p99 under a service account's create flood, "
                 "priority and fairness on beside off"),
        Scenario("cr-create", "api", run_cr_create,
                 "custom-object creates/s (CRD schema with CEL rules) beside Pod creates/s"),
        Scenario("apply-rate", "api", run_apply_rate,
                 "server-side applies/s beside updates/s of the same ConfigMaps"),
        Scenario("status-writes", "api", run_status_writes,
                 "pod status PUTs/s and apiserver CPU per PUT, as the kubelet sends them, beside "
                 "pod creates"),
        Scenario("lease-renewals", "api", run_lease_renewals,
                 "node Lease renewals (PUT) and apiserver CPU per renewal beside a Lease create; "
                 "the nodes one core keeps at 10 s renewals"),
        Scenario("e2e-etcd-1-vs-3-apiservers", "e2e", run_ha_e2e,
                 "RC of 1,000 pods on 100 sim nodes on etcd: 1 apiserver beside 3 behind "
                 "kubelite front (pods/s ratio)", quick=False),
        Scenario("e2e-1000x1000", "e2e", rc_scenario(pods=1000, nodes=1000),
                 "RC of 1,000 pods on 1,000 sim nodes", quick=False),
        Scenario("e2e-10000x100", "e2e", rc_scenario(pods=10_000, nodes=100),
                 "10 RCs, 10,000 pods on 100 sim nodes", quick=False),
        Scenario("e2e-10000x1000", "e2e", rc_scenario(pods=10_000, nodes=1000),
                 "10 RCs, 10,000 pods on 1,000 sim nodes", quick=False),
        Scenario("scale-100x1000", "scale", scale_scenario(nodes=100, pods=1000),
                 "hold 100 nodes + 1,000 pods: leases, RSS, full list"),
        Scenario("scale-1000x30000", "scale", scale_scenario(nodes=1000, pods=30_000),
                 "hold 1,000 nodes + 30,000 pods: leases, RSS, full list", quick=False),
        Scenario("burst-10000x100", "scale",
                 burst_scenario(nodes=100, pods=10_000, quick_nodes=20, quick_pods=1000),
                 "node leases and Ready sampled during an RC of 10,000 pods on 100 sim nodes "
                 "(quick: 1,000 on 20)"),
    ])  # fmt: skip
    if scale is not None:
        nodes, pods = scale
        registry.add(Scenario(
            scale_name(nodes, pods), "scale", scale_scenario(nodes=nodes, pods=pods, build="seed"),
            f"hold {nodes:,} nodes + {pods:,} seeded bound pods: leases, RSS, full list "
            "(--scale; long)", quick=False,
        ))  # fmt: skip
    return registry
