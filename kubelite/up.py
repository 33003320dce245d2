"""``kubelite up``: the whole cluster as separate OS processes under one supervisor.

What it owns: one child process per component — the apiserver, the controller-manager, the
scheduler and one kubelet per node — each started as ``python -m services.<name>`` exactly as a
person would start it by hand, so the processes talk only through the apiserver, as in a real
cluster. The supervisor

* prefixes every line a child prints with the child's name (coloured on a terminal);
* restarts a child that dies, after a jittered back-off that grows while it keeps dying and
  resets once it has stayed up for a while, and says so;
* waits until the apiserver answers ``/readyz`` and every node reports Ready, then prints where
  the API is, the kubeconfig it wrote, and commands to try;
* on Ctrl-C or SIGTERM stops the kubelets first (they stop their pods), then the controllers,
  then the apiserver, escalating to SIGKILL for any child that outlives its grace period.

All state lives under ``--state-dir`` (the SQLite store, each kubelet's pod state), so a second
``kubelite up`` on the same directory resumes the cluster as it was.

What it does not do: it is not a production init system. It watches its own children only;
a child that forks and detaches is that child's business.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

COLOURS = ("36", "33", "35", "32", "34", "31", "96", "93", "95", "92")

# Back-off for a crashing child: 1 s doubling to 30 s, reset after 60 s of healthy running.
RESTART_INITIAL = 1.0
RESTART_MAX = 30.0
RESTART_RESET_AFTER = 60.0
# How long each child gets to exit after SIGTERM before SIGKILL. Kubelets stop their pods'
# processes on the way out, which can take a pod's whole termination grace period.
STOP_GRACE = {"kubelet": 35.0}
DEFAULT_STOP_GRACE = 10.0


@dataclass(frozen=True, slots=True)
class Options:
    state_dir: Path
    port: int
    bind_address: str
    nodes: int
    runtime: str
    store: str
    kubelet_port: int
    colour: bool
    log_level: str
    ready_timeout: float

    @property
    def server(self) -> str:
        return f"http://{self.bind_address}:{self.port}"


@dataclass
class Child:
    """One supervised component: its command line and its running process, if any."""

    name: str
    kind: str
    argv: list[str]
    colour: str
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0
    stopping: bool = False
    exited: asyncio.Event = field(default_factory=asyncio.Event)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite up",
        description="Start a local kubelite cluster: apiserver, controller-manager, scheduler and "
        "N kubelets as supervised OS processes. Ctrl-C stops everything; running it again on the "
        "same --state-dir resumes the cluster.",
    )
    p.add_argument(
        "--state-dir",
        default="./.kubelite",
        help="where the store, the kubeconfig and each kubelet's state live (default ./.kubelite)",
    )
    p.add_argument(
        "--port", type=int, default=8080, help="the apiserver's plain-HTTP port (default 8080)"
    )
    p.add_argument(
        "--bind-address",
        default="127.0.0.1",
        help="address the apiserver's HTTP port binds to (default 127.0.0.1, local only)",
    )
    p.add_argument(
        "--nodes", type=int, default=2, help="number of kubelets: node1..nodeN (default 2)"
    )
    p.add_argument(
        "--runtime",
        choices=("process", "sim"),
        default="process",
        help="kubelet runtime: real OS processes, or simulated containers (default process)",
    )
    p.add_argument(
        "--store",
        default=None,
        help="store URL: memory://, sqlite:///path.db, etcd://host:2379 "
        "(default sqlite:///<state-dir>/kubelite.db)",
    )
    p.add_argument(
        "--kubelet-port",
        type=int,
        default=10250,
        help="port of node1's kubelet server; nodeK uses this + K-1 (default 10250)",
    )
    p.add_argument(
        "--no-color", action="store_true", help="never colour the log prefixes (default: on a TTY)"
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="log level passed to every component (default info)",
    )
    p.add_argument(
        "--ready-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the apiserver and every node to be ready (default 60)",
    )
    return p


def parse_options(argv: Sequence[str]) -> Options:
    ns = build_parser().parse_args(list(argv))
    if ns.nodes < 0:
        raise SystemExit("kubelite up: --nodes must be >= 0")
    state_dir = Path(ns.state_dir).resolve()
    store = ns.store or f"sqlite:///{state_dir / 'kubelite.db'}"
    return Options(
        state_dir=state_dir,
        port=ns.port,
        bind_address=ns.bind_address,
        nodes=ns.nodes,
        runtime=ns.runtime,
        store=store,
        kubelet_port=ns.kubelet_port,
        colour=not ns.no_color and sys.stdout.isatty(),
        log_level=ns.log_level,
        ready_timeout=ns.ready_timeout,
    )


def node_names(count: int) -> list[str]:
    return [f"node{i}" for i in range(1, count + 1)]


def plan(opts: Options) -> list[Child]:
    """The children to start, in start order (the apiserver first, kubelets last)."""
    py = [sys.executable, "-m"]
    level = ["--log-level", opts.log_level]
    children = [
        (
            "apiserver",
            "apiserver",
            [
                *py,
                "services.apiserver",
                "--store",
                opts.store,
                "--state-dir",
                str(opts.state_dir),
                "--insecure-bind-address",
                opts.bind_address,
                "--insecure-port",
                str(opts.port),
                *level,
            ],
        ),
        (
            "controller-manager",
            "controller-manager",
            [*py, "services.controller_manager", "--server", opts.server, *level],
        ),
        ("scheduler", "scheduler", [*py, "services.scheduler", "--server", opts.server, *level]),
    ]
    for index, node in enumerate(node_names(opts.nodes)):
        children.append(
            (
                node,
                "kubelet",
                [
                    *py,
                    "services.kubelet",
                    "--server",
                    opts.server,
                    "--node-name",
                    node,
                    "--runtime",
                    opts.runtime,
                    "--state-dir",
                    str(opts.state_dir / "kubelets" / node),
                    "--port",
                    str(opts.kubelet_port + index),
                    *level,
                ],
            )
        )
    return [
        Child(name=name, kind=kind, argv=argv, colour=COLOURS[i % len(COLOURS)])
        for i, (name, kind, argv) in enumerate(children)
    ]


def kubeconfig(server: str) -> str:
    """A kubeconfig for the local cluster (plain HTTP on loopback, no credentials needed)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubelite", "cluster": {"server": server}}],
        "users": [{"name": "kubelite-admin", "user": {}}],
        "contexts": [
            {
                "name": "kubelite",
                "context": {
                    "cluster": "kubelite",
                    "user": "kubelite-admin",
                    "namespace": "default",
                },
            }
        ],
        "current-context": "kubelite",
        "preferences": {},
    }
    # JSON is valid YAML, and kubectl reads either.
    return json.dumps(doc, indent=2) + "\n"


class Supervisor:
    """Starts, watches, restarts and finally stops the children of one ``kubelite up``."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.children = plan(opts)
        self.width = max(len(c.name) for c in self.children)
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- output --------------------------------------------------------------------------
    def say(self, text: str) -> None:
        """A line from the supervisor itself."""
        prefix = "up".ljust(self.width)
        if self.opts.colour:
            prefix = f"\x1b[1m{prefix}\x1b[0m"
        sys.stdout.write(f"{prefix} | {text}\n")
        sys.stdout.flush()

    def _prefix(self, child: Child) -> str:
        name = child.name.ljust(self.width)
        return f"\x1b[{child.colour}m{name}\x1b[0m" if self.opts.colour else name

    async def _pump(self, child: Child, stream: asyncio.StreamReader) -> None:
        prefix = self._prefix(child)
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line longer than the reader's limit: print what we have
                line = await stream.read(65536)
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip("\n")
            sys.stdout.write(f"{prefix} | {text}\n")
            sys.stdout.flush()

    # -- lifecycle -----------------------------------------------------------------------
    async def _run_child(self, child: Child) -> None:
        """Keep one child running until the supervisor stops."""
        delay = RESTART_INITIAL
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            child.exited.clear()
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            child.process = await asyncio.create_subprocess_exec(
                *child.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                # Own session: a terminal's Ctrl-C reaches the supervisor only, which then
                # stops the children in order instead of all at once.
                start_new_session=True,
            )
            started = loop.time()
            assert child.process.stdout is not None
            await self._pump(child, child.process.stdout)
            code = await child.process.wait()
            child.exited.set()
            if self._stopping.is_set() or child.stopping:
                return
            if loop.time() - started > RESTART_RESET_AFTER:
                delay = RESTART_INITIAL
            child.restarts += 1
            wait = delay * random.uniform(0.8, 1.2)
            self.say(
                f"{child.name} exited with code {code}; restarting in {wait:.1f}s "
                f"(restart #{child.restarts})"
            )
            delay = min(delay * 2, RESTART_MAX)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=wait)

    async def _wait_ready(self) -> bool:
        """The apiserver answers /readyz and every node reports Ready (watched, not polled)."""
        deadline = asyncio.get_running_loop().time() + self.opts.ready_timeout
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=2)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            # The apiserver is a fresh process: its socket appears when it is listening, so a
            # bounded connect-retry is the one wait that cannot be an event.
            while True:
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(f"{self.opts.server}/readyz") as r:
                        if r.status == 200:
                            break
                if asyncio.get_running_loop().time() > deadline:
                    return False
                await asyncio.sleep(0.2)
            wanted = set(node_names(self.opts.nodes))
            if not wanted:
                return True
            remaining = max(1.0, deadline - asyncio.get_running_loop().time())
            try:
                return await asyncio.wait_for(self._watch_nodes_ready(session, wanted), remaining)
            except TimeoutError:
                return False

    async def _watch_nodes_ready(self, session: aiohttp.ClientSession, wanted: set[str]) -> bool:
        ready: set[str] = set()
        url = f"{self.opts.server}/api/v1/nodes"
        async with session.get(url) as r:
            listing = await r.json()
        for node in listing.get("items", []):
            if _is_ready(node):
                ready.add(node["metadata"]["name"])
        if wanted <= ready:
            return True
        rv = listing.get("metadata", {}).get("resourceVersion", "")
        params = {"watch": "true", "resourceVersion": rv}
        async with session.get(url, params=params) as r:
            buffer = b""
            async for chunk in r.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    node = event.get("object") or {}
                    name = (node.get("metadata") or {}).get("name")
                    if event.get("type") in ("ADDED", "MODIFIED") and _is_ready(node):
                        ready.add(name)
                    else:
                        ready.discard(name)
                    if wanted <= ready:
                        return True
        return wanted <= ready

    async def _stop(self) -> None:
        """Stop kubelets first (they stop their pods), then controllers, then the apiserver."""
        self._stopping.set()
        order = [
            [c for c in self.children if c.kind == "kubelet"],
            [c for c in self.children if c.kind in ("controller-manager", "scheduler")],
            [c for c in self.children if c.kind == "apiserver"],
        ]
        for group in order:
            await asyncio.gather(*(self._stop_child(c) for c in group))

    async def _stop_child(self, child: Child) -> None:
        child.stopping = True
        proc = child.process
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        grace = STOP_GRACE.get(child.kind, DEFAULT_STOP_GRACE)
        try:
            await asyncio.wait_for(proc.wait(), timeout=grace)
        except TimeoutError:
            self.say(f"{child.name} did not stop within {grace:.0f}s; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()

    async def run(self) -> int:
        opts = self.opts
        opts.state_dir.mkdir(parents=True, exist_ok=True)
        kubeconfig_path = opts.state_dir / "kubeconfig"
        kubeconfig_path.write_text(kubeconfig(opts.server))

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stopping.set)

        self.say(
            f"starting {len(self.children)} processes "
            f"(store {opts.store}, runtime {opts.runtime}, state in {opts.state_dir})"
        )
        for child in self.children:
            self._tasks.append(asyncio.create_task(self._run_child(child), name=f"up:{child.name}"))

        ready = asyncio.create_task(self._wait_ready(), name="up:wait-ready")
        stop = asyncio.create_task(self._stopping.wait(), name="up:stop")
        await asyncio.wait({ready, stop}, return_when=asyncio.FIRST_COMPLETED)
        if ready.done() and not self._stopping.is_set():
            if ready.result():
                self._banner(kubeconfig_path)
            else:
                self.say(
                    f"the cluster is not ready after {opts.ready_timeout:.0f}s; "
                    "still running — read the logs above"
                )
            await stop
        ready.cancel()
        self.say("stopping: kubelets first, then controllers, then the apiserver")
        await self._stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.say("stopped")
        return 0

    def _banner(self, kubeconfig_path: Path) -> None:
        opts = self.opts
        nodes = ", ".join(node_names(opts.nodes)) or "no nodes"
        lines = [
            f"kubelite is up: API at {opts.server} ({nodes} Ready)",
            f"kubeconfig: {kubeconfig_path}",
            "try:",
            f"  export KUBECONFIG={kubeconfig_path}",
            "  kubectl get nodes -o wide",
            "  kubectl run web --image=nginx && kubectl get pods -o wide -w",
            f"  curl -s {opts.server}/api/v1/namespaces/default/pods",
            "Ctrl-C stops the cluster; `kubelite up` again resumes it.",
        ]
        for line in lines:
            self.say(line)


def _is_ready(node: dict) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_options(sys.argv[1:] if argv is None else argv)
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency; asyncio works too
        runner = asyncio.run
    return runner(Supervisor(opts).run())


if __name__ == "__main__":
    sys.exit(main())
