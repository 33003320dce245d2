"""Scheduler benchmark: pods/s bound end to end through the real apiserver, over HTTP.

Why: the scheduler's cost per pod is a filter/score pass over the cache plus one binding POST;
what a person cares about is how many pods per second go from Pending to bound in a real
cluster. The anchor is kube-scheduler's CI floor, 270 pods/s in-process at 5,000 nodes
(``scheduler_perf``); ours goes through HTTP for every binding and every watch event.

Setup per case: a fresh ``python -m services.apiserver`` process on the SQLite store (the
default, a new file in the work dir per case; ``--store memory`` to compare), N plain Node
objects (Ready, 32 cpu, 128 GiB, 250 pods — the kubelet's ``sim`` runtime is not needed to
bind), then one of two phases, each measured on a watch of pods from this process:

* ``backlog``: all pods are created first, then ``python -m services.scheduler`` starts; the
  figure is pods / (last bound - first bound) — the scheduler's own throughput, its start-up
  and initial list excluded (that time is printed separately as ``startup``).
* ``stream``: the scheduler is running and synced; pods are created as fast as the apiserver
  takes them (``--concurrency`` creates in flight); the figure is pods / (last bound - first
  create) — create and schedule together, the user's view. Both phases are reported side by
  side: the backlog figure alone flatters the scheduler (no creates compete with its
  bindings at the apiserver and its store).

Every pod requests 100m cpu and 128Mi, has no other constraint, and uses the default plugins.
All processes share this machine's cores (2 here), so the figures are a floor, not a ceiling.

Run: ``python -m bench.scheduler [--quick] [--cases 1000x100,10000x1000] [--phases backlog,stream]
[--store sqlite|memory]``.
Prints a table; not a test (nothing is asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from api.registry import REGISTRY, ResourceType
from client.informer import Informer
from client.rest import ApiClient
from kubelite.testing import components
from kubelite.testing.waiting import poll_until

_pods, _nodes = REGISTRY.by_kind("", "Pod"), REGISTRY.by_kind("", "Node")
assert _pods is not None and _nodes is not None
PODS: ResourceType = _pods
NODES: ResourceType = _nodes

REPO = Path(__file__).resolve().parents[1]
ANCHOR = 270.0
"""kube-scheduler's scheduler_perf CI floor, pods/s, in-process, 5,000 nodes."""


@dataclass(frozen=True, slots=True)
class Result:
    pods: int
    nodes: int
    phase: str
    seconds: float
    startup: float
    scheduler_cpu: float
    """CPU seconds the scheduler process used, start-up and initial list included."""
    apiserver_cpu: float
    """CPU seconds the apiserver used meanwhile (creates excluded in the backlog phase)."""

    @property
    def pods_per_s(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else float("inf")


def _readyz(url: str) -> bool:
    """Whether the scheduler's /readyz says its informers synced."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=5) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _node(name: str) -> dict[str, Any]:
    resources = {"cpu": "32", "memory": "128Gi", "pods": "250"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "nginx",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ]
        },
    }


async def _create_all(
    client: ApiClient, objs: Iterable[dict[str, Any]], rt: Any, concurrency: int
) -> None:
    queue = list(objs)
    it = iter(queue)

    async def worker() -> None:
        for obj in it:
            ns = "default" if rt.namespaced else None
            await client.create(rt, obj, namespace=ns)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


class BoundWatch:
    """Counts pods as the watch reports them bound; records when the first and last were."""

    def __init__(self, client: ApiClient, expected: int) -> None:
        self.expected = expected
        self.bound: set[str] = set()
        self.first: float | None = None
        self.last: float | None = None
        self.done = asyncio.Event()
        self.informer = Informer(client, PODS, name="bench pods")
        self.informer.add_handler(on_add=self._saw, on_update=lambda _o, n: self._saw(n))

    def _saw(self, obj: dict[str, Any]) -> None:
        if not (obj.get("spec") or {}).get("nodeName"):
            return
        name = obj["metadata"]["name"]
        if name in self.bound:
            return
        now = time.perf_counter()
        self.bound.add(name)
        if self.first is None:
            self.first = now
        self.last = now
        if len(self.bound) >= self.expected:
            self.done.set()


def store_url(store: str, *, workdir: Path, case: str) -> str:
    """``sqlite`` (a fresh file per case in ``workdir``) or ``memory``, as ``--store`` names them."""
    if store == "sqlite":
        return f"sqlite:///{workdir}/{case}.db"
    if store == "memory":
        return "memory://"
    raise ValueError(f"unknown store {store!r}: sqlite or memory")


async def run_case(
    pods: int, nodes: int, phase: str, *, concurrency: int, workdir: Path, store: str = "sqlite"
) -> Result:
    case = f"{pods}x{nodes}-{phase}"
    api = components.apiserver(
        store=store_url(store, workdir=workdir, case=f"store-{case}"),
        state_dir=workdir / f"state-{case}", log_path=workdir / f"apiserver-{case}.log",
        args=[f"--watch-cache-size={max(10_000, 4 * pods)}", "--log-level=WARNING"], cwd=REPO,
    )  # fmt: skip
    await api.astart()
    server = api.url
    sched = components.scheduler(
        server=server, log_path=workdir / f"scheduler-{case}.log",
        args=["--leader-elect=false", "--log-level=WARNING"], cwd=REPO,
    )  # fmt: skip
    try:
        async with ApiClient(server=server) as client:
            await _create_all(
                client, (_node(f"node-{i:05}") for i in range(nodes)), NODES, concurrency
            )
            watch = BoundWatch(client, pods)
            watch_task = watch.informer.start()
            await watch.informer.wait_synced()
            names = [f"bench-{i:06}" for i in range(pods)]
            try:
                if phase == "backlog":
                    await _create_all(client, (_pod(n) for n in names), PODS, concurrency)
                    api_cpu = api.cpu_seconds()
                    started = time.perf_counter()
                    await sched.astart()
                    await asyncio.wait_for(watch.done.wait(), timeout=max(120.0, pods / 20))
                    assert watch.first is not None and watch.last is not None
                    return Result(
                        pods, nodes, phase, watch.last - watch.first, watch.first - started,
                        sched.cpu_seconds(), api.cpu_seconds() - api_cpu,
                    )  # fmt: skip
                api_cpu = api.cpu_seconds()
                started = time.perf_counter()
                await sched.astart()
                # synced informers have no line to await: /readyz is asked (the one poll)
                await asyncio.to_thread(
                    poll_until, partial(_readyz, sched.url), what="scheduler /readyz", every=0.05
                )
                startup = time.perf_counter() - started
                created = time.perf_counter()
                await _create_all(client, (_pod(n) for n in names), PODS, concurrency)
                await asyncio.wait_for(watch.done.wait(), timeout=max(120.0, pods / 20))
                assert watch.last is not None
                return Result(
                    pods,
                    nodes,
                    phase,
                    watch.last - created,
                    startup,
                    sched.cpu_seconds(),
                    api.cpu_seconds() - api_cpu,
                )
            finally:
                watch_task.cancel()
                await asyncio.gather(watch_task, return_exceptions=True)
    finally:
        await sched.astop()
        await api.astop()


def _cases(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        pods, _, nodes = part.partition("x")
        out.append((int(pods), int(nodes)))
    return out


async def amain(args: argparse.Namespace) -> None:
    cases = _cases(args.cases)
    phases = args.phases.split(",")
    rows: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-scheduler-") as tmp:
        workdir = Path(args.keep_logs or tmp)
        for pods, nodes in cases:
            for phase in phases:
                r = await run_case(
                    pods, nodes, phase, concurrency=args.concurrency, workdir=workdir,
                    store=args.store,
                )  # fmt: skip
                rows.append(r)
                print(
                    f"  {r.pods:>6} pods {r.nodes:>5} nodes {r.phase:<8} "
                    f"{r.pods_per_s:8.0f} pods/s  ({r.seconds:.2f}s, startup {r.startup:.2f}s, "
                    f"cpu: scheduler {r.scheduler_cpu:.1f}s apiserver {r.apiserver_cpu:.1f}s)",
                    file=sys.stderr, flush=True,
                )  # fmt: skip
    print()
    print(
        f"scheduler: pods bound per second over HTTP, {args.store} store "
        f"(anchor: kube-scheduler CI floor {ANCHOR:.0f} pods/s)"
    )
    print(
        f"{'pods':>6} {'nodes':>6} {'phase':<8} {'pods/s':>8} {'x anchor':>9} {'seconds':>8} "
        f"{'startup':>8} {'sched ms/pod':>13} {'api ms/pod':>11} {'cpu ceiling':>12}"
    )
    for r in rows:
        print(
            f"{r.pods:>6} {r.nodes:>6} {r.phase:<8} {r.pods_per_s:>8.0f} "
            f"{r.pods_per_s / ANCHOR:>9.2f} {r.seconds:>8.2f} {r.startup:>8.2f} "
            f"{1000 * r.scheduler_cpu / r.pods:>13.2f} {1000 * r.apiserver_cpu / r.pods:>11.2f} "
            f"{r.pods / max(r.scheduler_cpu, r.apiserver_cpu):>12.0f}"
        )
    print(
        f"ms/pod: CPU per pod of each process over the phase, which load on the machine does not "
        f"change (the scheduler's includes its start-up and initial list). cpu ceiling: the "
        f"pods/s if the busier of the two had a core to itself (an estimate, not a measurement). "
        f"CPU cores: {os.cpu_count()}, shared by the apiserver, the scheduler and this watcher."
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.scheduler", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "--cases", default="1000x100,1000x1000,10000x100,10000x1000", help="PODSxNODES,..."
    )
    p.add_argument("--phases", default="backlog,stream", help="backlog,stream")
    p.add_argument("--quick", action="store_true", help="only 1000x100 and 1000x1000")
    p.add_argument("--store", choices=("sqlite", "memory"), default="sqlite",
                   help="the apiserver's store (default sqlite, kubelite's default)")  # fmt: skip
    p.add_argument("--concurrency", type=int, default=32, help="creates in flight (default 32)")
    p.add_argument("--keep-logs", default=None, help="directory to keep the process logs in")
    args = p.parse_args(argv)
    if args.quick:
        args.cases = "1000x100,1000x1000"
    if args.keep_logs:
        Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
    import uvloop

    uvloop.run(amain(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
