"""The DNS server as a component: informers, the wire server, self-registration, health.

What it owns (``DnsService``, a ``component.Service``):

* ``start``: the upstreams (``--upstream``, else the ``nameserver`` lines of ``--resolv-conf``,
  read off the event loop; an upstream that is this server itself is dropped — forwarding to
  ourselves would loop); the informers on Services, EndpointSlices and Namespaces
  (``cluster.InformerView``); the DNS server on ``--dns-bind-address:--dns-port``, UDP and TCP
  (``server.DnsServer``; it answers at once, from whatever the caches hold — NXDOMAIN for
  everything until they synced, as CoreDNS answers before its own sync); the registration of
  ``kube-system/kube-dns`` (``kube_dns.py``); the health server on ``--healthz-port``
  (``/healthz`` and CoreDNS's ``/health``: alive; ``/readyz`` and CoreDNS's ``/ready``: 200
  once the informers synced; ``/metrics``: CoreDNS's ``coredns_dns_*`` metrics, ``metrics.py``);
* ``wait``: until a task ends (one that was meant to run forever is an error);
* ``stop`` (SIGINT/SIGTERM): stops answering, then the informers, the health server, the client.

After a ``kill -9`` a new process lists everything again: nothing is kept on disk.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from client.kubeconfig import ClientConfig
from client.rest import ApiClient
from component.errors import CannotListen
from component.flags import BindAddress
from component.health import HealthServer, text_response
from component.metrics import Metrics
from component.ready import announce_listening
from component.tasks import TaskGroup
from services.dns.cluster import InformerView
from services.dns.kube_dns import KubeDnsRegistration
from services.dns.metrics import DnsMetrics
from services.dns.records import DEFAULT_TTL, DEFAULT_ZONE
from services.dns.server import DnsServer
from services.dns.upstream import Forwarder, Upstream, host_upstreams

__all__ = ["DnsOptions", "DnsService"]

log = logging.getLogger("kubelite.dns")


@dataclass(frozen=True, slots=True)
class DnsOptions:
    client: ClientConfig
    bind_address: str
    port: int
    cluster_dns_ip: str = ""
    zone: str = DEFAULT_ZONE
    upstreams: tuple[Upstream, ...] = ()
    """Empty: the nameservers of ``resolv_conf``."""
    resolv_conf: Path = Path("/etc/resolv.conf")
    ttl: int = DEFAULT_TTL
    health: BindAddress = field(default_factory=lambda: BindAddress(host="127.0.0.1", port=8181))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        log.warning("cannot read %s (%s): names outside the zone will get SERVFAIL", path, exc)
        return ""


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s failed", task.get_name(), exc_info=task.exception())


class DnsService:
    def __init__(self, options: DnsOptions) -> None:
        self.options = options
        self.client = ApiClient(options.client)
        self.view = InformerView(self.client)
        self.server: DnsServer | None = None
        self.health = HealthServer(component="dns", address=options.health)
        self.health.add_ok("/healthz", "/livez", "/health")
        self.health.add("/readyz", self._ready)
        self.health.add("/ready", self._ready)
        self.metrics = Metrics()
        self.health.add_metrics("/metrics", self.metrics.render)
        self.tasks = TaskGroup("dns", logger=log)
        self._registration: asyncio.Task[None] | None = None

    async def _ready(self, request: web.Request) -> web.Response:
        if self.view.has_synced:
            return text_response("OK")
        return text_response("informers not synced", status=503)

    async def _upstreams(self) -> list[Upstream]:
        opts = self.options
        upstreams = list(opts.upstreams)
        if not upstreams:
            upstreams = host_upstreams(await asyncio.to_thread(_read, opts.resolv_conf))
        own = [u for u in upstreams if u.host == opts.bind_address and u.port == opts.port]
        if own:
            log.warning("not forwarding to %s: that is this server", ", ".join(map(str, own)))
        return [u for u in upstreams if u not in own]

    async def start(self) -> None:
        opts = self.options
        upstreams = await self._upstreams()
        dns_ips = tuple(ip for ip in (opts.cluster_dns_ip,) if ip)
        self.server = DnsServer(
            view=self.view,
            forwarder=Forwarder(upstreams),
            zone=opts.zone,
            dns_ips=dns_ips,
            ttl=opts.ttl,
            metrics=DnsMetrics(self.metrics),
        )
        try:
            port = await self.server.start(opts.bind_address, opts.port)
        except OSError as exc:
            raise CannotListen(
                f"cannot serve DNS on {opts.bind_address}:{opts.port}: "
                f"{exc.strerror or exc} (--dns-port=0 takes any free port)"
            ) from None
        announce_listening(
            component="dns", endpoint="dns", host=opts.bind_address, port=port, scheme="dns"
        )
        log.info(
            "serving %s on %s:%d (UDP, TCP); other names go to %s",
            opts.zone, opts.bind_address, port,
            ", ".join(map(str, upstreams)) or "nobody (SERVFAIL)",
        )  # fmt: skip
        for informer in self.view.informers:
            self.tasks.start(f"informer {informer.name}", informer.run())
        if opts.cluster_dns_ip:
            registration = KubeDnsRegistration(
                client=self.client,
                cluster_ip=opts.cluster_dns_ip,
                address=opts.bind_address,
                port=port,
            )
            # it ends once registered: a task of its own, not of the group that must not end
            self._registration = asyncio.create_task(registration.run(), name="register kube-dns")
            self._registration.add_done_callback(_log_failure)
        await self.health.start()
        log.info("talking to apiserver %s", self.client.server)

    async def wait(self) -> None:
        await self.tasks.wait()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
        if self._registration is not None:
            self._registration.cancel()
            await asyncio.gather(self._registration, return_exceptions=True)
        await self.tasks.cancel()
        await self.health.stop()
        await self.client.close()
