"""Container start latency on the process runtime, with and without the pod sandbox, side by side.

Why: the sandbox (``services/kubelet/runtime/sandbox.py``) puts every container instance in new
mount, UTS, PID and IPC namespaces and builds it a filesystem view (some sixty mounts) before
exec. This says what that costs, next to what the same start costs without it and next to the
floor the machine allows, all measured in the same run:

* ``bare posix_spawn`` (the ceiling): ``os.posix_spawn`` of the same ``sleep`` from this
  process, timed until it returns (glibc returns once the child has exec'd) — no shim, no log,
  no state;
* ``unsandboxed``: ``ProcessRuntime(sandbox="off").start_container`` until it returns, which is
  when the shim has answered with the container's pid (the process is running its command);
* ``sandboxed``: the same with ``sandbox="on"``: the shim unshares a PID namespace, its child
  builds the sandbox, pivots into it and execs.

Each round starts ``count`` containers one after another (``busybox`` running ``sleep 3600``)
in one pod and reports the median start; the table prints each as a ratio to the bare spawn,
and the sandboxed one to the unsandboxed one in its note. Needs root for the sandboxed figure
(``sandbox="on"`` refuses to start otherwise, and the scenario fails saying why).

Not measured: pod created -> Running through the apiserver (``startup-churn-process`` does
that), exec latency, teardown.

``python -m bench.pod_start_sandbox [--quick]`` prints the three side by side; ``python -m
bench --only pod-start-sandbox`` puts them in the suite's table.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from bench.harness import Context, Figure, collect_rounds, figure, run_alone
from services.kubelet.runtime.base import ContainerConfig, PodSandbox
from services.kubelet.runtime.images import ImageCatalog, ImageStore
from services.kubelet.runtime.process import ProcessRuntime

__all__ = ["main", "measure", "run"]

SCENARIO = "pod-start-sandbox"
POD = PodSandbox(uid="bench-pod-start", namespace="bench", name="starter")
COMMAND = ("sleep", "3600")
POD_CIDR = "127.240.0.0/24"


def _bare_spawn_seconds() -> float:
    sleep = shutil.which(COMMAND[0]) or COMMAND[0]
    started = time.perf_counter()
    pid = os.posix_spawn(sleep, list(COMMAND), {"PATH": os.defpath})
    elapsed = time.perf_counter() - started
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return elapsed


async def _runtime_starts(workdir: Path, *, sandbox: str, count: int) -> list[float]:
    state = Path(tempfile.mkdtemp(prefix=f"start-{sandbox}-", dir=workdir))
    images = ImageStore(catalog=ImageCatalog(), state_dir=state)
    rt = ProcessRuntime(state_dir=state, pod_cidr=POD_CIDR, images=images, sandbox=sandbox)
    await rt.start()
    try:
        ref, _ = await rt.pull_image("busybox", policy="IfNotPresent")
        timings = []
        for index in range(count):
            config = ContainerConfig(name=f"c{index}", image="busybox", command=COMMAND)
            started = time.perf_counter()
            await rt.start_container(POD, config, image=ref)
            timings.append(time.perf_counter() - started)
        return timings
    finally:
        await rt.remove_pod_sandbox(POD.uid)
        await rt.close()
        shutil.rmtree(state, ignore_errors=True)


async def measure(workdir: Path, *, count: int) -> Mapping[str, float]:
    """One round: the median start (ms) of ``count`` containers in each way."""
    bare = [_bare_spawn_seconds() for _ in range(count)]
    plain = await _runtime_starts(workdir, sandbox="off", count=count)
    boxed = await _runtime_starts(workdir, sandbox="on", count=count)
    return {
        "bare posix_spawn": statistics.median(bare) * 1000,
        "unsandboxed": statistics.median(plain) * 1000,
        "sandboxed": statistics.median(boxed) * 1000,
    }


async def run(ctx: Context) -> list[Figure]:
    count = 10 if ctx.quick else 30
    rounds = await collect_rounds(
        lambda _index: measure(ctx.workdir, count=count), rounds=ctx.rounds
    )
    ceiling = f"{SCENARIO}/start bare posix_spawn"
    plain, boxed = statistics.median(rounds["unsandboxed"]), statistics.median(rounds["sandboxed"])
    note = f"median of {count} starts per round; x{boxed / plain:.2f} the unsandboxed start"
    return [
        figure(SCENARIO, "start bare posix_spawn", unit="ms", samples=rounds["bare posix_spawn"],
               note=f"sleep, spawned from this process; median of {count}"),
        figure(SCENARIO, "start unsandboxed", unit="ms", samples=rounds["unsandboxed"],
               ceiling=ceiling, note=f"shim up, container exec'd; median of {count} starts"),
        figure(SCENARIO, "start sandboxed", unit="ms", samples=rounds["sandboxed"],
               ceiling=ceiling, note=note),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    figures = run_alone(
        run,
        argv,
        prog="python -m bench.pod_start_sandbox",
        description=__doc__.split("\n")[0],
        quick_help="10 starts per round, 1 round",
    )
    bare = figures[0].median
    print(f"{'container start':<26} {'median':>9} {'min':>9} {'max':>9} {'x bare':>8}")
    for fig in figures:
        print(
            f"{fig.name:<26} {fig.median:>7.1f}ms {fig.min:>7.1f}ms {fig.max:>7.1f}ms "
            f"{fig.median / bare:>8.1f}"
        )
    print(figures[-1].note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
