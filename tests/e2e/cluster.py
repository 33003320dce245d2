"""A whole kubelite cluster of real processes, for end-to-end tests.

Why: the seed's pod-creation flow and the resync promises ("kill any component, change the
cluster, restart it: it catches up") only mean something across process boundaries. So this
starts *exactly* the command lines ``kubelite up`` starts (``kubelite.up.plan``), each as its own
OS process on loopback: the apiserver on a free port over SQLite in the test's tmp dir, the
controller-manager, the scheduler and N kubelets (process runtime, pod IPs from a loopback range
of this cluster's own, so two clusters on one machine never share a pod address).

What it offers a test:

* ``await cluster.kill(name)`` (SIGKILL, nothing runs on the way out) and
  ``await cluster.start(name)``; ``await cluster.stop()`` at the end stops everything the way
  ``kubelite up`` does (kubelets first, which stop their pods), then checks ``/proc``: any
  process still running under this cluster's directory or with a pod IP of its range is an
  orphan — it is killed and the teardown fails.
* ``ClusterView`` (what ``Cluster`` extends, usable on its own against any apiserver, e.g. one
  ``kubelite up`` started): informers on pods, nodes and replication controllers
  (``client.informer``), and ``await view.until(condition, within=..., what=...)``, which
  re-checks ``condition`` on every watch event, never on a timer;
* ``pod_processes()``: the live container processes of this cluster's pods, read from
  ``/proc`` (each container is its own process group carrying ``POD_NAME``/``POD_IP``).

Limits: Linux only (``/proc``, pidfds). Waiting for a fresh apiserver reads its "listening" line
from its output — an event — but a pod's web server gets a bounded connect retry, as nothing
announces that it has bound its port (the kubelet has no readiness probes yet).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import random
import signal
import socket
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import aiohttp

from api.registry import REGISTRY
from client.informer import Informer
from client.rest import ApiClient
from kubelite.up import Options, node_names, plan

__all__ = [
    "Cluster",
    "ClusterView",
    "Component",
    "free_port",
    "http_get",
    "leftover_processes",
    "loopback_pod_cidr",
    "phase",
    "pod_processes",
    "running",
]

ROOT = Path(__file__).resolve().parents[2]
PODS = REGISTRY.by_kind("", "Pod")
NODES = REGISTRY.by_kind("", "Node")
RCS = REGISTRY.by_kind("", "ReplicationController")
assert PODS and NODES and RCS

Obj = dict[str, Any]

START_TIMEOUT = 45.0
"""Seconds a fresh apiserver gets to print its listening line (2 shared cores, busy)."""
STOP_GRACE = 25.0
"""SIGTERM -> SIGKILL for a component at teardown; kubelets stop their pods (10 s each) first."""
LISTENING = b"apiserver listening on "


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def loopback_pod_cidr(nodes: int) -> str:
    """A loopback range of this cluster's own: 127.130-149.x.0, one /24 per node."""
    bits = max(nodes - 1, 0).bit_length()
    third = random.randrange(0, 256, 1 << bits)
    return f"127.{random.randint(130, 149)}.{third}.0/{24 - bits}"


@dataclass
class Component:
    """One process of the plan: the command line ``kubelite up`` would run, and its output."""

    name: str
    kind: str
    argv: list[str]
    log_path: Path
    cwd: Path
    process: asyncio.subprocess.Process | None = None
    starts: int = 0
    listening: asyncio.Event = field(default_factory=asyncio.Event)
    _pump: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> None:
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.listening.clear()
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            # the kubelet's shims inherit this working directory: that is how the orphan check
            # recognises them after the kubelet is gone
            cwd=self.cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)},
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self._pump = asyncio.create_task(
            self._copy_output(self.process.stdout), name=f"e2e output {self.name}"
        )

    async def _copy_output(self, stream: asyncio.StreamReader) -> None:
        with self.log_path.open("ab") as log:
            log.write(f"--- start #{self.starts}: {' '.join(self.argv)}\n".encode())
            while line := await stream.readline():
                log.write(line)
                log.flush()
                if line.startswith(LISTENING):
                    self.listening.set()

    async def kill(self) -> None:
        """SIGKILL: no shutdown handlers run; connections die mid-stream."""
        if self.running:
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
        await self._reap()

    async def stop(self, *, grace: float = STOP_GRACE) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds."""
        if self.running:
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), grace)
            except TimeoutError:
                await self.kill()
        await self._reap()

    async def _reap(self) -> None:
        if self.process is not None:
            await self.process.wait()
        if self._pump is not None:
            await self._pump
            self._pump = None

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        raw = fh.read()
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]


def _in(network: IPv4Network, ip: str) -> bool:
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(ip) in network
    return False


def leftover_processes(
    *, root: Path | None = None, network: IPv4Network | None = None, marker: str = ""
) -> dict[int, str]:
    """Live processes of a cluster: working directory under ``root``, a pod IP in ``network``,
    or ``marker`` in the command line. ``pid -> command line``."""
    found: dict[int, str] = {}
    top = str(root) if root is not None else ""
    for pid in _pids():
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{pid}/cwd")
            cmdline = (
                Path(f"/proc/{pid}/cmdline")
                .read_bytes()
                .replace(b"\0", b" ")
                .decode(errors="replace")
            )
            if (
                (top and (cwd == top or cwd.startswith(top + "/")))
                or (marker and marker in cmdline)
                or (network is not None and _in(network, _environ(pid).get("POD_IP", "")))
            ):
                found[pid] = cmdline[:200]
    return found


def pod_processes(network: IPv4Network) -> dict[str, set[int]]:
    """``"namespace/name"`` -> the process groups (one per live container) of that pod, for
    the pods whose IP is in ``network``."""
    groups: dict[str, set[int]] = defaultdict(set)
    for pid in _pids():
        with contextlib.suppress(OSError):
            env = _environ(pid)
            if not _in(network, env.get("POD_IP", "")):
                continue
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                continue
            groups[f"{env.get('POD_NAMESPACE')}/{env.get('POD_NAME')}"].add(os.getpgid(pid))
    return dict(groups)


class ClusterView:
    """What a test sees of a running cluster through its API: informers on pods, nodes and
    replication controllers, and ``until`` to await a condition on them."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.client = ApiClient(server=server)
        self.pods = Informer(self.client, PODS, name="e2e pods")
        self.node_objects = Informer(self.client, NODES, name="e2e nodes")
        self.rcs = Informer(self.client, RCS, name="e2e rcs")
        self._changed = asyncio.Event()
        for informer in (self.pods, self.node_objects, self.rcs):
            informer.add_handler(
                on_add=lambda _o: self._changed.set(),
                on_update=lambda _o, _n: self._changed.set(),
                on_delete=lambda _o: self._changed.set(),
            )
        self._informer_tasks: list[asyncio.Task[None]] = []

    async def watch(self) -> None:
        """Start the informers and wait until each has listed."""
        self._informer_tasks = [i.start() for i in (self.pods, self.node_objects, self.rcs)]
        await asyncio.gather(*(i.wait_synced() for i in (self.pods, self.node_objects, self.rcs)))

    async def close(self) -> None:
        for task in self._informer_tasks:
            task.cancel()
        await asyncio.gather(*self._informer_tasks, return_exceptions=True)
        await self.client.close()

    async def until(self, condition: Callable[[], bool], *, within: float, what: str) -> None:
        """Await ``condition()`` becoming true, re-checked on every watch event."""

        async def wait() -> None:
            while not condition():
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(wait(), within)
        except TimeoutError:
            raise AssertionError(
                f"timed out after {within}s waiting for {what}\npods: {self.summary()}"
            ) from None

    def node_ready(self, name: str) -> bool:
        node = self.node_objects.get(name) or {}
        conditions = (node.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def live_pods(self, *, label: str | None = None) -> list[Obj]:
        """Pods not being deleted, optionally with ``label`` (``key=value``)."""
        key, _, value = (label or "").partition("=")
        return [
            p
            for p in self.pods.list()
            if not p["metadata"].get("deletionTimestamp")
            and (not key or (p["metadata"].get("labels") or {}).get(key) == value)
        ]

    def pod(self, name: str, namespace: str = "default") -> Obj | None:
        return self.pods.get(f"{namespace}/{name}")

    def summary(self) -> str:
        rows = []
        for p in sorted(self.pods.list(), key=lambda p: p["metadata"]["name"]):
            status = p.get("status") or {}
            rows.append(
                f"{p['metadata']['name']}:{status.get('phase')}@{p['spec'].get('nodeName') or '-'}"
                f"{'(deleting)' if p['metadata'].get('deletionTimestamp') else ''}"
            )
        return ", ".join(rows) or "(none)"


class Cluster(ClusterView):
    """``Cluster(root=tmp_path)``; ``await start_all()``; ... ; ``await stop()``."""

    def __init__(self, *, root: Path, nodes: int = 2) -> None:
        self.root = root
        self.port = free_port()
        self.pod_cidr = loopback_pod_cidr(nodes)
        self.network = IPv4Network(self.pod_cidr)
        self.nodes = node_names(nodes)
        self.options = Options(
            state_dir=root / "state",
            port=self.port,
            bind_address="127.0.0.1",
            nodes=nodes,
            runtime="process",
            store=f"sqlite:///{root / 'state' / 'kubelite.db'}",
            kubelet_port=0,
            scheduler_port=0,
            controller_manager_port=0,
            pod_cidr=self.pod_cidr,
            colour=False,
            log_level="info",
            ready_timeout=60.0,
        )
        self.components = {
            child.name: Component(
                name=child.name,
                kind=child.kind,
                argv=child.argv,
                log_path=root / f"{child.name}.log",
                cwd=root / "run" / child.name,
            )
            for child in plan(self.options)
        }
        super().__init__(self.options.server)

    # ---- processes -------------------------------------------------------------------------

    async def start(self, name: str) -> None:
        component = self.components[name]
        await component.start()
        if component.kind == "apiserver":
            await self._wait_listening(component)

    async def _wait_listening(self, component: Component) -> None:
        assert component.process is not None
        exited = asyncio.create_task(component.process.wait(), name="e2e apiserver exit")
        listening = asyncio.create_task(component.listening.wait(), name="e2e apiserver up")
        try:
            done, _ = await asyncio.wait(
                {exited, listening}, timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            exited.cancel()
            listening.cancel()
        if listening not in done:
            raise AssertionError(f"the apiserver did not start:\n{component.tail()}")

    async def kill(self, name: str) -> None:
        await self.components[name].kill()

    async def start_all(self) -> None:
        """The apiserver, then everything else; returns once every node is Ready."""
        await self.start("apiserver")
        await asyncio.gather(*(self.start(n) for n in self.components if n != "apiserver"))
        await self.watch()
        await self.until(
            lambda: all(self.node_ready(n) for n in self.nodes),
            within=60,
            what="every node Ready",
        )

    async def stop(self) -> None:
        """Stop as ``kubelite up`` does, then fail if any process of this cluster survived."""
        try:
            await self.close()
            groups = [["kubelet"], ["controller-manager", "scheduler"], ["apiserver"]]
            for kinds in groups:
                await asyncio.gather(
                    *(c.stop() for c in self.components.values() if c.kind in kinds)
                )
        finally:
            leftovers = self.orphans()
            for pid in leftovers:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if leftovers:
            raise AssertionError(f"processes outlived the cluster: {leftovers}")

    def orphans(self) -> dict[int, str]:
        """Live processes of this cluster; empty once it has stopped cleanly."""
        return leftover_processes(root=self.root, network=self.network)

    def pod_processes(self) -> dict[str, set[int]]:
        return pod_processes(self.network)


def phase(pod: Obj | None) -> str | None:
    return ((pod or {}).get("status") or {}).get("phase")


def running(pod: Obj | None) -> bool:
    return phase(pod) == "Running" and bool(((pod or {}).get("status") or {}).get("podIP"))


async def http_get(url: str, *, within: float = 15.0) -> tuple[int, str]:
    """GET ``url``; a refused connection (a server still binding its port) is retried briefly."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            try:
                async with session.get(url) as r:
                    return r.status, await r.text()
            except aiohttp.ClientConnectorError:
                if loop.time() > deadline:
                    raise
            await asyncio.sleep(0.1)  # bounded: nothing announces that the port is bound
