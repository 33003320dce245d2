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
  ``/proc`` (each container is its own process group carrying ``POD_NAME``/``POD_IP``);
* ``UpProcess``: the real ``python -m kubelite up`` as a subprocess, every line it printed,
  and waits that wake on each new line (a pattern printed, the banner, the exit on SIGINT).

Processes are ``kubelite.testing.ComponentProcess``es: the apiserver starts on port 0 and a
free secure port, and the others reach that secure port as themselves with the kubeconfigs
written for it, as under ``kubelite up`` (the test's own view uses the plain port); each
start returns once the component printed its ready line (an event). Limits: Linux only (``/proc``, pidfds). A pod's web server gets a bounded connect
retry, as nothing announces that it has bound its port.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import random
import re
import signal
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import aiohttp

from api.registry import REGISTRY
from client.informer import Informer
from client.rest import ApiClient
from kubelite.cluster_pki import write_kubeconfigs
from kubelite.testing import ComponentProcess
from kubelite.testing.waiting import Changes, apoll_until
from kubelite.up import STOP_ORDER, Options, ensure_pki, node_names, plan

__all__ = [
    "Cluster",
    "ClusterView",
    "UpProcess",
    "banner_api_url",
    "http_get",
    "leftover_processes",
    "loopback_pod_cidr",
    "phase",
    "pod_processes",
    "running",
    "started_cluster",
]

ROOT = Path(__file__).resolve().parents[2]
PODS = REGISTRY.by_kind("", "Pod")
NODES = REGISTRY.by_kind("", "Node")
RCS = REGISTRY.by_kind("", "ReplicationController")
assert PODS and NODES and RCS

Obj = dict[str, Any]

START_TIMEOUT = 45.0
"""Seconds a component gets to print its ready line (2 shared cores, busy)."""
STOP_GRACE = 25.0
"""SIGTERM -> SIGKILL for a component at teardown; kubelets stop their pods (10 s each) first."""
BANNER = "kubelite is up: "


def banner_api_url(lines: Iterable[str]) -> str:
    """The apiserver's URL from ``kubelite up``'s banner (``API at http://H:P``): started with
    ``--port 0``, it binds any free port and says which."""
    for line in lines:
        if m := re.search(r"API at (http://[^\s:/]+:\d+)", line):
            return m[1]
    raise AssertionError("no API URL in kubelite up's banner")


class UpProcess:
    """One ``python -m kubelite up`` subprocess and every line it has printed (also appended to
    ``log``); each wait re-checks on every new line, never on a timer."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.argv = argv
        self.log = log
        self.lines: list[str] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._banner = asyncio.Event()
        self._new_line = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = asyncio.create_task(self._read(), name="e2e: kubelite up's output")

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with self.log.open("a") as log:
            while raw := await self.proc.stdout.readline():
                line = raw.decode(errors="replace").rstrip("\n")
                self.lines.append(line)
                log.write(line + "\n")
                if BANNER in line:
                    self._banner.set()
                self._new_line.set()

    async def until(
        self, printed: Callable[[list[str]], bool], *, within: float, what: str
    ) -> None:
        """Until ``printed(lines so far)`` holds, checked on every new line."""

        async def wait() -> None:
            while not printed(self.lines):
                self._new_line.clear()
                await self._new_line.wait()

        try:
            await asyncio.wait_for(wait(), within)
        except TimeoutError:
            raise AssertionError(
                f"kubelite up never printed {what}:\n" + "\n".join(self.lines[-60:])
            ) from None

    async def wait_line(self, pattern: str, *, count: int = 1, within: float = 60.0) -> None:
        """Until ``count`` printed lines match the regular expression ``pattern``."""
        await self.until(
            lambda lines: sum(1 for line in lines if re.search(pattern, line)) >= count,
            within=within,
            what=f"{pattern!r} x{count}",
        )

    async def wait_banner(self, *, within: float = 90.0) -> None:
        """Until the banner; fails at once if ``up`` exits first."""
        assert self.proc is not None
        exited = asyncio.create_task(self.proc.wait(), name="e2e: kubelite up's exit")
        banner = asyncio.create_task(self._banner.wait(), name="e2e: kubelite up's banner")
        try:
            done, _ = await asyncio.wait(
                {exited, banner}, timeout=within, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            exited.cancel()
            banner.cancel()
        assert banner in done, "no banner from kubelite up:\n" + "\n".join(self.lines[-60:])

    async def interrupt(self, *, within: float = 90.0) -> int:
        """SIGINT, as Ctrl-C in a terminal (unless ``up`` already exited); the exit code once
        every line is read."""
        assert self.proc is not None and self._reader is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(self.proc.wait(), within)
        await self._reader
        return code

    async def kill(self) -> None:
        """SIGKILL if still running: the teardown of a test that failed half-way."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            await self._reader


def loopback_pod_cidr(nodes: int) -> str:
    """A loopback range of this cluster's own: 127.130-149.x.0, one /24 per node."""
    bits = max(nodes - 1, 0).bit_length()
    third = random.randrange(0, 256, 1 << bits)
    return f"127.{random.randint(130, 149)}.{third}.0/{24 - bits}"


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
        self.changes = Changes(
            self.pods, self.node_objects, self.rcs, describe=lambda: f"pods: {self.summary()}"
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
        await self.changes.until(condition, what=what, within=within)

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
        self.port = 0
        """The apiserver's port: 0 (any) at first, then the one it bound, kept for restarts."""
        self.secure_port = 0
        """Its secure port, likewise: the one every other component's kubeconfig names."""
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
            proxy_port=0,
            dns_health_port=0,
            secure_port=0,
            pod_cidr=self.pod_cidr,
            colour=False,
            log_level="info",
            ready_timeout=60.0,
        )
        self.viewing = False
        """The ``ClusterView`` half is set up once the apiserver's port is known."""
        self.kinds = {child.name: child.kind for child in plan(self.options)}
        self.components = {
            name: ComponentProcess(
                self._argv(name),
                name=name,
                component=kind,
                endpoint={"apiserver": "api", "kubelet": "server"}.get(kind, "health"),
                log_path=root / f"{name}.log",
                # the kubelet's shims inherit this working directory: that is how the orphan
                # check recognises them after the kubelet is gone
                cwd=root / "run" / name,
                env={"PYTHONPATH": str(ROOT)},
                new_session=True,
                ready_timeout=START_TIMEOUT,
            )
            for name, kind in self.kinds.items()
        }

    def _argv(self, name: str) -> Callable[[object], list[str]]:
        """``kubelite up``'s command line for ``name``, with the apiserver's real port."""

        def build(_ports: object) -> list[str]:
            opts = replace(self.options, port=self.port, secure_port=self.secure_port)
            return next(child.argv for child in plan(opts) if child.name == name)

        return build

    # ---- processes -------------------------------------------------------------------------

    async def start(self, name: str) -> None:
        """Start ``name`` (the apiserver: until it is ready, then on the same port always)."""
        await self.components[name].astart()
        if self.kinds[name] == "apiserver":
            self.port = self.components[name].port
            self.secure_port = self.components[name].port_of("secure")

    async def kill(self, name: str) -> None:
        await self.components[name].akill()

    async def start_all(self) -> None:
        """The apiserver, then everything else; returns once every node is Ready."""
        pki = await asyncio.to_thread(ensure_pki, self.options)
        await self.start("apiserver")
        # as kubelite up does: every other component reaches the secure port as itself
        server = f"https://127.0.0.1:{self.secure_port}"
        write_kubeconfigs(self.options.state_dir, pki, server=server)
        ClusterView.__init__(self, f"http://127.0.0.1:{self.port}")
        self.viewing = True
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
            if self.viewing:
                await self.close()
            for kinds in STOP_ORDER:
                await asyncio.gather(
                    *(
                        c.astop(grace=STOP_GRACE)
                        for name, c in self.components.items()
                        if self.kinds[name] in kinds
                    )
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


@contextlib.asynccontextmanager
async def started_cluster(root: Path) -> AsyncIterator[Cluster]:
    """A started ``Cluster`` (every node Ready) under ``root``, stopped (and checked for
    orphans) on the way out; a start that fails shows each component's log tail."""
    c = Cluster(root=root)
    try:
        try:
            await c.start_all()
        except Exception as exc:
            tails = "\n".join(f"===== {x.name}\n{x.tail()}" for x in c.components.values())
            raise AssertionError(f"the cluster did not come up: {exc}\n{tails}") from exc
        yield c
    finally:
        await c.stop()


def phase(pod: Obj | None) -> str | None:
    return ((pod or {}).get("status") or {}).get("phase")


def running(pod: Obj | None) -> bool:
    return phase(pod) == "Running" and bool(((pod or {}).get("status") or {}).get("podIP"))


async def http_get(url: str, *, within: float = 15.0) -> tuple[int, str]:
    """GET ``url``; a refused connection (a server still binding its port: nothing announces
    it) is retried until ``within`` (``apoll_until``)."""
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def answer() -> tuple[int, str] | None:
            try:
                async with session.get(url) as r:
                    return r.status, await r.text()
            except aiohttp.ClientConnectorError:
                return None

        got = await apoll_until(answer, what=f"an answer from {url}", within=within, every=0.1)
        assert got is not None
        return got
