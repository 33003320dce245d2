"""Node Lease renewals/s through the real apiserver, and the nodes one apiserver core can keep.

Why: a kubelet renews its node's Lease every 10 s (a quarter of the 40 s lease duration), so
5,000 nodes are 500 renewals a second before any pod is written — issue 23's 5,000-node row
failed on exactly that (bench/README.md, "scale"). The figure that decides it is the
apiserver's CPU per renewal: ``10 s / cpu per renewal`` is how many nodes one core can keep
fresh doing nothing else.

What it runs: the apiserver as its own process (SQLite in a temporary directory unless
``--store``), ``N`` Leases in ``kube-node-lease`` created as the kubelet creates them, then
``--rounds`` renewals of each, sent as the kubelet's lease controller sends them — an update
(``PUT``) of the Lease as last answered with ``spec.renewTime`` moved on — ``--concurrency`` in
flight. Printed: renewals/s, the apiserver's CPU ms per renewal (``/proc``; steadier than a
rate on a shared machine), beside its CPU ms per Lease create in the same run, and the nodes one
core keeps at a 10 s renewal interval.

Run: ``python -m bench.lease_renewals [-n N] [--rounds R] [--concurrency C] [--store URL]
[--profile FILE]``. Not a test: nothing is asserted. In ``python -m bench`` it is the
``lease-renewals`` row (200 leases x 5 rounds with ``--quick``, else 1,000 x 5).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from bench.api import apiserver_argv, server_process
from bench.harness import Anchor, Context, Figure, collect_rounds, figure
from bench.profile import profiling, summarize
from bench.status_writes import Rate, drive

SCENARIO = "lease-renewals"
RENEW_INTERVAL_S = 10.0
"""The kubelet's renewal interval: a quarter of its 40 s ``leaseDurationSeconds``."""
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
JSON = {"Content-Type": "application/json"}
FIVE_THOUSAND_NODES = Anchor("issue 23's 5,000 nodes", 5000.0, "nodes", "higher")
"""The nodes one apiserver must keep fresh in issue 23's scale row."""


def _micro_time(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(i: int) -> dict[str, Any]:
    """Node ``i``'s Lease as a kubelet creates it."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": f"node-{i}", "namespace": "kube-node-lease"},
        "spec": {
            "holderIdentity": f"node-{i}",
            "leaseDurationSeconds": 40,
            "renewTime": _micro_time(datetime.now(UTC)),
        },
    }


async def measure(
    url: str, *, count: int, rounds: int, in_flight: int, pid: int, profile: Path | None
) -> tuple[Rate, Rate]:
    """(creates of ``count`` Leases, ``rounds`` renewals of each)."""
    leases: list[dict[str, Any]] = [{} for _ in range(count)]
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(url, connector=connector) as session:
        async with session.post(
            "/api/v1/namespaces", json={"metadata": {"name": "kube-node-lease"}}
        ) as resp:
            if resp.status not in (201, 409):
                raise RuntimeError(f"namespace create answered {resp.status}")

        async def create(i: int) -> None:
            async with session.post(LEASES, data=orjson.dumps(lease_body(i)), headers=JSON) as r:
                if r.status != 201:
                    raise RuntimeError(f"lease create answered {r.status}")
                leases[i] = orjson.loads(await r.read())

        async def renew(n: int) -> None:
            i = n % count
            lease = leases[i]
            at = datetime.now(UTC) + timedelta(microseconds=n)  # every renewal moves the time
            body = {**lease, "spec": {**lease["spec"], "renewTime": _micro_time(at)}}
            path = f"{LEASES}/{lease['metadata']['name']}"
            async with session.put(path, data=orjson.dumps(body), headers=JSON) as r:
                if r.status != 200:
                    raise RuntimeError(f"lease renewal answered {r.status}")
                leases[i] = orjson.loads(await r.read())

        creates = await drive(create, count=count, in_flight=in_flight, pid=pid)
        # one worker per lease at most: a kubelet never has two renewals of its lease in flight
        workers = min(in_flight, count)
        recording = (
            profiling(pid=pid, out=profile) if profile is not None else contextlib.nullcontext()
        )
        async with recording:
            renewals = await drive(renew, count=count * rounds, in_flight=workers, pid=pid)
    return creates, renewals


def nodes_per_core(renewal: Rate) -> float:
    """Nodes one apiserver core keeps fresh doing nothing but their renewals."""
    return RENEW_INTERVAL_S * 1e3 / renewal.cpu_ms


async def run(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory(prefix="kubelite-bench-leases-") as tmp:
        store = args.store or f"sqlite:///{tmp}/api.db"
        pids: list[int] = []
        async with server_process(apiserver_argv(store), pids=pids) as url:
            creates, renewals = await measure(
                url,
                count=args.n,
                rounds=args.rounds,
                in_flight=args.concurrency,
                pid=pids[0],
                profile=args.profile,
            )
    lines = [
        f"lease renewals: {args.n} leases x {args.rounds} rounds, {args.concurrency} in flight, "
        f"store {store}",
        f"{'':<9} {'per s':>8} {'cpu ms':>7}",
        f"{'creates':<9} {creates.per_s:>8,.0f} {creates.cpu_ms:>7.3f}",
        f"{'renewals':<9} {renewals.per_s:>8,.0f} {renewals.cpu_ms:>7.3f}",
        f"renewal / create cpu ms: {renewals.cpu_ms / creates.cpu_ms:.2f}; nodes one core "
        f"keeps at {RENEW_INTERVAL_S:.0f} s: {nodes_per_core(renewals):,.0f}",
    ]
    if args.profile is not None:
        lines += ["", summarize(args.profile, top=25)]
    return "\n".join(lines)


async def run_scenario(ctx: Context) -> list[Figure]:
    """The suite's row: renewals/s, CPU per renewal beside a create's, nodes per core."""
    count, rounds = (200, 5) if ctx.quick else (1000, 5)

    async def once(index: int) -> dict[str, float]:
        workdir = ctx.workdir / f"{SCENARIO}-{index}"
        workdir.mkdir(parents=True, exist_ok=True)
        pids: list[int] = []
        async with server_process(apiserver_argv(f"sqlite:///{workdir}/api.db"), pids=pids) as url:
            creates, renewals = await measure(
                url, count=count, rounds=rounds, in_flight=32, pid=pids[0], profile=None
            )
        return {
            "renewal": renewals.per_s,
            "create cpu": creates.cpu_ms,
            "renewal cpu": renewals.cpu_ms,
            "nodes per core": nodes_per_core(renewals),
        }

    rounds_ = await collect_rounds(once, rounds=ctx.rounds)
    note = f"{count} Leases x {rounds} renewals (PUT), 32 in flight, SQLite store"
    return [
        figure(SCENARIO, "renewal", unit="req/s", samples=rounds_["renewal"], note=note),
        figure(SCENARIO, "create cpu", unit="cpu ms/req", samples=rounds_["create cpu"],
               note="the apiserver's CPU (/proc) per Lease create"),
        figure(SCENARIO, "renewal cpu", unit="cpu ms/req", samples=rounds_["renewal cpu"],
               ceiling=f"{SCENARIO}/create cpu",
               note="the apiserver's CPU (/proc) per Lease renewal"),
        figure(SCENARIO, "nodes per core", unit="nodes", samples=rounds_["nodes per core"],
               anchor=FIVE_THOUSAND_NODES,
               note="10 s / cpu per renewal: nodes one apiserver core keeps fresh, nothing else"),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.lease_renewals", description=__doc__.split("\n")[0]
    )
    parser.add_argument("-n", type=int, default=1000, help="leases (default 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="renewals of each (default 5)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--store", default=None, help="store URL (default: SQLite in a tmp dir)")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the renewals")
    args = parser.parse_args(argv)
    print(asyncio.run(run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
