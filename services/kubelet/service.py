"""The kubelet as a component: every node this process hosts, their server and status writer.

What it owns (``KubeletService``, a ``component.Service``):

* ``start``: the kubelet server (logs, exec, ``/healthz``, ``/pods``, ``/metrics``) on
  ``--address:--port`` (TLS with authentication and authorization when ``--tls-cert-file`` is
  given: ``auth.py``) first, so each node can advertise its real port (``--port 0`` picks a free one, named by the
  ``kubelite: kubelet server listening on ...`` line); the separate health server on
  ``--healthz-bind-address:--healthz-port`` (127.0.0.1:10248, ``/healthz`` only; -1 turns it
  off); then the runtime(s) and one ``NodeKubelet`` per node (one with ``--runtime process``;
  ``--nodes N`` simulated ones named ``<node-name>-0`` ... with ``--runtime sim``, sharing one
  pod watch), the shared status manager, the event recorders and the Services informer (the
  containers' Service variables) — every long-lived task in one supervised group;
* the main client: at most ``API_CONNECTIONS`` requests in flight, so as many connections
  (watches apart), however many nodes' status writers post at once; the event recorders post on
  an event client of their own (``EVENT_CONNECTIONS``, Kubernetes' ``--event-qps`` 50 and
  ``--event-burst`` 100 per node hosted), so pod status never waits behind events;
* the nodes' heartbeats (``node_status``): one heartbeat client for every node (no rate limit,
  10 s timeout, as Kubernetes' kubelet's), with simulated nodes a gate of
  ``HEARTBEATS_IN_FLIGHT`` renewals and status syncs in flight, and one watch of the hosted
  Nodes' conditions, so a node the node controller marked Unknown reports again at once;
* ``wait``: until a task ends (it should not: that is logged loudly and exits 1);
* ``stop`` (SIGINT/SIGTERM): the tasks stop; containers keep running and a restarted kubelet
  re-adopts them from ``--state-dir`` — unless ``stop_pods_on_exit`` asks a clean stop to stop
  them too, as ``kubelite up`` does when the whole cluster shuts down (pods keep their
  sandboxes and addresses, so the next start restarts their containers in place). A container
  start in flight when the pod workers are cancelled completes and is recorded first (the
  runtime's ``start_container`` contract), so it is stopped or re-adopted like the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from api.registry import REGISTRY
from client.events import EventRecorder
from client.informer import Informer, strip_managed_fields
from client.kubeconfig import ClientConfig
from client.rest import ApiClient
from component.errors import Fatal
from component.flags import BindAddress
from component.gcpauses import freeze_survivors
from component.health import HealthServer
from component.listen import listen
from component.tasks import TaskGroup
from services.kubelet.agent import NodeKubelet
from services.kubelet.auth import KubeletAuthOptions, make_auth
from services.kubelet.metrics import KubeletMetrics, MeasuredRuntime
from services.kubelet.node_status import (
    NodeConfig,
    heartbeat_config,
    host_pressure,
    host_resources,
)
from services.kubelet.pod_dns import ClusterDns
from services.kubelet.runtime.base import Runtime
from services.kubelet.runtime.images import DEFAULT_CATALOG, ImageCatalog, ImageStore
from services.kubelet.runtime.ipam import default_pod_cidr, sim_pod_cidr
from services.kubelet.runtime.process import ProcessRuntime
from services.kubelet.runtime.sandbox import SandboxUnavailable
from services.kubelet.runtime.sim import SimRuntime
from services.kubelet.server import ServedPod, make_server_app
from services.kubelet.stats import NodeStats
from services.kubelet.status_manager import StatusManager

__all__ = [
    "API_CONNECTIONS",
    "EVENT_CONNECTIONS",
    "STOP_PODS_GRACE",
    "KubeletOptions",
    "KubeletService",
]

log = logging.getLogger("kubelet")

REGISTER_CONCURRENCY = 32
"""Simulated nodes registering at once: a thousand simultaneous POSTs overflow a listen backlog."""
HEARTBEATS_IN_FLIGHT = 256
"""Lease renewals and node-status syncs a sim kubelet hosting many nodes has in flight at once
(so at most this many connections for them): 5,000 nodes need 500 renewals a second, 256 at
once carries that up to half a second of apiserver latency (see ``node_status``)."""
API_CONNECTIONS = HEARTBEATS_IN_FLIGHT
"""Connections the main client holds for requests at once (``ClientConfig.max_connections``;
watches apart, heartbeats on their own client): a sim kubelet's event recorders (one per node)
and status writers post in parallel, and 5,000 nodes' worth had ~2,500 connections open at once,
overflowing the apiserver's accept queue (bench/README.md). A real kubelet sends everything over
one HTTP/2 connection; one node's kubelet never has this many requests in flight."""
EVENT_CONNECTIONS = 64
"""Connections the event client holds for posts at once: Kubernetes' kubelet records events on
a client of its own (``--event-qps``, ``--event-burst``), so they never wait in line with pod
status. On the main client, a sim kubelet's 5,000 event recorders (each posting one event at a
time, as client-go's broadcaster does) held ~95% of its connections, and pods waited for their
Running status behind their own events: 15 status writes a second against 300 events
(bench/README.md, 5,000 nodes). Events are best effort; a backlog waits in each recorder."""
EVENT_QPS = 50.0
EVENT_BURST = 100
"""Kubernetes' kubelet defaults (``eventRecordQPS``, ``eventBurst``), per node hosted."""
STOP_PODS_GRACE = 10.0
"""With ``stop_pods_on_exit``: seconds between SIGTERM and SIGKILL for each container."""
STATUS_WORKERS_MAX = 256
"""Pod-status writers of a sim kubelet hosting many nodes: one per node up to this many (each
holds at most one request, so one connection, to the apiserver)."""


@dataclass(frozen=True, slots=True)
class KubeletOptions:
    client: ClientConfig = field(default_factory=ClientConfig)
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
    sandbox: str = "auto"
    """``--sandbox``: auto, on or off (the process runtime's pod sandbox)."""
    nodes: int = 1
    sim_start_delay: float = 0.0
    lease_interval: float = 10.0
    status_interval: float = 10.0
    status_workers: int | None = None
    """Concurrent pod-status writers; None sizes them by the nodes hosted (see ``__init__``)."""
    health: BindAddress = field(default_factory=lambda: BindAddress(host="127.0.0.1", port=10248))
    stop_pods_on_exit: bool = False
    cluster_dns: ClusterDns = field(default_factory=ClusterDns)
    """``--cluster-dns`` and ``--cluster-domain``."""
    auth: KubeletAuthOptions = field(default_factory=KubeletAuthOptions)
    """The server's TLS, authentication and authorization (``auth.py``)."""

    @property
    def resolved_state_dir(self) -> Path:
        return self.state_dir or Path(".kubelite") / f"kubelet-{self.node_name}"


class KubeletService:
    """Every node this process hosts, plus the shared server and status writer."""

    def __init__(self, options: KubeletOptions) -> None:
        self.options = options
        self.client = ApiClient(
            options.client.with_options(
                max_connections=options.client.max_connections or API_CONNECTIONS
            )
        )
        # leases and node status on a client of their own, as Kubernetes' kubelet sends them
        # (no rate limit, a 10 s timeout, its own connections)
        self.heartbeat_client = ApiClient(
            heartbeat_config(options.client, status_interval=options.status_interval)
        )
        # and events on a third, rate limited as Kubernetes' (per node hosted)
        self.event_client = ApiClient(
            options.client.with_options(
                max_connections=EVENT_CONNECTIONS,
                qps=EVENT_QPS * options.nodes,
                burst=EVENT_BURST * options.nodes,
            )
        )
        # A real kubelet writes its own node's statuses, one at a time; one sim process hosting
        # N nodes writes as many in parallel (one writer per node, at most STATUS_WORKERS_MAX),
        # or pods wait for their turn between bound and Running (bench: 1,000 pods on 100 sim
        # nodes, bound->Running p50 18 s with 4 writers, 2 s with 64).
        workers = options.status_workers or min(STATUS_WORKERS_MAX, max(4, options.nodes))
        self.metrics = KubeletMetrics(runtimes=lambda: self.runtimes)
        self.status = StatusManager(
            client=self.client, workers=workers, pod_started=self.metrics.pod_start.observe
        )
        self.nodes: list[NodeKubelet] = []
        self.recorders: list[EventRecorder] = []
        self.runtimes: list[Runtime] = []
        self.port: int | None = None
        self.shared_informer: Informer | None = None
        self.node_informer: Informer | None = None
        # every Service, for the containers' Service variables: one watch for all the nodes
        self.services = Informer(self.client, REGISTRY.require("", "Service"), name="services")
        self.health = HealthServer(component="kubelet", address=options.health)
        self.health.add_ok("/healthz")
        self.tasks = TaskGroup("kubelet", logger=log)
        self._by_name: dict[str, NodeKubelet] = {}
        self._stats: dict[str, NodeStats] = {}
        self._started = time.time()
        self._runner: web.AppRunner | None = None

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

    async def node_summary(self, node: str | None) -> dict[str, Any] | None:
        name = node or self.options.node_name
        kubelet = self._by_name.get(name) or next(
            (n for n in self.nodes if n.config.name == name), None
        )
        if kubelet is None:
            return None
        stats = self._stats.setdefault(name, NodeStats(node_name=name, started_at=self._started))
        runtime = kubelet.runtime
        pods = []
        for pod in kubelet.pods():
            uid = (pod.get("metadata") or {}).get("uid") or ""
            newest = {r.name: r for r in runtime.list_containers(uid)}  # oldest attempt first
            pods.append((pod, [r for r in newest.values() if r.running]))
        return await stats.summary(pods, simulated=runtime.name == "sim")

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self.port = await self._start_server()
        await self.health.start()
        if self.options.nodes > 1:
            # thousands of nodes' pods, informers and tasks in one heap: full collections
            # would stop every node's heartbeats for seconds (component.gcpauses)
            freeze_survivors()
        await self._build_nodes(self.port)
        self.tasks.start("pod status writer", self.status.run())
        for recorder in self.recorders:
            self.tasks.adopt(recorder.start())
        if self.shared_informer is not None:
            self.tasks.adopt(self.shared_informer.start())
        if self.node_informer is not None:
            self.tasks.adopt(self.node_informer.start())
        self.tasks.adopt(self.services.start())
        for node in self.nodes:
            self.tasks.start(f"node {node.config.name}", node.run())
        log.info(
            "kubelet: %d node(s) with the %s runtime against %s; registering",
            len(self.nodes),
            self.options.runtime,
            self.client.server,
        )

    async def wait(self) -> None:
        await self.tasks.wait()

    async def stop(self) -> None:
        """Stop the tasks; containers keep running unless ``stop_pods_on_exit``."""
        log.info(
            "kubelet: stopping (%s)",
            "containers too" if self.options.stop_pods_on_exit else "containers keep running",
        )
        await self.tasks.cancel()
        if self.options.stop_pods_on_exit:
            await self._stop_containers()
        for runtime in self.runtimes:
            with contextlib.suppress(Exception):
                await runtime.close()
        await self.health.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.client.close()
        await self.heartbeat_client.close()
        await self.event_client.close()
        log.info("kubelet: stopped")

    # -- building ----------------------------------------------------------------------------

    async def _start_server(self) -> int:
        auth = self.options.auth
        middlewares = make_auth(auth, self.client, node_of=self._node_of)
        self._runner = web.AppRunner(
            make_server_app(self, middlewares=middlewares, metrics=self.metrics.render),
            shutdown_timeout=1.0,
        )
        await self._runner.setup()
        context = auth.server_ssl_context() if auth.serves_tls else None

        def site(runner: web.BaseRunner, host: str, port: int) -> web.BaseSite:
            return web.TCPSite(runner, host, port, ssl_context=context)

        port = await listen(
            self._runner,
            component="kubelet",
            endpoint="server",
            host=self.options.address,
            port=self.options.port,
            flag="--port",
            site=site,
            scheme="https" if context is not None else "http",
        )
        log.info(
            "kubelet server listening on %s:%d (logs, exec; %s)",
            self.options.address,
            port,
            f"TLS, authorization {auth.authorization_mode}" if context else "plain HTTP, no auth",
        )
        return port

    def _node_of(self, request: web.Request) -> str:
        """The node a request is about: the one running its pod (one process may host several
        simulated nodes), else this kubelet's ``--node-name``."""
        namespace, pod = request.match_info.get("namespace"), request.match_info.get("pod")
        if namespace and pod:
            for node in self.nodes:
                if node.find_worker(namespace=namespace, name=pod) is not None:
                    return node.config.name
        return self.options.node_name

    def _node_informer(self, names: list[str]) -> Informer:
        """The hosted Nodes' conditions as the apiserver has them, for ``NodeAgent.saw_node``
        (one watch for every simulated node; the cache keeps the conditions' types and
        statuses only)."""
        nodes = REGISTRY.get("", "v1", "nodes")
        assert nodes is not None

        def conditions_only(node: dict[str, Any]) -> dict[str, Any]:
            meta = node.get("metadata") or {}
            conditions = (node.get("status") or {}).get("conditions") or []
            return {
                "metadata": {
                    "name": meta.get("name"),
                    "resourceVersion": meta.get("resourceVersion"),
                },
                "status": {
                    "conditions": [
                        {"type": c.get("type"), "status": c.get("status")} for c in conditions
                    ]
                },
            }

        def saw(node: dict[str, Any]) -> None:
            hosted = self._by_name.get(node["metadata"]["name"] or "")
            if hosted is not None:
                hosted.node.saw_node(node)

        informer = Informer(
            self.client,
            nodes,
            field_selector=None if len(names) > 1 else f"metadata.name={names[0]}",
            name="hosted nodes",
            transform=conditions_only,
        )
        informer.add_handler(on_add=saw, on_update=lambda _old, new: saw(new))
        return informer

    def _shared_informer(self) -> Informer:
        """One pod watch for every simulated node, routed by ``spec.nodeName``."""
        pods = REGISTRY.get("", "v1", "pods")
        assert pods is not None
        informer = Informer(
            self.client,
            pods,
            field_selector="spec.nodeName!=",
            name="pods@sim-nodes",
            transform=strip_managed_fields,  # the status writes keep the stored entries
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

    async def _build_nodes(self, port: int) -> None:
        o = self.options
        cpu, memory = host_resources()
        state_dir = o.resolved_state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        names = [o.node_name] if o.runtime == "process" else (
            [f"{o.node_name}-{i}" for i in range(o.nodes)] if o.nodes > 1 else [o.node_name]
        )  # fmt: skip
        self.node_informer = self._node_informer(names)
        gate = heartbeat_gate = None
        if len(names) > 1:
            self.shared_informer = self._shared_informer()
            gate = asyncio.Semaphore(REGISTER_CONCURRENCY)
            heartbeat_gate = asyncio.Semaphore(HEARTBEATS_IN_FLIGHT)
        for index, name in enumerate(names):
            runtime: Runtime
            if o.runtime == "process":
                pod_cidr = o.pod_cidr or default_pod_cidr(name)
                images = ImageStore(catalog=ImageCatalog(path=o.image_catalog), state_dir=state_dir)
                proc = ProcessRuntime(
                    state_dir=state_dir, pod_cidr=pod_cidr, images=images, sandbox=o.sandbox
                )
                self.runtimes.append(proc)
                await self._start_process_runtime(proc)
                runtime = proc
                pressure = lambda: host_pressure(str(state_dir))  # noqa: E731
            else:
                pod_cidr = o.pod_cidr if (o.pod_cidr and len(names) == 1) else sim_pod_cidr(index)
                runtime = SimRuntime(pod_cidr=pod_cidr, start_delay=o.sim_start_delay)
                self.runtimes.append(runtime)
                pressure = dict
            recorder = EventRecorder(self.event_client, component="kubelet", host=name)
            self.recorders.append(recorder)
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
                local_path_root=str((state_dir / "storage").absolute()),
            )
            self.nodes.append(
                NodeKubelet(
                    client=self.client,
                    config=config,
                    runtime=MeasuredRuntime(runtime, self.metrics),
                    status=self.status,
                    recorder=recorder,
                    pressure=pressure,
                    lease_interval=o.lease_interval,
                    status_interval=o.status_interval,
                    informer=self.shared_informer,
                    services=self.services,
                    cluster_dns=o.cluster_dns,
                    register_gate=gate,
                    heartbeat_client=self.heartbeat_client,
                    heartbeat_gate=heartbeat_gate,
                )
            )
            self._by_name[name] = self.nodes[-1]

    @staticmethod
    async def _start_process_runtime(runtime: ProcessRuntime) -> None:
        """Start it and say, once, whether pods run sandboxed (``--sandbox on`` without a
        sandbox is fatal)."""
        try:
            await runtime.start()
        except SandboxUnavailable as exc:
            raise Fatal(str(exc)) from None
        if runtime.sandboxed:
            log.info(
                "kubelet: pods run sandboxed (own mount, UTS, PID and IPC namespaces; "
                "the host's root read-only)"
            )
        else:
            log.warning(
                "kubelet: pods run UNSANDBOXED as plain host processes (they see and, as root, "
                "can change the host's files): %s; each pod gets a Warning event",
                runtime.sandbox_unavailable_reason,
            )

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
