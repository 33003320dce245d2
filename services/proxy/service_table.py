"""Services + EndpointSlices -> the forwarding table: which address forwards where. Pure.

Why: kube-proxy's decisions — which addresses a Service is reachable on, which endpoints may
take a new connection — are rules about JSON objects, nothing about sockets. Kept apart, they
are tested against objects alone, and the forwarders only ever ask "where does this frontend
go now".

``service_routes(service, slices, node)`` gives one Service's routes: a ``Frontend``
(protocol, IP, port) -> a ``Route`` (the endpoints a new connection may go to, and the
Service's ClientIP affinity). As kube-proxy does:

* **Frontends**: every IPv4 ``spec.clusterIPs`` (or ``spec.clusterIP``) address on each
  ``ports[].port``; for ``NodePort`` and ``LoadBalancer`` Services each ``ports[].nodePort`` on
  every node-port address of this proxy (``node.node_port_addresses``); for ``LoadBalancer``
  every ``status.loadBalancer.ingress[].ip``; every ``spec.externalIPs`` address. Headless
  (``clusterIP: None``) and ``ExternalName`` Services have none. TCP and UDP only (SCTP is
  skipped: the loopback proxy has no SCTP relay).
* **Endpoints** of a service port: from the IPv4 EndpointSlices labelled
  ``kubernetes.io/service-name``, the slice port with the service port's name and protocol;
  each endpoint's first address (kube-proxy uses only ``addresses[0]``); duplicates across
  slices merged (a ready copy wins). ``conditions.ready``/``serving`` absent mean true,
  ``terminating`` absent means false (the EndpointSlice API's rules).
* **Which endpoints take traffic** (``pkg/proxy/topology.go``'s ``CategorizeEndpoints``):
  ready ones; when none is ready, those both serving and terminating. ClusterIP frontends use
  the cluster's endpoints unless ``internalTrafficPolicy: Local``; NodePort, LoadBalancer and
  external IPs unless ``externalTrafficPolicy: Local``. Local means endpoints whose
  ``nodeName`` is one of this proxy's nodes (``node.names``), with the same fallback, applied
  to local endpoints alone; none local means none (the traffic is dropped, not sent away).
* **Affinity**: ``sessionAffinity: ClientIP`` with ``sessionAffinityConfig.clientIP.
  timeoutSeconds`` (default 10800, Kubernetes' three hours).

Not here: topology hints (``trafficDistribution``, zone hints), ``loadBalancerSourceRanges``,
``ipMode``, IPv6. A frontend two Services claim (the apiserver's allocators prevent it for
ClusterIPs and node ports) is resolved by the caller.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_AFFINITY_TIMEOUT",
    "SERVICE_NAME_LABEL",
    "Endpoint",
    "Frontend",
    "NodeIdentity",
    "Route",
    "service_routes",
    "slice_service_key",
    "usable_endpoints",
]

Obj = Mapping[str, Any]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
DEFAULT_AFFINITY_TIMEOUT = 10800.0
"""``sessionAffinityConfig.clientIP.timeoutSeconds`` when unset: Kubernetes' 3 hours."""
PROTOCOLS = ("TCP", "UDP")
"""The protocols the proxy forwards; an SCTP port gets no frontend."""


@dataclass(frozen=True, slots=True)
class Frontend:
    """An address the proxy listens on: ``protocol`` (TCP/UDP), ``ip``, ``port``."""

    protocol: str
    ip: str
    port: int

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}/{self.protocol}"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One endpoint of a service port, as the EndpointSlice says it."""

    ip: str
    port: int
    node_name: str | None = None
    ready: bool = True
    serving: bool = True
    terminating: bool = False

    @property
    def address(self) -> tuple[str, int]:
        return (self.ip, self.port)


@dataclass(frozen=True, slots=True)
class Route:
    """Where new connections to one frontend go."""

    service: str
    """``namespace/name`` of the Service."""
    port_name: str
    kind: str
    """``ClusterIP``, ``NodePort``, ``LoadBalancer`` or ``ExternalIP``: how it was reached."""
    endpoints: tuple[tuple[str, int], ...]
    """The endpoints that may take a new connection (empty: refuse)."""
    affinity_timeout: float | None = None
    """Seconds a client IP sticks to its endpoint (``sessionAffinity: ClientIP``), else None."""

    def describe(self) -> str:
        port = f":{self.port_name}" if self.port_name else ""
        return f"{self.kind} of {self.service}{port}"


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """Who this proxy forwards for: the node names it stands for (endpoints on them are
    local) and the addresses it serves node ports on."""

    names: frozenset[str] = frozenset()
    node_port_addresses: tuple[str, ...] = ("127.0.0.1",)


def slice_service_key(endpoint_slice: Obj) -> list[str]:
    """``namespace/service`` of an EndpointSlice (an informer index function); [] when the
    slice names no Service."""
    meta = endpoint_slice.get("metadata") or {}
    name = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    return [f"{meta.get('namespace') or ''}/{name}"] if name else []


def _ipv4(value: object) -> str | None:
    try:
        address = ipaddress.ip_address(str(value))
    except ValueError:
        return None
    return str(address) if address.version == 4 else None


def _condition(conditions: Obj, name: str, *, absent: bool) -> bool:
    value = conditions.get(name)
    return absent if value is None else bool(value)


def _slice_endpoints(slices: Iterable[Obj], *, name: str, protocol: str) -> list[Endpoint]:
    """The endpoints of the service port (``name``, ``protocol``), merged across slices."""
    merged: dict[tuple[str, int], Endpoint] = {}
    for endpoint_slice in sorted(slices, key=lambda s: str((s.get("metadata") or {}).get("name"))):
        if endpoint_slice.get("addressType") != "IPv4":
            continue
        port = next(
            (
                p.get("port")
                for p in endpoint_slice.get("ports") or []
                if (p.get("name") or "") == name and (p.get("protocol") or "TCP") == protocol
            ),
            None,
        )
        if not isinstance(port, int):
            continue
        for item in endpoint_slice.get("endpoints") or []:
            addresses = item.get("addresses") or []
            ip = _ipv4(addresses[0]) if addresses else None
            if ip is None:
                continue
            conditions = item.get("conditions") or {}
            endpoint = Endpoint(
                ip=ip,
                port=port,
                node_name=item.get("nodeName"),
                ready=_condition(conditions, "ready", absent=True),
                serving=_condition(conditions, "serving", absent=True),
                terminating=_condition(conditions, "terminating", absent=False),
            )
            known = merged.get(endpoint.address)
            if known is None or (endpoint.ready and not known.ready):
                merged[endpoint.address] = endpoint
    return list(merged.values())


def usable_endpoints(endpoints: Iterable[Endpoint]) -> tuple[tuple[str, int], ...]:
    """Ready endpoints; when none is ready, serving and terminating ones (kube-proxy's
    fallback, so a rolling update's last pods still answer while they drain)."""
    candidates = list(endpoints)
    ready = [e for e in candidates if e.ready]
    chosen = ready or [e for e in candidates if e.serving and e.terminating]
    return tuple(sorted(e.address for e in chosen))


def _affinity(spec: Obj) -> float | None:
    if spec.get("sessionAffinity") != "ClientIP":
        return None
    config = (spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}
    timeout = config.get("timeoutSeconds")
    return float(timeout) if isinstance(timeout, int) and timeout > 0 else DEFAULT_AFFINITY_TIMEOUT


def _cluster_ips(spec: Obj) -> list[str]:
    given = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    return [ip for ip in (_ipv4(value) for value in given) if ip is not None]


def _ingress_ips(service: Obj) -> list[str]:
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return [ip for ip in (_ipv4(item.get("ip")) for item in ingress) if ip is not None]


def service_routes(
    service: Obj, slices: Iterable[Obj], node: NodeIdentity
) -> dict[Frontend, Route]:
    """Every frontend of ``service`` and where its new connections go (see the module)."""
    spec = service.get("spec") or {}
    meta = service.get("metadata") or {}
    key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
    kind = spec.get("type") or "ClusterIP"
    if kind == "ExternalName":
        return {}
    cluster_ips = _cluster_ips(spec)
    if not cluster_ips:  # headless, or not allocated yet
        return {}
    external = [ip for ip in (_ipv4(v) for v in spec.get("externalIPs") or []) if ip]
    ingress = _ingress_ips(service) if kind == "LoadBalancer" else []
    internal_local = spec.get("internalTrafficPolicy") == "Local"
    external_local = spec.get("externalTrafficPolicy") == "Local"
    affinity = _affinity(spec)
    slices = list(slices)
    routes: dict[Frontend, Route] = {}
    for port in spec.get("ports") or []:
        protocol = port.get("protocol") or "TCP"
        number = port.get("port")
        if protocol not in PROTOCOLS or not isinstance(number, int):
            continue
        name = port.get("name") or ""
        endpoints = _slice_endpoints(slices, name=name, protocol=protocol)
        everywhere = usable_endpoints(endpoints)
        local = usable_endpoints(e for e in endpoints if e.node_name in node.names)

        def route(how: str, to: tuple[tuple[str, int], ...], *, name: str = name) -> Route:
            return Route(key, name, how, to, affinity)

        for ip in cluster_ips:
            routes[Frontend(protocol, ip, number)] = route(
                "ClusterIP", local if internal_local else everywhere
            )
        outside = local if external_local else everywhere
        node_port = port.get("nodePort")
        if kind in ("NodePort", "LoadBalancer") and isinstance(node_port, int) and node_port:
            for ip in node.node_port_addresses:
                routes[Frontend(protocol, ip, node_port)] = route("NodePort", outside)
        for ip in ingress:
            routes[Frontend(protocol, ip, number)] = route("LoadBalancer", outside)
        for ip in external:
            routes[Frontend(protocol, ip, number)] = route("ExternalIP", outside)
    return routes
