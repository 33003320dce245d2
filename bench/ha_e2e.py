"""End to end on etcd with 1 apiserver beside 3 behind ``kubelite front``: pods/s, one run.

Why: ``kubelite up --ha`` spreads the API over three apiservers; on one machine they share the
cores, so whether that buys throughput or costs it is a measurement, not a guess. Both rows run
the same flow as ``bench.e2e``'s RC scenario (an RC of ``pods`` replicas on ``nodes`` sim
nodes, from the create until every pod is Running, timed by a pod informer) on one real etcd
member (``kubelite.testing.etcd``):

* ``1 apiserver``: one apiserver on ``--store etcd://``; every component talks to it;
* ``3 apiservers``: three on the same etcd, each with its own watch cache, and ``kubelite
  front`` before them; the scheduler, the controller-manager, the kubelet and the informer all
  connect through the front, which spreads their connections round robin.

The ratio row is the second's pods/s over the first's. Run alone:
``python -m bench.ha_e2e [--quick]``. Limits: one etcd member (a 3-member cluster adds raft
round trips that are the same for both rows); all processes share the machine's cores.

First run (``--quick``, one round, 2 cores shared with other work at load ~12): 3.8 pods/s with
1 apiserver, 5.2 with 3 behind the front (1.37x). Each apiserver then kept one etcd write in
flight, so three apiservers put three writes in flight at once; the store now keeps several in
flight per apiserver, and that run predates it.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from bench.cluster import Cluster, kubelet_argv
from bench.e2e import measure_rc
from bench.harness import Context, Figure, collect_rounds, figure, run_alone
from kubelite import commands
from kubelite.testing import components, etcd
from kubelite.testing.process import ComponentProcess

__all__ = ["ha_cluster", "run"]

ROOT = Path(__file__).resolve().parents[1]
QUIET = "--log-level=WARNING"


@contextlib.asynccontextmanager
async def ha_cluster(*, workdir: Path, apiservers: int, nodes: int) -> AsyncIterator[Cluster]:
    """One etcd member, ``apiservers`` apiservers on it (more than one: behind a front), a
    scheduler, a controller-manager and one sim kubelet of ``nodes`` nodes."""
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    member = etcd.EtcdMember(workdir / "etcd")
    await asyncio.to_thread(member.start)
    cluster = Cluster(workdir=workdir)
    try:
        apis = [
            components.apiserver(
                store=f"etcd://{member.endpoint}", state_dir=workdir / f"apiserver-{i}",
                log_path=workdir / f"apiserver-{i}.log", cwd=ROOT, args=[QUIET],
            )
            for i in range(apiservers)
        ]  # fmt: skip
        cluster.components.extend(apis)
        await asyncio.gather(*(api.astart() for api in apis))
        if apiservers > 1:  # the front first in the list: ``cluster.url`` is its address
            front = ComponentProcess(
                commands.front(
                    backends=[f"127.0.0.1:{api.port}" for api in apis], port=0,
                    health_scheme="http", healthz_port=-1, extra=[QUIET],
                ).python(),
                name="front", endpoint="front", log_path=workdir / "front.log", cwd=ROOT,
            )  # fmt: skip
            cluster.components.insert(0, front)
            await front.astart()
        server = cluster.url
        quietly = ["--leader-elect=false", QUIET]
        await cluster.add(components.scheduler(
            server=server, log_path=workdir / "scheduler.log", args=quietly, cwd=ROOT
        ))  # fmt: skip
        await cluster.add(components.controller_manager(
            server=server, log_path=workdir / "controller-manager.log", args=quietly, cwd=ROOT
        ))  # fmt: skip
        argv = kubelet_argv(
            server=server, runtime="sim", index=0, nodes=nodes, workdir=workdir, max_pods=110,
            extra=(QUIET,),
        )  # fmt: skip
        await cluster.add(ComponentProcess(
            argv, name="kubelet-0", component="kubelet", endpoint="server",
            log_path=workdir / "kubelet-0.log", cwd=ROOT,
        ))  # fmt: skip
        await cluster.wait_nodes_ready(nodes, within=60 + nodes / 10)
        yield cluster
    finally:
        await cluster.stop()
        await asyncio.to_thread(member.stop)


async def run(ctx: Context) -> list[Figure]:
    pods, nodes = (300, 30) if ctx.quick else (1000, 100)
    scenario = f"e2e on etcd {pods}x{nodes}"
    rows: dict[int, dict[str, list[float]]] = {}
    for apiservers in (1, 3):

        async def once(index: int, apiservers: int = apiservers) -> Mapping[str, float]:
            workdir = ctx.workdir / f"ha-e2e-{apiservers}-{index}"
            async with ha_cluster(workdir=workdir, apiservers=apiservers, nodes=nodes) as cluster:
                measured = await measure_rc(cluster, pods=pods, controllers=1)
            return {key: measured[key] for key in ("all Running", "pods/s", "startup p99")}

        rows[apiservers] = await collect_rounds(once, rounds=ctx.rounds)
    figures = []
    for apiservers, samples in rows.items():
        label = "1 apiserver" if apiservers == 1 else f"{apiservers} apiservers behind the front"
        for key, values in samples.items():
            unit = "pods/s" if key == "pods/s" else "s"
            figures.append(figure(scenario, f"{key}, {label}", unit=unit, samples=values))
    one, three = rows[1]["pods/s"], rows[3]["pods/s"]
    ratios = [b / a for a, b in zip(one, three, strict=True)]
    figures.append(
        figure(scenario, "pods/s ratio, 3 apiservers / 1", unit="x", samples=ratios,
               note="one etcd member; every process on the same cores")
    )  # fmt: skip
    return figures


def main(argv: list[str] | None = None) -> int:
    figures = run_alone(
        run, argv, prog="python -m bench.ha_e2e",
        description="e2e pods/s on etcd: 1 apiserver beside 3 behind kubelite front",
        quick_help="300 pods on 30 sim nodes instead of 1,000 on 100",
    )  # fmt: skip
    for fig in figures:
        print(f"{fig.scenario} | {fig.name}: {statistics.median(fig.samples):.2f} {fig.unit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
