"""A real kubelite cluster for one benchmark scenario: started, measured, always torn down.

Why: end-to-end and scale figures only mean something with the real processes talking over
real HTTP — ``python -m services.apiserver``, ``services.scheduler``,
``services.controller_manager`` and ``services.kubelet --runtime sim --nodes M`` (one process
hosting many simulated nodes, as kwok does) or, with ``runtime="process"``, one
``services.kubelet --runtime process`` per node whose containers are real OS processes — each
its own OS process, on free loopback ports, with its state in a temporary directory.

What it owns:

* each process is a ``kubelite.testing.ComponentProcess`` (the tests' launcher): its output
  copied into a log file under the work dir, started once its ready line is printed, its port
  read back from it; ``rss_bytes()`` and ``cpu_seconds()`` read ``/proc/<pid>``; ``stop()`` is
  SIGTERM, then SIGKILL after its grace;
* ``Cluster``: the components and the apiserver URL; ``wait_nodes_ready(n)`` watches nodes
  (an informer, no polling) until ``n`` report ``Ready=True``;
* ``running_cluster(...)``: the async context manager that starts apiserver -> scheduler ->
  controller-manager -> kubelets and stops them in reverse order however the block ends;
* ``kubelet_argv(...)``: a kubelet's command line. Process-runtime kubelets get a pod range of
  their own inside 127.0.0.0/8 and ``--stop-pods-on-exit``, so no container outlives the run;
  any that still does (a kubelet killed before it could stop them) is found by its working
  directory, which lies in the scenario's work dir, and killed by its pid
  (``kill_leftover_containers``).

What it does not do: restart crashed components (a crash fails the scenario, with the tail of
the log in the error), or pin processes to cores — every process shares the machine. Process
containers are isolated from nothing (see ``services.kubelet.runtime.process``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from api.registry import REGISTRY, ResourceType
from bench.profile import profiling
from client.informer import Informer
from client.rest import ApiClient
from kubelite import commands
from kubelite.testing import components
from kubelite.testing.process import ComponentFailed, ComponentProcess

__all__ = [
    "Cluster",
    "ComponentFailed",
    "Runtime",
    "kill_leftover_containers",
    "kubelet_argv",
    "resource",
    "running_cluster",
]

Runtime = Literal["sim", "process"]

log = logging.getLogger("bench.cluster")

ROOT = Path(__file__).resolve().parents[1]


def resource(group: str, kind: str) -> ResourceType:
    """The registered resource type of ``kind`` (a bench bug if it is not registered)."""
    rt = REGISTRY.by_kind(group, kind)
    if rt is None:
        raise LookupError(f"no resource type {kind!r} in group {group!r}")
    return rt


NODES = resource("", "Node")


@dataclass(slots=True)
class Cluster:
    workdir: Path
    components: list[ComponentProcess] = field(default_factory=list)

    @property
    def apiserver(self) -> ComponentProcess:
        return self.components[0]

    @property
    def url(self) -> str:
        return self.apiserver.url

    def component(self, name: str) -> ComponentProcess:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def check_alive(self) -> None:
        for c in self.components:
            if not c.running:
                raise ComponentFailed(f"{c.name} exited:\n{c.tail()}")

    def rss(self) -> dict[str, int]:
        return {c.name: c.rss_bytes() for c in self.components if c.running}

    def cpu(self) -> dict[str, float]:
        return {c.name: c.cpu_seconds() for c in self.components if c.running}

    async def add(self, component: ComponentProcess) -> ComponentProcess:
        self.components.append(component)
        await component.astart()
        return component

    async def wait_nodes_ready(self, count: int, *, within: float) -> float:
        """Watch nodes until ``count`` are Ready; seconds it took."""
        start = time.perf_counter()
        ready: set[str] = set()
        enough = asyncio.Event()

        def saw(obj: Mapping[str, Any]) -> None:
            conditions = (obj.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                ready.add(obj["metadata"]["name"])
                if len(ready) >= count:
                    enough.set()

        async with ApiClient(server=self.url) as client:
            informer = Informer(client, NODES, name="bench nodes")
            informer.add_handler(on_add=saw, on_update=lambda _old, new: saw(new))
            task = informer.start()
            try:
                await self.wait_for(
                    enough, within=within, what=f"{count} Ready nodes ({len(ready)})"
                )
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        return time.perf_counter() - start

    async def wait_for(self, event: asyncio.Event, *, within: float, what: str) -> None:
        """Wait for ``event``; fail early, with its log, if a component dies meanwhile."""
        deadline = time.monotonic() + within
        while not event.is_set():
            self.check_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {what} after {within:.0f}s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(remaining, 2.0))

    async def stop(self) -> None:
        for component in reversed(self.components):
            try:
                await component.astop()
            except Exception:
                log.exception("stopping %s failed; going on with the rest", component.name)


def _store_url(store: str, workdir: Path) -> str:
    if store == "memory":
        return "memory://"
    if store == "sqlite":
        return f"sqlite:///{workdir}/kubelite.db"
    return store


def process_pod_cidr(index: int) -> str:
    """A /24 inside 127.0.0.0/8 for process kubelet ``index`` (up to 256 per run).

    Taken from 127.200-127.255 by this process's pid, away from the ranges a kubelite cluster
    hands out by default (127.1-127.63 by node number, 127.64-127.127 hashed, 127.128+ sim),
    so a bench run beside someone's cluster does not give out their pods' addresses."""
    if not 0 <= index < 256:
        raise ValueError(f"process kubelet index {index} out of range")
    return f"127.{200 + os.getpid() % 56}.{index}.0/24"


def kubelet_argv(
    *, server: str, runtime: Runtime, index: int, nodes: int, workdir: Path, max_pods: int,
    sim_start_delay: float = 0.0, extra: Sequence[str] = (),
) -> list[str]:  # fmt: skip
    """The command line of kubelet ``index``: ``nodes`` sim nodes, or one process node."""
    if runtime == "process" and nodes != 1:
        raise ValueError("a process kubelet hosts exactly one node")
    sim = runtime == "sim"
    return commands.kubelet(
        server=server, port=0, state_dir=workdir / f"kubelet-{index}", cpu="64",
        memory="256Gi", max_pods=max_pods, runtime=runtime,
        nodes=nodes if sim else None,
        node_name=f"sim{index}" if sim else f"bench-proc-{index}",
        sim_start_delay=sim_start_delay if sim else None,
        pod_cidr=None if sim else process_pod_cidr(index),
        stop_pods_on_exit=not sim, healthz_port=0, extra=extra,
    ).python()  # fmt: skip


def kill_leftover_containers(workdir: Path) -> list[int]:
    """SIGKILL every process whose working directory lies under ``workdir``; their pids.

    A process container's working directory is its pod's directory in the kubelet's state dir
    (inside ``workdir``), so this finds exactly the containers this run started that a kubelet
    failed to stop; nothing else works in a fresh bench directory."""
    root = workdir.resolve()
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = (entry / "cwd").resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if cwd == root or root in cwd.parents:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    return killed


@contextlib.asynccontextmanager
async def running_cluster(
    *,
    workdir: Path,
    nodes: int,
    store: str = "sqlite",
    runtime: Runtime = "sim",
    kubelet_processes: int = 1,
    scheduler: bool = True,
    controller_manager: bool = True,
    max_pods: int = 110,
    sim_start_delay: float = 0.0,
    watch_cache_size: int | None = None,
    extra_apiserver_args: Sequence[str] = (),
    profile: Collection[str] = (),
) -> AsyncIterator[Cluster]:
    """Start a cluster of ``nodes`` nodes and wait until they are Ready; stop every process on
    the way out, in reverse order. ``runtime="sim"``: the nodes are split over
    ``kubelet_processes`` sim kubelets (``sim_start_delay`` seconds to Running);
    ``runtime="process"``: one process kubelet per node, containers real OS processes.

    ``profile`` names components (``apiserver``, ``scheduler``, ``controller-manager``,
    ``kubelet``) to record with py-spy from the moment the nodes are Ready until the block ends:
    ``<workdir>/profile-<component>.txt`` (``bench.profile``)."""
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    cluster = Cluster(workdir=workdir)
    quiet = "WARNING"
    try:
        # the apiserver's own watch cache size unless asked: RSS figures must be those of a
        # default install
        cache = [f"--watch-cache-size={watch_cache_size}"] if watch_cache_size else []
        await cluster.add(components.apiserver(
            store=_store_url(store, workdir), state_dir=workdir / "apiserver",
            log_path=workdir / "apiserver.log", cwd=ROOT,
            args=[*cache, f"--log-level={quiet}", *extra_apiserver_args],
        ))  # fmt: skip
        server = cluster.url
        quietly = ["--leader-elect=false", f"--log-level={quiet}"]
        if scheduler:
            await cluster.add(components.scheduler(
                server=server, log_path=workdir / "scheduler.log", args=quietly, cwd=ROOT
            ))  # fmt: skip
        if controller_manager:
            await cluster.add(components.controller_manager(
                server=server, log_path=workdir / "controller-manager.log", args=quietly, cwd=ROOT
            ))  # fmt: skip
        processes = nodes if runtime == "process" else kubelet_processes
        per_process = [nodes // processes + (i < nodes % processes) for i in range(processes)]
        for index, count in enumerate(n for n in per_process if n):
            name = f"kubelet-{index}"
            argv = kubelet_argv(server=server, runtime=runtime, index=index, nodes=count,
                                workdir=workdir, max_pods=max_pods,
                                sim_start_delay=sim_start_delay,
                                extra=("--log-level=WARNING",))  # fmt: skip
            # a process kubelet stops its containers (10 s grace each, in parallel) first
            stop_grace = 30.0 if runtime == "process" else 10.0
            await cluster.add(ComponentProcess(
                argv, name=name, component="kubelet", endpoint="server",
                log_path=workdir / f"{name}.log", cwd=ROOT, stop_grace=stop_grace,
            ))  # fmt: skip
        if nodes:
            await cluster.wait_nodes_ready(nodes, within=60 + nodes / 10)
        async with contextlib.AsyncExitStack() as profilers:
            for component in cluster.components:
                if component.name in profile or component.name.split("-")[0] in profile:
                    out = workdir / f"profile-{component.name}.txt"
                    await profilers.enter_async_context(profiling(pid=component.pid, out=out))
            yield cluster
    finally:
        await cluster.stop()
        if runtime == "process":
            leftover = await asyncio.to_thread(kill_leftover_containers, workdir)
            if leftover:
                log.warning("killed %d container process(es) no kubelet stopped: %s",
                            len(leftover), leftover)  # fmt: skip
