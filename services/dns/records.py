"""Cluster names -> DNS answers: the rules of CoreDNS's ``kubernetes`` plugin, pure.

Why a module of its own: what a name under the cluster domain means is the whole contract
Kubernetes users rely on (the DNS specification for Services and Pods), and it is easiest to
read, and to test, apart from sockets and caches. ``resolve(view, qname, qtype, zone=...)``
answers one question from a ``ClusterView`` (the component's informer caches; a dict in tests):

* ``<svc>.<ns>.svc.<zone>``: A/AAAA of the ClusterIP(s); for a headless Service
  (``clusterIP: None``) the addresses of its ready endpoints (every endpoint with
  ``publishNotReadyAddresses``), from its EndpointSlices (``kubernetes.io/service-name``);
  for an ExternalName Service a CNAME to ``spec.externalName``;
* ``<endpoint>.<svc>.<ns>.svc.<zone>``: the endpoint whose ``hostname`` (or dashed IP,
  ``10-1-2-3``) is ``<endpoint>`` — StatefulSet pods and hostname+subdomain pods;
* ``_<port>._<proto>.<svc>.<ns>.svc.<zone>`` SRV (any of the labels may be left out, as
  CoreDNS reads a missing label as "any"): priority 0, weight 100 shared among the records,
  the port, and the target ``<svc>.<ns>.svc.<zone>`` (ClusterIP) or each endpoint's name
  (headless), with the targets' addresses in the additional section;
* ``<a-b-c-d>.<ns>.pod.<zone>``: the address spelled by the label ("pods insecure", CoreDNS's
  default Corefile), when the namespace exists;
* ``<ns>.svc.<zone>`` and ``<ns>.pod.<zone>``: NODATA when the namespace exists, NXDOMAIN when
  not; the apex answers SOA and NS, ``ns.dns.<zone>`` the DNS server's own addresses;
* a name the zone does not hold: NXDOMAIN; a name it holds, asked for another type: NODATA
  (NOERROR, empty answer) — both with the zone's SOA in the authority section;
* reverse names (``d.c.b.a.in-addr.arpa``): PTR for ClusterIPs and ready endpoint addresses;
  any other reverse name, and every name outside the zone, is not ours (``None``): the server
  forwards it.

Every record carries the plugin's default TTL, 5 seconds; the SOA's serial is the view's
``generation``.

What it does not do: wildcard names (``*.ns.svc``), the ``pods verified`` mode, multicluster
and zonal names, ``dns-version`` TXT, the ``ignore empty_service`` option; CNAME targets
are chased by the server (``Answer.chase``), not here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "DEFAULT_TTL",
    "DEFAULT_ZONE",
    "Answer",
    "ClusterView",
    "Record",
    "resolve",
    "soa",
]

Obj = Mapping[str, Any]

DEFAULT_ZONE = "cluster.local"
DEFAULT_TTL = 5
"""CoreDNS's kubernetes plugin answers with a 5 s TTL unless told otherwise (``ttl``)."""
SOA_REFRESH, SOA_RETRY, SOA_EXPIRE = 7200, 1800, 86400
"""The SOA timers CoreDNS's plugins put in every SOA they make."""
NOERROR, NXDOMAIN = 0, 3
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""The label tying an EndpointSlice to its Service."""
REVERSE_V4 = "in-addr.arpa"


class ClusterView(Protocol):
    """What ``resolve`` reads: the Services, EndpointSlices and Namespaces the server knows."""

    @property
    def generation(self) -> int:
        """Changes whenever any object changes (the SOA serial)."""

    def namespace_exists(self, name: str) -> bool: ...

    def service(self, namespace: str, name: str) -> Obj | None: ...

    def endpoint_slices(self, namespace: str, service: str) -> Iterable[Obj]: ...

    def services_with_ip(self, ip: str) -> Iterable[Obj]: ...

    def slices_with_address(self, ip: str) -> Iterable[Obj]: ...


@dataclass(frozen=True, slots=True)
class Record:
    """One resource record: ``name`` (absolute, with the trailing dot), ``kind`` (A, AAAA,
    CNAME, SRV, PTR, NS, SOA) and ``data`` in presentation format."""

    name: str
    kind: str
    data: str


@dataclass(frozen=True, slots=True)
class Answer:
    rcode: int = NOERROR
    answer: tuple[Record, ...] = ()
    authority: tuple[Record, ...] = ()
    additional: tuple[Record, ...] = ()
    chase: str | None = None
    """An out-of-zone CNAME target whose addresses the server should add (ExternalName)."""


@dataclass(frozen=True, slots=True)
class _Entry:
    """What one lookup found: an address (or, for ExternalName, a name), a port, and the name
    that owns it (the Service's, or the endpoint's for headless and endpoint queries)."""

    host: str
    port: int
    owner: str


@dataclass(slots=True)
class _Query:
    zone: str
    qname: str
    """As asked (its case is kept in the answer)."""
    service: str = ""
    namespace: str = ""
    endpoint: str = ""
    port: str = ""
    protocol: str = ""
    found: list[_Entry] = field(default_factory=list)


def soa(zone: str, *, serial: int, ttl: int = DEFAULT_TTL) -> Record:
    """The zone's SOA, as CoreDNS makes it (``ns.dns.<zone>``, ``hostmaster.<zone>``)."""
    data = (
        f"ns.dns.{zone}. hostmaster.{zone}. {serial & 0xFFFFFFFF} "
        f"{SOA_REFRESH} {SOA_RETRY} {SOA_EXPIRE} {ttl}"
    )
    return Record(f"{zone}.", "SOA", data)


def _any(label: str) -> bool:
    return label in ("", "*", "any")


def _matches(wanted: str, actual: str) -> bool:
    return _any(wanted) or wanted == actual.lower()


def _dashed(ip: str) -> str:
    return ip.replace(".", "-").replace(":", "-")


def _kind_of(ip: str) -> str | None:
    try:
        return "A" if ipaddress.ip_address(ip).version == 4 else "AAAA"
    except ValueError:
        return None


def _cluster_ips(service: Obj) -> list[str]:
    spec = service.get("spec") or {}
    ips = [str(ip) for ip in spec.get("clusterIPs") or () if ip]
    if not ips and spec.get("clusterIP"):
        ips = [str(spec["clusterIP"])]
    return [ip for ip in ips if ip != "None"]


def _headless(service: Obj) -> bool:
    return (service.get("spec") or {}).get("clusterIP") == "None"


def _ready_endpoints(
    slices: Iterable[Obj], *, all_of_them: bool
) -> Iterable[tuple[str, str, list[tuple[str, str, int]]]]:
    """(address, hostname, ports as (name, protocol, port)) of every ready endpoint address;
    a slice without ports gives one port -1 (addresses without SRV targets), as CoreDNS."""
    for eps in slices:
        if eps.get("addressType") not in ("IPv4", "IPv6"):
            continue
        ports = [
            (str(p.get("name") or ""), str(p.get("protocol") or "TCP"), int(p.get("port") or 0))
            for p in eps.get("ports") or ()
        ] or [("", "", -1)]
        for endpoint in eps.get("endpoints") or ():
            ready = (endpoint.get("conditions") or {}).get("ready")
            if not all_of_them and ready is False:
                continue
            for address in endpoint.get("addresses") or ():
                yield str(address), str(endpoint.get("hostname") or ""), ports


def _service_entries(view: ClusterView, q: _Query, service: Obj) -> list[_Entry]:
    """Entries of one Service for ``q`` (empty when it has none to offer)."""
    spec = service.get("spec") or {}
    own = f"{q.service}.{q.namespace}.svc.{q.zone}."
    if spec.get("type") == "ExternalName":
        target = str(spec.get("externalName") or "").rstrip(".")
        return [_Entry(host=target, port=0, owner=own)] if target else []
    if _headless(service) or q.endpoint:
        entries = []
        all_of_them = bool(spec.get("publishNotReadyAddresses"))
        slices = view.endpoint_slices(q.namespace, q.service)
        for address, hostname, ports in _ready_endpoints(slices, all_of_them=all_of_them):
            name = hostname or _dashed(address)
            if q.endpoint and q.endpoint != name.lower():
                continue
            for port_name, protocol, port in ports:
                if port == -1 and (q.port or q.protocol):
                    continue
                if _matches(q.port, port_name) and _matches(q.protocol, protocol):
                    entries.append(_Entry(host=address, port=port, owner=f"{name}.{own}"))
        return entries
    entries = []
    for p in spec.get("ports") or ():
        if _matches(q.port, str(p.get("name") or "")) and _matches(
            q.protocol, str(p.get("protocol") or "TCP")
        ):
            port = int(p.get("port") or 0)
            entries.extend(_Entry(host=ip, port=port, owner=own) for ip in _cluster_ips(service))
    return entries


def _parse(base: list[str], q: _Query) -> bool:
    """Fill ``q`` from the labels before ``<ns>.svc``; False when the name cannot exist."""
    q.service = base[-1]
    rest = base[:-1]
    if len(rest) == 1:
        q.endpoint = rest[0]
    elif len(rest) == 2:
        q.port, q.protocol = (label.removeprefix("_") for label in rest)
    elif len(rest) > 2:
        return False
    return True


def _records(q: _Query, qtype: str) -> tuple[list[Record], list[Record], str | None]:
    """Answer and additional records of ``q.found`` for ``qtype``, and a name to chase."""
    answer: list[Record] = []
    extra: list[Record] = []
    chase = None
    seen: set[tuple[str, str, str]] = set()

    def add(into: list[Record], record: Record) -> None:
        key = (record.name.lower(), record.kind, record.data)
        if key not in seen:
            seen.add(key)
            into.append(record)

    owner = q.qname if q.qname.endswith(".") else q.qname + "."
    if qtype == "SRV":
        targets = {(e.port, e.owner if _kind_of(e.host) else e.host + ".") for e in q.found}
        weight = 100 // max(len(targets), 1)
        for e in q.found:
            if e.port < 0:
                continue
            kind = _kind_of(e.host)
            target = e.owner if kind else e.host + "."
            add(answer, Record(owner, "SRV", f"0 {weight} {e.port} {target}"))
            if kind:
                add(extra, Record(target, kind, e.host))
        return answer, extra, None
    for e in q.found:
        kind = _kind_of(e.host)
        if kind is None and qtype in ("A", "AAAA", "CNAME"):
            add(answer, Record(owner, "CNAME", e.host + "."))
            chase = e.host if qtype != "CNAME" else None
        elif kind == qtype:
            add(answer, Record(owner, kind, e.host))
    return answer, extra, chase


def _reverse(view: ClusterView, name: str, *, zone: str) -> Answer | None:
    labels = name.removesuffix("." + REVERSE_V4).split(".")
    if len(labels) != 4:
        return None
    ip = ".".join(reversed(labels))
    targets = [
        f"{(s.get('metadata') or {}).get('name')}.{(s.get('metadata') or {}).get('namespace')}"
        f".svc.{zone}."
        for s in view.services_with_ip(ip)
    ]
    for eps in view.slices_with_address(ip):
        meta = eps.get("metadata") or {}
        service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        for address, hostname, _ in _ready_endpoints([eps], all_of_them=False):
            if address == ip and service:
                targets.append(
                    f"{hostname or _dashed(ip)}.{service}.{meta.get('namespace')}.svc.{zone}."
                )
    if not targets:
        return None
    return Answer(answer=tuple(Record(name + ".", "PTR", t) for t in dict.fromkeys(targets)))


def _apex(view: ClusterView, q: _Query, qtype: str, *, dns_ips: tuple[str, ...]) -> Answer:
    zone = q.zone
    if qtype == "SOA":
        return Answer(answer=(soa(zone, serial=view.generation),))
    if qtype == "NS":
        ns = f"ns.dns.{zone}."
        glue = tuple(Record(ns, kind, ip) for ip in dns_ips if (kind := _kind_of(ip)))
        return Answer(answer=(Record(f"{zone}.", "NS", ns),), additional=glue)
    return _nodata(view, zone)


def _nodata(view: ClusterView, zone: str) -> Answer:
    return Answer(authority=(soa(zone, serial=view.generation),))


def _nxdomain(view: ClusterView, zone: str) -> Answer:
    return Answer(rcode=NXDOMAIN, authority=(soa(zone, serial=view.generation),))


def resolve(
    view: ClusterView,
    qname: str,
    qtype: str,
    *,
    zone: str = DEFAULT_ZONE,
    dns_ips: tuple[str, ...] = (),
) -> Answer | None:
    """The answer to ``qname``/``qtype`` (``"A"``, ``"SRV"``, ...), or None when the name is
    not the cluster's to answer (the server forwards it). ``dns_ips``: the DNS server's own
    addresses, for ``ns.dns.<zone>``."""
    name = qname.lower().rstrip(".")
    zone = zone.lower().rstrip(".")
    if name.endswith("." + REVERSE_V4):
        return _reverse(view, name, zone=zone) if qtype == "PTR" else None
    if name != zone and not name.endswith("." + zone):
        return None
    q = _Query(zone=zone, qname=qname)
    base = name[: -len(zone)].rstrip(".").split(".") if name != zone else []
    if not base:
        return _apex(view, q, qtype, dns_ips=dns_ips)
    if base == ["ns", "dns"]:
        owner = qname.rstrip(".") + "."
        own = tuple(Record(owner, qtype, ip) for ip in dns_ips if _kind_of(ip) == qtype)
        return Answer(answer=own) if own else _nodata(view, zone)
    kind = base.pop()
    if kind not in ("svc", "pod"):
        return _nxdomain(view, zone)
    if not base:
        return _nodata(view, zone)
    q.namespace = base.pop()
    if not view.namespace_exists(q.namespace):
        return _nxdomain(view, zone)
    if not base:
        return _nodata(view, zone)
    if kind == "pod":
        ip = base[0].replace("-", "." if base[0].count("-") == 3 else ":")
        if len(base) != 1 or _kind_of(ip) is None:
            return _nxdomain(view, zone)
        q.found = [_Entry(host=str(ipaddress.ip_address(ip)), port=0, owner=qname)]
    else:
        if not _parse(base, q):
            return _nxdomain(view, zone)
        service = view.service(q.namespace, q.service)
        q.found = _service_entries(view, q, service) if service is not None else []
        if not q.found:
            return _nxdomain(view, zone)
    answer, extra, chase = _records(q, qtype)
    if not answer:
        return _nodata(view, zone)
    return Answer(answer=tuple(answer), additional=tuple(extra), chase=chase)
