"""``kubelite kubelet`` / ``python -m services.kubelet``: the node agent process.

Composition root: parses flags, builds the runtime(s), one ``NodeKubelet`` per node (one with
``--runtime process``; ``--nodes N`` simulated ones named ``<node-name>-0`` ... with
``--runtime sim``), the shared status manager and event recorders, and the kubelet HTTP server
for logs and exec — then runs them on uvloop until SIGTERM/SIGINT. Stopping the kubelet does not
stop containers: they keep running and a restarted kubelet re-adopts them from ``--state-dir`` —
unless ``--stop-pods-on-exit`` asks a clean stop (SIGTERM/SIGINT, never SIGKILL) to stop them
too, as ``kubelite up`` does when the whole cluster shuts down (pods keep their sandboxes and
addresses, so the next start restarts their containers in place).

The server is started first so the node can advertise its real port (``--port 0`` picks a free
one, which is what tests do).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import ipaddress
import logging
import signal
import socket
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from api.registry import REGISTRY
from client.events import EventRecorder
from client.informer import Informer
from client.kubeconfig import ClientConfig
from client.rest import ApiClient
from services.kubelet.agent import NodeKubelet
from services.kubelet.node_status import NodeConfig, host_pressure, host_resources
from services.kubelet.runtime.base import Runtime
from services.kubelet.runtime.images import DEFAULT_CATALOG, ImageCatalog, ImageStore
from services.kubelet.runtime.ipam import default_pod_cidr, sim_pod_cidr
from services.kubelet.runtime.process import ProcessRuntime
from services.kubelet.runtime.sim import SimRuntime
from services.kubelet.server import ServedPod, make_server_app
from services.kubelet.status_manager import StatusManager

__all__ = ["KubeletOptions", "KubeletService", "main", "parse_args"]

log = logging.getLogger("kubelet")

REGISTER_CONCURRENCY = 32
"""Simulated nodes registering at once: a thousand simultaneous POSTs overflow a listen backlog."""
STOP_PODS_GRACE = 10.0
"""With ``--stop-pods-on-exit``: seconds between SIGTERM and SIGKILL for each container."""


@dataclass(frozen=True, slots=True)
class KubeletOptions:
    server: str = "http://127.0.0.1:8080"
    kubeconfig: str | None = None
    node_name: str = field(default_factory=socket.gethostname)
    runtime: str = "process"
    state_dir: Path | None = None
    address: str = "127.0.0.1"
    port: int = 10250
    node_ip: str = "127.0.0.1"
    node_labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    cpu: str | None = None
    memory: str | None = None
    max_pods: int = 110
    pod_cidr: str | None = None
    image_catalog: Path = DEFAULT_CATALOG
    nodes: int = 1
    sim_start_delay: float = 0.0
    lease_interval: float = 10.0
    status_interval: float = 10.0
    status_workers: int | None = None
    """Concurrent pod-status writers; None sizes them by the nodes hosted (see ``__init__``)."""
    healthz_port: int = 10248
    stop_pods_on_exit: bool = False

    @property
    def resolved_state_dir(self) -> Path:
        return self.state_dir or Path(".kubelite") / f"kubelet-{self.node_name}"


def _labels(text: str) -> dict[str, str]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"invalid label {part!r}: want key=value")
        out[key] = value
    return out


def _taints(text: str) -> tuple[dict[str, str], ...]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        kv, sep, effect = part.rpartition(":")
        if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise argparse.ArgumentTypeError(
                f"invalid taint {part!r}: want key[=value]:NoSchedule|PreferNoSchedule|NoExecute"
            )
        key, _, value = kv.partition("=")
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        out.append(taint)
    return tuple(out)


def _resolve_node_ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(text)
    except OSError as exc:
        raise SystemExit(f"kubelite kubelet: --node-ip {text!r} does not resolve: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kubelite kubelet", description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default="http://127.0.0.1:8080", help="apiserver URL")
    p.add_argument("--kubeconfig", help="kubeconfig to read the server and credentials from")
    p.add_argument("--node-name", default=socket.gethostname(), help="this node's name")
    p.add_argument("--runtime", choices=("process", "sim"), default="process")
    p.add_argument(
        "--state-dir", type=Path, help="per-pod state (default ./.kubelite/kubelet-<node>)"
    )
    p.add_argument("--address", default="127.0.0.1", help="address the kubelet server binds")
    p.add_argument("--port", type=int, default=10250, help="kubelet server port (0: any free)")
    p.add_argument(
        "--node-ip",
        default="127.0.0.1",
        help="the node's InternalIP, or a host name resolved once at start (in a container: "
        "the container's own name, so the apiserver reaches this kubelet for logs and exec)",
    )
    p.add_argument(
        "--node-labels", type=_labels, default={}, help="k=v[,k=v...] added at registration"
    )
    p.add_argument(
        "--register-with-taints", type=_taints, default=(), help="key[=value]:Effect[,...]"
    )
    p.add_argument("--cpu", help="cpu capacity (default: the host's)")
    p.add_argument("--memory", help="memory capacity (default: the host's)")
    p.add_argument("--max-pods", type=int, default=110)
    p.add_argument(
        "--pod-cidr", help="pod IP range inside 127.0.0.0/8 (default from the node name)"
    )
    p.add_argument("--image-catalog", type=Path, default=DEFAULT_CATALOG)
    p.add_argument("--nodes", type=int, default=1, help="simulated nodes to host (sim runtime)")
    p.add_argument("--sim-start-delay", type=float, default=0.0, help="seconds until Running (sim)")
    p.add_argument("--node-lease-renew-interval", type=float, default=10.0)
    p.add_argument("--node-status-update-frequency", type=float, default=10.0)
    p.add_argument(
        "--stop-pods-on-exit",
        action="store_true",
        help="on SIGTERM/SIGINT also stop every container (default: they keep running)",
    )
    p.add_argument(
        "--healthz-port",
        type=int,
        default=10248,
        help="plain /healthz on 127.0.0.1 (0 disables; a port in use is skipped with a warning)",
    )
    p.add_argument("-v", "--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    return p


def parse_args(argv: Sequence[str]) -> tuple[KubeletOptions, str]:
    a = build_parser().parse_args(list(argv))
    if a.runtime != "sim" and a.nodes != 1:
        raise SystemExit("kubelite kubelet: --nodes needs --runtime sim")
    level = str(a.log_level).upper()
    if level.isdigit():  # -v 4 style verbosity
        level = "DEBUG" if int(level) >= 4 else "INFO"
    return (
        KubeletOptions(
            server=a.server,
            kubeconfig=a.kubeconfig,
            node_name=a.node_name,
            runtime=a.runtime,
            state_dir=a.state_dir,
            address=a.address,
            port=a.port,
            node_ip=_resolve_node_ip(a.node_ip),
            node_labels=a.node_labels,
            taints=a.register_with_taints,
            cpu=a.cpu,
            memory=a.memory,
            max_pods=a.max_pods,
            pod_cidr=a.pod_cidr,
            image_catalog=a.image_catalog,
            nodes=a.nodes,
            sim_start_delay=a.sim_start_delay,
            lease_interval=a.node_lease_renew_interval,
            status_interval=a.node_status_update_frequency,
            stop_pods_on_exit=a.stop_pods_on_exit,
            healthz_port=a.healthz_port,
        ),
        level,
    )


class KubeletService:
    """Every node this process hosts, plus the shared server and status writer."""

    def __init__(self, options: KubeletOptions) -> None:
        self.options = options
        if options.kubeconfig:
            self.client = ApiClient(ClientConfig.load(kubeconfig=options.kubeconfig))
        else:
            self.client = ApiClient(server=options.server)
        # A real kubelet writes its own node's statuses; one sim process hosting N nodes must
        # write as many in parallel, or pods wait for their turn between bound and Running
        # (bench: 1,000 pods on 100 sim nodes, bound->Running p50 18 s with 4 writers, 2 s with 64).
        workers = options.status_workers or min(64, max(4, options.nodes))
        self.status = StatusManager(client=self.client, workers=workers)
        self.nodes: list[NodeKubelet] = []
        self.recorders: list[EventRecorder] = []
        self.runtimes: list[Runtime] = []
        self.port: int | None = None
        self.shared_informer: Informer | None = None
        self._by_name: dict[str, NodeKubelet] = {}
        self._runner: web.AppRunner | None = None
        self._healthz_runner: web.AppRunner | None = None

    # -- the server's PodLookup --------------------------------------------------------------

    def find_pod(self, *, namespace: str, name: str) -> tuple[ServedPod, Runtime] | None:
        for node in self.nodes:
            worker = node.find_worker(namespace=namespace, name=name)
            if worker is not None:
                return worker, node.runtime
        return None

    def served_pods(self) -> Iterable[dict[str, Any]]:
        for node in self.nodes:
            yield from node.pods()

    # -- building ----------------------------------------------------------------------------

    async def _start_server(self) -> int:
        app = make_server_app(self)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.options.address, self.options.port)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        return int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

    def _shared_informer(self) -> Informer:
        """One pod watch for every simulated node, routed by ``spec.nodeName``."""
        pods = REGISTRY.get("", "v1", "pods")
        assert pods is not None
        informer = Informer(
            self.client, pods, field_selector="spec.nodeName!=", name="pods@sim-nodes"
        )

        def node_of(pod: dict[str, Any]) -> NodeKubelet | None:
            return self._by_name.get((pod.get("spec") or {}).get("nodeName") or "")

        def on_pod(pod: dict[str, Any]) -> None:
            node = node_of(pod)
            if node is not None:
                node.on_pod(pod)

        def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
            on_pod(new)

        def on_delete(pod: dict[str, Any]) -> None:
            node = node_of(pod)
            if node is not None:
                node.on_delete(pod)

        informer.add_handler(on_add=on_pod, on_update=on_update, on_delete=on_delete)
        return informer

    async def _start_healthz(self) -> None:
        """The kubelet's separate healthz endpoint (10248 in Kubernetes), loopback only."""
        if not self.options.healthz_port:
            return
        app = web.Application()

        async def healthz(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app.router.add_get("/healthz", healthz)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", self.options.healthz_port).start()
        except OSError as exc:
            log.warning(
                "healthz port %d unavailable (%s); /healthz stays available on the kubelet port",
                self.options.healthz_port,
                exc.strerror or exc,
            )
            await runner.cleanup()
            return
        self._healthz_runner = runner

    async def _build_nodes(self, port: int) -> None:
        o = self.options
        cpu, memory = host_resources()
        state_dir = o.resolved_state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        names = [o.node_name] if o.runtime == "process" else (
            [f"{o.node_name}-{i}" for i in range(o.nodes)] if o.nodes > 1 else [o.node_name]
        )  # fmt: skip
        gate = None
        if len(names) > 1:
            self.shared_informer = self._shared_informer()
            gate = asyncio.Semaphore(REGISTER_CONCURRENCY)
        for index, name in enumerate(names):
            runtime: Runtime
            if o.runtime == "process":
                pod_cidr = o.pod_cidr or default_pod_cidr(name)
                images = ImageStore(catalog=ImageCatalog(path=o.image_catalog), state_dir=state_dir)
                proc = ProcessRuntime(state_dir=state_dir, pod_cidr=pod_cidr, images=images)
                await proc.start()
                runtime = proc
                pressure = lambda: host_pressure(str(state_dir))  # noqa: E731
            else:
                pod_cidr = o.pod_cidr if (o.pod_cidr and len(names) == 1) else sim_pod_cidr(index)
                runtime = SimRuntime(pod_cidr=pod_cidr, start_delay=o.sim_start_delay)
                pressure = dict
            recorder = EventRecorder(self.client, component="kubelet", host=name)
            self.recorders.append(recorder)
            self.runtimes.append(runtime)
            config = NodeConfig(
                name=name,
                kubelet_port=port,
                runtime_version=runtime.version,
                cpu=o.cpu or cpu,
                memory=o.memory or memory,
                pods=o.max_pods,
                internal_ip=o.node_ip,
                labels=o.node_labels,
                taints=o.taints,
                pod_cidr=pod_cidr,
            )
            self.nodes.append(
                NodeKubelet(
                    client=self.client,
                    config=config,
                    runtime=runtime,
                    status=self.status,
                    recorder=recorder,
                    pressure=pressure,
                    lease_interval=o.lease_interval,
                    status_interval=o.status_interval,
                    informer=self.shared_informer,
                    register_gate=gate,
                )
            )
            self._by_name[name] = self.nodes[-1]

    async def run(self) -> None:
        """Run until cancelled; containers keep running afterwards."""
        tasks: list[asyncio.Task[Any]] = []
        try:
            self.port = await self._start_server()
            await self._start_healthz()
            log.info(
                "kubelet server listening on %s:%d (logs, exec)", self.options.address, self.port
            )
            await self._build_nodes(self.port)
            tasks.append(asyncio.create_task(self.status.run(), name="pod status writer"))
            tasks += [r.start() for r in self.recorders]
            if self.shared_informer is not None:
                tasks.append(self.shared_informer.start())
            tasks += [
                asyncio.create_task(n.run(), name=f"node {n.config.name}") for n in self.nodes
            ]
            log.info(
                "kubelet: %d node(s) with the %s runtime against %s; registering",
                len(self.nodes),
                self.options.runtime,
                self.client.server,
            )
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                log.error("kubelet: %s ended unexpectedly", task.get_name())
                task.result()
        finally:
            for task in reversed(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.options.stop_pods_on_exit:
                await self._stop_containers()
            for runtime in self.runtimes:
                with contextlib.suppress(Exception):
                    await runtime.close()
            for runner in (self._runner, self._healthz_runner):
                if runner is not None:
                    await runner.cleanup()
            await self.client.close()

    async def _stop_containers(self) -> None:
        """Stop every running container (the pod workers are already cancelled)."""
        stops = [
            runtime.stop_container(record.container_id, grace_period=STOP_PODS_GRACE)
            for runtime in self.runtimes
            for record in runtime.list_containers()
            if record.running
        ]
        if stops:
            log.info("kubelet: stopping %d container(s) before exiting", len(stops))
            await asyncio.gather(*stops, return_exceptions=True)


async def _serve(options: KubeletOptions) -> int:
    service = KubeletService(options)
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    stopping = False

    def stop(signame: str) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            log.info(
                "kubelet: %s received; stopping (%s)",
                signame,
                "containers too" if options.stop_pods_on_exit else "containers keep running",
            )
            main_task.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop, sig.name)
    try:
        await service.run()
    except asyncio.CancelledError:
        if not stopping:
            raise
    log.info("kubelet: stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    options, level = parse_args(sys.argv[1:] if argv is None else argv)
    faulthandler.register(signal.SIGUSR2)  # `kill -USR2 <pid>` dumps every thread's stack
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s kubelet %(levelname)s %(name)s: %(message)s",
    )
    try:
        import uvloop

        return uvloop.run(_serve(options))
    except KeyboardInterrupt:
        return 0
