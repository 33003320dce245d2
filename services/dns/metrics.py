"""The DNS server's ``/metrics``: CoreDNS's metric names, so its dashboards read kubelite's DNS.

* ``coredns_dns_requests_total{server,zone,view,proto,family,type}``: queries, by the zone that
  took them (the cluster zone, ``cluster.local.``, or ``.`` for names forwarded upstream),
  transport (``udp``/``tcp``), address family (``1`` IPv4, ``2`` IPv6) and query type (``A``,
  ``AAAA``, ``SRV``, ``PTR`` ...; a type CoreDNS does not list is ``other``);
* ``coredns_dns_responses_total{server,zone,view,rcode,plugin}``: answers by rcode
  (``NOERROR``, ``NXDOMAIN``, ``SERVFAIL`` ...) and by who made them (``kubernetes`` for a
  record, ``cache`` for a cached record, ``forward`` for an upstream's answer);
* ``coredns_dns_request_duration_seconds{server,zone,view,type}``: from the query's arrival to
  its answer (CoreDNS's buckets: 0.25 ms doubling 16 times).

``server`` is ``dns://<address>:<port>`` as CoreDNS names a server block, ``family`` that
address's; ``view`` is empty (no views). A query refused before its name was looked at
(NOTIMP, FORMERR) is counted under zone ``.`` with no plugin. Queries that do not parse are dropped before they are counted, as CoreDNS drops
them. Not here: request and response sizes, cache hit/miss counters, per-upstream forward counts.
"""

from __future__ import annotations

import struct
from typing import Final

import dns.rcode
import dns.rdatatype

from component.metrics import Metrics, exponential_buckets

__all__ = ["DnsMetrics"]

_TYPES: Final = frozenset(
    {"A", "AAAA", "CNAME", "HINFO", "MX", "NS", "PTR", "SOA", "SRV", "TXT", "NAPTR", "DS"}
    | {"DNSKEY", "NSEC", "NSEC3", "RRSIG", "IXFR", "AXFR", "ANY", "HTTPS", "SVCB", "CAA"}
)
"""The query types CoreDNS counts by name (``plugin/pkg/dnstest``'s monitored types)."""

_BUCKETS: Final = exponential_buckets(0.00025, 2, 16)


def _qtype(query: bytes) -> str:
    """The first question's type, read off the wire (``other`` when unlisted or unreadable)."""
    at = 12
    try:
        while query[at]:
            at += query[at] + 1
        (rdtype,) = struct.unpack_from("!H", query, at + 1)
    except (IndexError, struct.error):
        return "other"
    name = dns.rdatatype.to_text(rdtype)
    return name if name in _TYPES else "other"


def _rcode(reply: bytes) -> str:
    return dns.rcode.to_text(dns.rcode.Rcode(reply[3] & 0x0F)) if len(reply) > 3 else "other"


class DnsMetrics:
    """One DNS server's counters; ``served`` records one answered query."""

    def __init__(self, metrics: Metrics) -> None:
        self.server = "dns://:53"
        self.family = "1"
        self.requests = metrics.counter(
            "coredns_dns_requests_total",
            "Counter of DNS requests made per zone, protocol and family.",
            ("server", "zone", "view", "proto", "family", "type"),
        )
        self.responses = metrics.counter(
            "coredns_dns_responses_total",
            "Counter of response status codes.",
            ("server", "zone", "view", "rcode", "plugin"),
        )
        self.durations = metrics.histogram(
            "coredns_dns_request_duration_seconds",
            "Histogram of the time (in seconds) each request took per zone.",
            ("server", "zone", "view", "type"),
            buckets=_BUCKETS,
        )

    def listening(self, host: str, port: int) -> None:
        """The server's address, for the ``server`` and ``family`` labels."""
        self.server = f"dns://{host}:{port}"
        self.family = "2" if ":" in host else "1"

    def served(
        self, query: bytes, reply: bytes, *, zone: str, plugin: str, tcp: bool, seconds: float
    ) -> None:
        """One query answered with ``reply`` by ``plugin`` for ``zone``."""
        qtype = _qtype(query)
        proto = "tcp" if tcp else "udp"
        self.requests.labels(self.server, zone, "", proto, self.family, qtype).inc()
        self.responses.labels(self.server, zone, "", _rcode(reply), plugin).inc()
        self.durations.labels(self.server, zone, "", qtype).observe(seconds)
