"""The live forwarding table: one listener per frontend that has somewhere to send traffic.

Why: the proxy's state is "these Services route like this" (``service_table``); the sockets
must follow it exactly, one Service at a time, without a global rebuild. This module owns the
listeners and reconciles them with each Service's routes as its informers report changes.

``Forwarder(mode=..., udp_idle_timeout=..., on_bind_failure=...)``:

* ``set_service(key, routes)`` (``routes`` from ``service_table.service_routes``; empty when
  the Service is gone): every frontend the Service no longer has is closed; every frontend it
  has is updated in place — new connections use the new endpoints from the next accept on —
  or opened. All synchronous: when it returns, the sockets already say what the API says.
* A frontend whose route has **no usable endpoints has no listener**: a TCP connect is refused
  by the kernel at once and a UDP datagram gets ICMP port-unreachable, which is what
  kube-proxy's REJECT rule answers for a Service without endpoints.
* A frontend that cannot be bound (another cluster on this machine holds that address, or a
  node port is taken) is logged, reported through ``on_bind_failure`` once per failure, kept
  in ``failed`` and retried by ``retry_failed()`` (the service calls it on a timer); every
  other frontend keeps being served.
* Two Services claiming one frontend (the apiserver's allocators should prevent it): the
  first keeps it while it claims it; the other is reported once, and takes over when the
  first lets go.

Not here: informers, events, timers (``service``); choosing an endpoint (``balancer``).
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from services.proxy.balancer import Balancer, Mode
from services.proxy.service_table import Frontend, Route
from services.proxy.tcp_forwarder import TcpListener
from services.proxy.udp_forwarder import DEFAULT_IDLE_TIMEOUT, UdpListener

__all__ = ["BindFailure", "Forwarder", "Listener"]

log = logging.getLogger("kubelite.proxy")

BindFailure = Callable[[Frontend, Route, OSError], None]


def _addresses(route: Route) -> str:
    return ", ".join(f"{ip}:{port}" for ip, port in route.endpoints)


class Listener(Protocol):
    frontend: Frontend
    balancer: Balancer

    def open(self) -> None: ...

    def update(self, route: Route) -> None: ...

    def close(self) -> None: ...


class Forwarder:
    def __init__(
        self,
        *,
        mode: Mode = "random",
        udp_idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        on_bind_failure: BindFailure | None = None,
    ) -> None:
        self.mode = mode
        self.udp_idle_timeout = udp_idle_timeout
        self.on_bind_failure = on_bind_failure
        self.routes: dict[str, dict[Frontend, Route]] = {}
        """Service key -> the routes it asked for."""
        self.owners: dict[Frontend, str] = {}
        """Frontend -> the Service that holds it."""
        self.listeners: dict[Frontend, Listener] = {}
        self.failed: dict[Frontend, str] = {}
        """Frontends that could not be bound -> the error, retried by ``retry_failed``."""

    def set_service(self, key: str, routes: Mapping[Frontend, Route]) -> None:
        old = self.routes.pop(key, {})
        if routes:
            self.routes[key] = dict(routes)
        for frontend in old.keys() - routes.keys():
            if self.owners.get(frontend) == key:
                del self.owners[frontend]
                self._reassign(frontend)
        for frontend in routes:
            owner = self.owners.setdefault(frontend, key)
            if owner != key:
                if frontend not in old:
                    log.warning(
                        "%s is claimed by %s and by %s; %s keeps it",
                        frontend, owner, key, owner,
                    )  # fmt: skip
                continue
            self._apply(frontend, routes[frontend])

    def _reassign(self, frontend: Frontend) -> None:
        """``frontend``'s owner let go: another claimant takes it, else it is closed."""
        for key, routes in self.routes.items():
            if frontend in routes:
                self.owners[frontend] = key
                self._apply(frontend, routes[frontend])
                return
        self._close(frontend)

    def _apply(self, frontend: Frontend, route: Route) -> None:
        listener = self.listeners.get(frontend)
        if not route.endpoints:
            if listener is not None:
                log.info("%s (%s): no usable endpoints; refusing", frontend, route.describe())
            self._close(frontend)
            return
        if listener is not None:
            if listener.balancer.route.endpoints != route.endpoints:
                log.info("%s (%s) -> %s", frontend, route.describe(), _addresses(route))
            listener.update(route)
            return
        listener = self._listener(frontend, route)
        try:
            listener.open()
        except OSError as exc:
            self._failed(frontend, route, exc)
            return
        if self.failed.pop(frontend, None) is not None:
            log.info("%s (%s): bound after all", frontend, route.describe())
        self.listeners[frontend] = listener
        log.info("%s (%s) -> %s", frontend, route.describe(), _addresses(route))

    def _listener(self, frontend: Frontend, route: Route) -> Listener:
        balancer = Balancer(route, mode=self.mode)
        if frontend.protocol == "UDP":
            return UdpListener(frontend, balancer, idle_timeout=self.udp_idle_timeout)
        return TcpListener(frontend, balancer)

    def _failed(self, frontend: Frontend, route: Route, exc: OSError) -> None:
        reason = errno.errorcode.get(exc.errno or 0, "") or str(exc)
        known = self.failed.get(frontend)
        self.failed[frontend] = reason
        if known == reason:
            return  # reported already
        log.warning(
            "%s (%s): cannot listen: %s; serving the other addresses, retrying this one",
            frontend, route.describe(), exc.strerror or exc,
        )  # fmt: skip
        if self.on_bind_failure is not None:
            self.on_bind_failure(frontend, route, exc)

    def _close(self, frontend: Frontend) -> None:
        self.failed.pop(frontend, None)
        listener = self.listeners.pop(frontend, None)
        if listener is not None:
            listener.close()

    def retry_failed(self) -> None:
        """Try again to bind every frontend that could not be bound."""
        for frontend in list(self.failed):
            key = self.owners.get(frontend)
            route = self.routes.get(key or "", {}).get(frontend)
            if route is None:
                self.failed.pop(frontend, None)
            else:
                self._apply(frontend, route)

    def close(self) -> None:
        """Close every listener (established TCP connections run on until they end)."""
        for frontend in list(self.listeners):
            self._close(frontend)
        self.routes.clear()
        self.owners.clear()
        self.failed.clear()
