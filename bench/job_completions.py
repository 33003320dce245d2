"""Job completions per second beside the Deployment's pods-Running per second, in the same run.

Why: a Job's pods cost more than a Deployment's. Every pod is created, scheduled, run to its
end by the kubelet, then recorded by the job controller in ``uncountedTerminatedPods``, has its
tracking finalizer removed and is counted — three extra writes per pod and two status writes
per batch. This puts a number on that against the figure people already know:

* ``job``: a Job of ``completions`` (1,000) at ``parallelism`` (50) whose sim containers exit 0
  at once (``KUBELITE_SIM_EXIT_CODE``); seconds from create until the Job is ``Complete``, and
  completions per second;
* ``deployment``: a Deployment of the same number of replicas; seconds from create until all
  are ready (sim pods are Running and Ready at once), and pods per second;
* the ratio job/deployment.

Both run on one cluster (real apiserver on sqlite, scheduler, controller-manager and one sim
kubelet hosting ``nodes`` nodes), the Job first, then the Deployment, each awaited through a
watch.

Limits: the sim runtime runs nothing, so this measures the control plane only; a Job at
parallelism 50 is bounded by its parallelism as much as by the controllers, so the ratio is
also a statement about the Job's shape (``--parallelism`` changes it).

``python -m bench.job_completions [--completions N] [--parallelism P] [--nodes M]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.registry import REGISTRY
from bench.cluster import running_cluster
from bench.harness import Context, Figure, collect_rounds, figure
from client.informer import Informer
from client.rest import ApiClient
from services.controller_manager.job_tracking import JOBS
from services.controller_manager.replication import PODS

__all__ = ["SCENARIO", "main", "measure", "run"]

SCENARIO = "job-1000"
DEPLOYMENTS = REGISTRY.require("apps", "Deployment")
NAMESPACE = "default"
Obj = dict[str, Any]


def job_body(*, completions: int, parallelism: int) -> Obj:
    container = {
        "name": "main",
        "image": "busybox",
        "env": [{"name": "KUBELITE_SIM_EXIT_CODE", "value": "0"}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bench-job"},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def deployment_body(*, replicas: int) -> Obj:
    labels = {"app": "bench-deploy"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bench-deploy"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]},
            },
        },
    }


def _complete(job: Obj) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def _timed(
    client: ApiClient, rt: Any, body: Obj, done: Callable[[Obj], bool], *, within: float
) -> float:
    """Seconds from creating ``body`` until a watch sees ``done(object)``."""
    informer = Informer(client, rt, namespace=NAMESPACE)
    reached = asyncio.Event()

    def check(obj: Obj) -> None:
        if obj["metadata"]["name"] == body["metadata"]["name"] and done(obj):
            reached.set()

    informer.add_handler(on_add=check, on_update=lambda _old, new: check(new))
    task = informer.start()
    try:
        await informer.wait_synced()
        start = time.perf_counter()
        await client.create(rt, body, namespace=NAMESPACE)
        await asyncio.wait_for(reached.wait(), within)
        return time.perf_counter() - start
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def measure(
    *, completions: int, parallelism: int, nodes: int, workdir: Path
) -> dict[str, float]:
    async with (
        running_cluster(workdir=workdir, nodes=nodes, max_pods=completions) as cluster,
        ApiClient(server=cluster.url) as client,
    ):
        job_s = await _timed(
            client,
            JOBS,
            job_body(completions=completions, parallelism=parallelism),
            _complete,
            within=120 + completions,
        )
        await client.delete(JOBS, "bench-job", namespace=NAMESPACE, propagation_policy="Background")
        deploy_s = await _timed(
            client,
            DEPLOYMENTS,
            deployment_body(replicas=completions),
            lambda d: int((d.get("status") or {}).get("readyReplicas") or 0) == completions,
            within=120 + completions,
        )
        pods = len((await client.list(PODS, namespace=NAMESPACE))["items"])
    return {
        "job seconds": job_s,
        "job completions/s": completions / job_s,
        "deployment seconds": deploy_s,
        "deployment pods/s": completions / deploy_s,
        "ratio job/deployment": (completions / job_s) / (completions / deploy_s),
        "pods at the end": float(pods),
    }


async def run(ctx: Context) -> list[Figure]:
    """The suite's scenario: completions/s beside the Deployment's pods/s of the same round."""
    completions = 200 if ctx.quick else 1000

    async def once(index: int) -> dict[str, float]:
        workdir = ctx.workdir / f"{SCENARIO}-{index}"
        workdir.mkdir(parents=True, exist_ok=True)
        return await measure(completions=completions, parallelism=50, nodes=10, workdir=workdir)

    rounds = await collect_rounds(once, rounds=ctx.rounds)
    shape = f"{completions} completions at parallelism 50, 10 sim nodes"
    return [
        figure(SCENARIO, "deployment pods/s", unit="pods/s", samples=rounds["deployment pods/s"],
               note=f"Deployment of {completions} replicas until all ready, same cluster"),
        figure(SCENARIO, "job completions/s", unit="pods/s", samples=rounds["job completions/s"],
               ceiling=f"{SCENARIO}/deployment pods/s", note=shape),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.job_completions", description=__doc__)
    p.add_argument("--completions", type=int, default=1000)
    p.add_argument("--parallelism", type=int, default=50)
    p.add_argument("--nodes", type=int, default=10)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-job-") as tmp:
        figures = asyncio.run(
            measure(
                completions=args.completions,
                parallelism=args.parallelism,
                nodes=args.nodes,
                workdir=Path(tmp),
            )
        )
    print(
        f"Job of {args.completions} completions at parallelism {args.parallelism} vs a "
        f"Deployment of {args.completions} replicas, {args.nodes} sim nodes:"
    )
    for name, value in figures.items():
        print(f"  {name:24} {value:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
