"""``kubelite proxy`` / ``python -m services.proxy``: flags -> options -> the runtime.

Parses the kube-proxy flags kubelite implements into ``ProxyOptions`` and hands
``service.ProxyService`` to the component runtime (``component.run``). Health on
``--healthz-bind-address:--healthz-port`` (127.0.0.1:10256, kube-proxy's port; 0 picks one,
named by the ``kubelite: proxy health listening on ...`` line).

kubelite's own spellings, where kube-proxy's do not fit loopback:

* ``--hostname-override`` (alias ``--node-name``) takes one node name or several,
  comma-separated: one proxy serves every node that shares its network namespace (under
  ``kubelite up`` all kubelets share the host's loopback), and endpoints on any of them are
  local for ``externalTrafficPolicy``/``internalTrafficPolicy: Local``;
* ``--nodeport-addresses`` lists the IPv4 *addresses* node ports listen on (default
  ``127.0.0.1``, the nodes' InternalIP; ``0.0.0.0`` for every address) — kube-proxy takes
  CIDRs and matches them against the node's interfaces;
* ``--balance random|round-robin``: iptables mode's random choice, or IPVS's round-robin;
* ``--udp-timeout``: how long an idle UDP flow lives (conntrack's 30 s).
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from collections.abc import Sequence

import component
from client.kubeconfig import DEFAULT_SERVER, ClientConfig, KubeconfigError, add_client_arguments
from component.flags import add_health_flags, add_log_flags, duration, health_address, log_flags
from services.proxy.balancer import MODES
from services.proxy.service import HEALTH_PORT, ProxyOptions, ProxyService
from services.proxy.service_table import NodeIdentity
from services.proxy.udp_forwarder import DEFAULT_IDLE_TIMEOUT

__all__ = ["build_parser", "main", "parse_args"]


def _addresses(text: str) -> tuple[str, ...]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            address = ipaddress.ip_address(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not an IP address") from None
        if address.version != 4:
            raise argparse.ArgumentTypeError(f"{part}: only IPv4 addresses are served")
        out.append(str(address))
    if not out:
        raise argparse.ArgumentTypeError("expected at least one address")
    return tuple(out)


def _names(text: str) -> frozenset[str]:
    return frozenset(filter(None, (n.strip().lower() for n in text.split(","))))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite proxy",
        description="The kubelite proxy (kube-proxy's job): forwards TCP and UDP from every "
        "Service's ClusterIP, node ports and load-balancer addresses to its ready endpoints.",
    )
    add_client_arguments(p)
    p.add_argument(
        "--hostname-override",
        "--node-name",
        dest="node_names",
        type=_names,
        default=None,
        metavar="NAME[,NAME...]",
        help="the node(s) this proxy serves, comma-separated (their endpoints are local for "
        "traffic policy Local; default: this host's name)",
    )
    p.add_argument(
        "--nodeport-addresses",
        type=_addresses,
        default=("127.0.0.1",),
        metavar="IP[,IP...]",
        help="addresses node ports listen on (default: 127.0.0.1, the nodes' InternalIP)",
    )
    p.add_argument(
        "--balance",
        choices=MODES,
        default="random",
        help="how a new connection picks an endpoint (default: random, as iptables mode)",
    )
    p.add_argument(
        "--udp-timeout",
        type=duration,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="DURATION",
        help="idle time after which a UDP flow ends (default: 30s)",
    )
    add_health_flags(p, default_port=HEALTH_PORT)
    add_log_flags(p)
    return p


def parse_args(argv: Sequence[str]) -> tuple[ProxyOptions, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    try:
        client = ClientConfig.from_args(args, default_server=DEFAULT_SERVER).with_options(
            user_agent="kubelite-proxy"
        )
    except (KubeconfigError, ValueError, OSError) as exc:
        parser.error(str(exc))
    if args.udp_timeout <= 0:
        parser.error("--udp-timeout must be positive")
    names = args.node_names or frozenset({socket.gethostname().lower()})
    options = ProxyOptions(
        client=client,
        node=NodeIdentity(names=names, node_port_addresses=args.nodeport_addresses),
        health=health_address(args),
        mode=args.balance,
        udp_idle_timeout=args.udp_timeout,
    )
    return options, args


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_args(sys.argv[1:] if argv is None else argv)
    component.setup_logging(log_flags(args).level)
    return component.run(lambda: ProxyService(options), component="proxy")
