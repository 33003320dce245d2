"""Pod status writes/s through the real apiserver, beside pod creates/s in the same run.

Why: in an RC's burst the kubelet's ``PUT pods/NAME/status`` (one per pod) cost the apiserver as
much CPU as all the pod's creates together (bench/README.md, issue 23). This drives that write
alone, as the kubelet's status manager sends it — the pod as last read, ``metadata`` and
``managedFields`` included, with a Running status (conditions, container statuses, IPs) — so its
cost can be measured and profiled without a cluster around it.

Layout: the apiserver is its own process (``python -m services.apiserver``, the store named by
``--store``), the client this one. N pods are created (``--concurrency`` in flight), each one's answer
kept, then each one's status is PUT once; the figures are creates and status writes per second
and the apiserver's CPU ms per request (``/proc``: steadier than rates on a shared machine),
and their ratios (both measured in the same run: the ratios are what to compare across runs).
``--profile FILE`` records the apiserver with py-spy during the status writes only.

Run: ``python -m bench.status_writes [-n N] [--concurrency C] [--store URL] [--profile FILE]``.
Prints one table; not a test (nothing is asserted). In ``python -m bench`` it is the
``status-writes`` row (500 pods with ``--quick``, else 2,000; each figure beside the create's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench.api import apiserver_argv, create_default_account, pod_body, server_process
from bench.harness import Context, Figure, collect_rounds, figure
from bench.profile import profiling, summarize

SCENARIO = "status-writes"


def running_status(pod: dict[str, Any]) -> dict[str, Any]:
    """What a kubelet writes when the pod's one container has started."""
    now = "2026-01-01T00:00:00Z"
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ]
    return {
        **(pod.get("status") or {}),
        "phase": "Running",
        "conditions": [*conditions, *(pod.get("status") or {}).get("conditions", [])],
        "hostIP": "127.0.0.2",
        "hostIPs": [{"ip": "127.0.0.2"}],
        "podIP": "10.244.0.7",
        "podIPs": [{"ip": "10.244.0.7"}],
        "startTime": now,
        "containerStatuses": [
            {
                "name": "main",
                "image": "nginx:1.27",
                "imageID": "sim://nginx:1.27",
                "containerID": f"sim://{pod['metadata']['uid']}/main",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
                "lastState": {},
            }
        ],
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Rate:
    per_s: float
    cpu_ms: float
    """The apiserver's CPU per request: steadier than requests/s on a loaded machine."""


async def drive(call: Any, *, count: int, in_flight: int, pid: int) -> Rate:
    """``call(i)`` for i in ``range(count)``, ``in_flight`` at a time: its rate and the CPU of
    process ``pid`` per call (``bench.lease_renewals`` drives its renewals so too)."""
    indices = iter(range(count))

    async def worker() -> None:
        for i in indices:
            await call(i)

    start, cpu = time.perf_counter(), cpu_seconds(pid)
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return Rate(count / (time.perf_counter() - start), (cpu_seconds(pid) - cpu) * 1e3 / count)


async def measure(
    url: str, *, count: int, in_flight: int, pid: int, profile: Path | None
) -> tuple[Rate, Rate]:
    """(creates, status writes) of ``count`` pods."""
    bodies = [json.dumps(pod_body(i)).encode() for i in range(count)]
    headers = {"Content-Type": "application/json"}
    pods: list[dict[str, Any]] = [{} for _ in range(count)]
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(url, connector=connector) as session:
        await create_default_account(session)

        async def create(i: int) -> None:
            async with session.post(
                "/api/v1/namespaces/default/pods", data=bodies[i], headers=headers
            ) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"create answered {resp.status}")
                pods[i] = await resp.json()

        async def write_status(i: int) -> None:
            pod = pods[i]
            body = json.dumps({**pod, "status": running_status(pod)}).encode()
            path = f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}/status"
            async with session.put(path, data=body, headers=headers) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"status write answered {resp.status}")

        creates = await drive(create, count=count, in_flight=in_flight, pid=pid)
        recording = (
            profiling(pid=pid, out=profile) if profile is not None else contextlib.nullcontext()
        )
        async with recording:
            writes = await drive(write_status, count=count, in_flight=in_flight, pid=pid)
    return creates, writes


async def run(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory(prefix="kubelite-bench-status-") as tmp:
        store = args.store or f"sqlite:///{tmp}/api.db"
        pids: list[int] = []
        async with server_process(apiserver_argv(store), pids=pids) as url:
            creates, writes = await measure(
                url, count=args.n, in_flight=args.concurrency, pid=pids[0], profile=args.profile
            )
    lines = [
        f"pod status writes: {args.n} pods, {args.concurrency} in flight, store {store}",
        f"{'':<14} {'per s':>8} {'cpu ms':>7}",
        f"{'creates':<14} {creates.per_s:>8,.0f} {creates.cpu_ms:>7.3f}",
        f"{'status writes':<14} {writes.per_s:>8,.0f} {writes.cpu_ms:>7.3f}",
        f"status writes / creates: {writes.per_s / creates.per_s:.2f} per s, "
        f"{writes.cpu_ms / creates.cpu_ms:.2f} cpu ms",
    ]
    if args.profile is not None:
        lines += ["", summarize(args.profile, top=25)]
    return "\n".join(lines)


async def run_scenario(ctx: Context) -> list[Figure]:
    """The suite's row: status writes beside creates, per second and in apiserver CPU."""
    count = 500 if ctx.quick else 2000

    async def once(index: int) -> dict[str, float]:
        workdir = ctx.workdir / f"{SCENARIO}-{index}"
        workdir.mkdir(parents=True, exist_ok=True)
        pids: list[int] = []
        async with server_process(apiserver_argv(f"sqlite:///{workdir}/api.db"), pids=pids) as url:
            creates, writes = await measure(
                url, count=count, in_flight=32, pid=pids[0], profile=None
            )
        return {
            "create": creates.per_s,
            "status write": writes.per_s,
            "create cpu": creates.cpu_ms,
            "status write cpu": writes.cpu_ms,
        }

    rounds = await collect_rounds(once, rounds=ctx.rounds)
    note = f"{count} pods, 32 in flight, SQLite store, the kubelet's status PUT"
    return [
        figure(SCENARIO, "create", unit="req/s", samples=rounds["create"], note=note),
        figure(SCENARIO, "status write", unit="req/s", samples=rounds["status write"],
               ceiling=f"{SCENARIO}/create", note=note),
        figure(SCENARIO, "create cpu", unit="cpu ms/req", samples=rounds["create cpu"],
               note="the apiserver's CPU (/proc) per request"),
        figure(SCENARIO, "status write cpu", unit="cpu ms/req",
               samples=rounds["status write cpu"], ceiling=f"{SCENARIO}/create cpu",
               note="the apiserver's CPU (/proc) per request"),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.status_writes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("-n", type=int, default=2000, help="pods (default 2000)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--store", default=None, help="store URL (default: SQLite in a tmp dir)")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the status writes")
    args = parser.parse_args(argv)
    print(asyncio.run(run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
