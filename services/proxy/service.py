"""The proxy as a component: Service and EndpointSlice informers driving the forwarding table.

What it owns (``ProxyService``, a ``component.Service``):

* ``start``: informers on Services and EndpointSlices (slices indexed by the Service they
  name) and the event recorder, in one supervised task group; the health server
  (``/healthz``, ``/livez``; ``/readyz`` once both informers have synced; ``/metrics``,
  kube-proxy's names, ``metrics.py``) on ``--healthz-port`` (10256, kube-proxy's); then the sync task: once both informers have
  listed, every Service's routes are applied, and from then on each informer event
  recomputes the routes of the one Service it touches (``service_table.service_routes``) and
  hands them to the ``forwarding.Forwarder`` — in the handler itself, so a new connection
  follows an endpoint change from the moment the watch event is read.
* A frontend that cannot be bound gets a Warning event ``FailedToListen`` on its Service
  (kube-proxy only logs; kubelite also says it where ``kubectl describe svc`` shows it) and
  is retried every ``BIND_RETRY_INTERVAL`` seconds.
* ``stop``: closes the listeners (established connections are cut when the process exits),
  then the informers, the recorder and the health server.

After a kill -9 nothing is left to clean up — the kernel closes every socket — and the next
start lists and binds everything again: the resync is the start itself.

Not here: the forwarding rules (``service_table``), the relays (``tcp_forwarder``,
``udp_forwarder``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from api.registry import REGISTRY
from client.cache import object_key
from client.events import EventRecorder
from client.informer import Informer
from client.kubeconfig import ClientConfig
from client.rest import ApiClient
from component.flags import BindAddress
from component.health import HealthServer, text_response
from component.tasks import TaskGroup
from services.proxy.balancer import Mode
from services.proxy.forwarding import Forwarder
from services.proxy.metrics import ProxyMetrics
from services.proxy.service_table import (
    Frontend,
    NodeIdentity,
    Route,
    service_routes,
    slice_service_key,
)
from services.proxy.udp_forwarder import DEFAULT_IDLE_TIMEOUT

__all__ = ["BIND_RETRY_INTERVAL", "HEALTH_PORT", "ProxyOptions", "ProxyService"]

log = logging.getLogger("kubelite.proxy")

HEALTH_PORT = 10256
"""kube-proxy's health port."""
BIND_RETRY_INTERVAL = 5.0
"""Seconds between attempts to bind the frontends that could not be bound."""
EVENT_FLUSH_TIMEOUT = 2.0
SERVICE_INDEX = "service"

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ProxyOptions:
    client: ClientConfig
    node: NodeIdentity
    health: BindAddress = field(
        default_factory=lambda: BindAddress(host="127.0.0.1", port=HEALTH_PORT)
    )
    mode: Mode = "random"
    udp_idle_timeout: float = DEFAULT_IDLE_TIMEOUT


class ProxyService:
    def __init__(self, options: ProxyOptions) -> None:
        self.options = options
        services_rt = REGISTRY.by_kind("", "Service")
        slices_rt = REGISTRY.by_kind("discovery.k8s.io", "EndpointSlice")
        assert services_rt and slices_rt
        self.client = ApiClient(options.client)
        host = ",".join(sorted(options.node.names))
        self.recorder = EventRecorder(self.client, component="kube-proxy", host=host or None)
        self.forwarder = Forwarder(
            mode=options.mode,
            udp_idle_timeout=options.udp_idle_timeout,
            on_bind_failure=self._bind_failed,
        )
        self.services = Informer(self.client, services_rt, name="services")
        self.slices = Informer(
            self.client,
            slices_rt,
            name="endpointslices",
            indexers={SERVICE_INDEX: slice_service_key},
        )
        self.services.add_handler(on_change=self._service_changed)
        self.slices.add_handler(
            on_add=self._slice_changed,
            on_update=self._slice_moved,
            on_delete=self._slice_changed,
        )
        self.informers = (self.services, self.slices)
        self.synced = False
        self.retry = asyncio.Event()
        self.health = HealthServer(component="proxy", address=options.health)
        self.health.add_ok("/healthz", "/livez")
        self.health.add("/readyz", self._readyz)
        self.metrics = ProxyMetrics()
        self.health.add_metrics("/metrics", self.metrics.render)
        self.tasks = TaskGroup("proxy", logger=log)

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.synced:
            return text_response("ok")
        return text_response("informers not synced", status=503)

    # -- informer events -> the forwarding table -------------------------------------------

    def _service_changed(self, service: Obj) -> None:
        self.metrics.service_changes.inc()
        self._sync(object_key(service))

    def _slice_changed(self, endpoint_slice: Obj) -> None:
        self.metrics.endpoint_changes.inc()
        for key in slice_service_key(endpoint_slice):
            self._sync(key)

    def _slice_moved(self, old: Obj, new: Obj) -> None:
        self.metrics.endpoint_changes.inc()
        for key in {*slice_service_key(old), *slice_service_key(new)}:
            self._sync(key)

    def _sync(self, key: str) -> None:
        if not self.synced:
            return  # the first full sync comes once both informers have listed
        started = time.perf_counter()
        service = self.services.get(key)
        routes = (
            service_routes(service, self.slices.by_index(SERVICE_INDEX, key), self.options.node)
            if service is not None
            else {}
        )
        self.forwarder.set_service(key, routes)
        self.metrics.synced(started)
        if self.forwarder.failed:
            self.retry.set()

    def _bind_failed(self, frontend: Frontend, route: Route, exc: OSError) -> None:
        service = self.services.get(route.service)
        if service is None:
            return
        nodes = ",".join(sorted(self.options.node.names)) or "this node"
        self.recorder.event(
            {"kind": "Service", "apiVersion": "v1", **service},
            "Warning",
            "FailedToListen",
            f"kubelite proxy on {nodes} cannot listen on {frontend} ({route.kind}): "
            f"{exc.strerror or exc}; the Service's other addresses are served",
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        for informer in self.informers:
            self.tasks.adopt(informer.start())
        self.tasks.adopt(self.recorder.start())
        await self.health.start()
        self.tasks.start("proxy sync", self._run())

    async def _run(self) -> None:
        log.info("waiting for the Service and EndpointSlice informers to sync")
        await asyncio.gather(*(informer.wait_synced() for informer in self.informers))
        self.synced = True
        for key in self.services.keys():
            self._sync(key)
        log.info(
            "synced: %d Service(s), %d listener(s), %d address(es) not bound",
            len(self.services.keys()), len(self.forwarder.listeners), len(self.forwarder.failed),
        )  # fmt: skip
        while True:
            await self.retry.wait()
            await asyncio.sleep(BIND_RETRY_INTERVAL)
            self.retry.clear()
            self.forwarder.retry_failed()
            if self.forwarder.failed:
                self.retry.set()

    async def wait(self) -> None:
        await self.tasks.wait()

    async def stop(self) -> None:
        log.info("stopping: listeners, then informers and the event recorder")
        self.forwarder.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.recorder.flush(), timeout=EVENT_FLUSH_TIMEOUT)
        await self.tasks.cancel()
        await self.health.stop()
        await self.client.close()
