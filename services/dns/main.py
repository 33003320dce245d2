"""``kubelite dns`` / ``python -m services.dns``: flags -> options -> the runtime.

The cluster's CoreDNS. Flags:

* ``--cluster-domain`` (``cluster.local``): the zone served;
* ``--cluster-dns-ip`` (``127.128.0.10``, the tenth address of the apiserver's default
  ``--service-cluster-ip-range``): the ClusterIP of ``kube-system/kube-dns``, which the server
  registers (``kube_dns.py``); empty: no registration;
* ``--dns-bind-address`` (default: the ``--cluster-dns-ip``) and ``--dns-port`` (53; 0 picks a
  free one): where the server answers, over UDP and TCP. Port 53 needs root; elsewhere the
  Service's ``targetPort`` and slice say where it is, and ``kubelite proxy`` forwards ``.10:53``;
* ``--upstream`` (repeatable, comma-separated ``ip[:port]``): where names outside the zone go;
  default: the ``nameserver`` lines of ``--resolv-conf`` (``/etc/resolv.conf``), as CoreDNS's
  ``forward . /etc/resolv.conf``;
* ``--healthz-bind-address:--healthz-port`` (127.0.0.1:8181 — CoreDNS's ``ready`` port; its
  ``health`` port, 8080, is the apiserver's here);
* the shared client and log flags.

The ready lines: ``kubelite: dns dns listening on dns://<address>:<port>`` and the health
server's ``http://`` line (``component.ready``).
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence
from pathlib import Path

import component
from client.kubeconfig import DEFAULT_SERVER, ClientConfig, KubeconfigError, add_client_arguments
from component.flags import add_health_flags, add_log_flags, health_address, log_flags, port
from services.dns.records import DEFAULT_TTL, DEFAULT_ZONE
from services.dns.service import DnsOptions, DnsService
from services.dns.upstream import Upstream, parse_upstream

__all__ = ["build_parser", "main", "parse_args"]

HEALTH_PORT = 8181
"""CoreDNS's ``ready`` plugin port (its ``health`` port, 8080, is the apiserver's here)."""
DEFAULT_CLUSTER_DNS_IP = "127.128.0.10"
"""The tenth address of the apiserver's default service range, 127.128.0.0/16."""
DNS_PORT = 53


def _upstreams(values: Sequence[str]) -> list[Upstream]:
    out = []
    for value in values:
        for item in filter(None, (v.strip() for v in value.split(","))):
            try:
                out.append(parse_upstream(item))
            except ValueError as exc:
                raise argparse.ArgumentTypeError(f"--upstream {item!r}: {exc}") from None
    return out


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite dns",
        description="The kubelite cluster DNS: <svc>.<ns>.svc.cluster.local and pod names from "
        "Services and EndpointSlices; other names forwarded to the host's resolvers.",
    )
    add_client_arguments(p)
    p.add_argument(
        "--cluster-domain", default=DEFAULT_ZONE, help="the zone served (default: %(default)s)"
    )
    p.add_argument(
        "--cluster-dns-ip",
        default=DEFAULT_CLUSTER_DNS_IP,
        help="ClusterIP of the kube-system/kube-dns Service this server registers; empty: "
        "register nothing (default: %(default)s)",
    )
    p.add_argument(
        "--dns-bind-address",
        default=None,
        help="address the DNS server answers on, UDP and TCP (default: --cluster-dns-ip)",
    )
    p.add_argument(
        "--dns-port",
        type=port,
        default=DNS_PORT,
        help="port of the DNS server; 0 picks a free one, printed on the ready line "
        "(default: %(default)s, which needs root)",
    )
    p.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="IP[:PORT]",
        help="resolver for names outside the zone (repeat or comma-separate; default: the "
        "nameservers of --resolv-conf)",
    )
    p.add_argument(
        "--resolv-conf",
        type=Path,
        default=Path("/etc/resolv.conf"),
        help="where the default upstreams are read (default: %(default)s)",
    )
    p.add_argument(
        "--ttl", type=int, default=DEFAULT_TTL, help="TTL of cluster answers (default: 5)"
    )
    add_health_flags(p, default_port=HEALTH_PORT)
    add_log_flags(p)
    return p


def parse_args(argv: Sequence[str]) -> tuple[DnsOptions, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    try:
        client = ClientConfig.from_args(args, default_server=DEFAULT_SERVER).with_options(
            user_agent="kubelite-dns"
        )
        upstreams = _upstreams(args.upstream)
        for flag, value in (("--cluster-dns-ip", args.cluster_dns_ip),
                            ("--dns-bind-address", args.dns_bind_address)):  # fmt: skip
            if value and not _is_ip(value):
                raise ValueError(f"{flag} {value!r} is not an IP address")
    except (KubeconfigError, ValueError, argparse.ArgumentTypeError) as exc:
        parser.error(str(exc))
    bind = args.dns_bind_address or args.cluster_dns_ip
    if not bind:
        parser.error("--dns-bind-address is needed when --cluster-dns-ip is empty")
    if not 0 <= args.ttl <= 3600:
        parser.error("--ttl must be between 0 and 3600 seconds")
    options = DnsOptions(
        client=client,
        zone=args.cluster_domain.strip(".").lower(),
        cluster_dns_ip=args.cluster_dns_ip,
        bind_address=bind,
        port=args.dns_port,
        upstreams=tuple(upstreams),
        resolv_conf=args.resolv_conf,
        ttl=args.ttl,
        health=health_address(args),
    )
    return options, args


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_args(sys.argv[1:] if argv is None else argv)
    component.setup_logging(log_flags(args).level)
    return component.run(lambda: DnsService(options), component="dns")
