"""``kubelite up``: the whole cluster as separate OS processes under one supervisor.

What it owns: one child process per component — the apiserver, the controller-manager, the
scheduler, the proxy (one for every node: the kubelets share this host's loopback, so one
``kubelite proxy`` standing for all of them forwards every Service), the cluster DNS
(``kubelite dns`` on the ``.10`` address of the cluster's service range, port 53 — any free
port when ``up`` is not root, where pods cannot use it) and one kubelet per node (``--cluster-dns``
pointing there) — each started as ``python -m services.<name>`` exactly as a
person would start it by hand, so the processes talk only through the apiserver, as in a real
cluster. ``plan(opts)`` is that list of command lines, built by ``kubelite.commands`` (the one
argv source the compose file, the tests and the benchmarks use too).
The supervisor

* starts the apiserver first and the others once it prints its ready line (they would only
  retry against a closed port meanwhile); with ``--port 0`` the others are given the port the
  apiserver printed;
* prefixes every line a child prints with the child's name (coloured on a terminal), and reads
  each child's ready lines (``component.ready``) for the ports it actually bound;
* restarts a child that dies, after a jittered back-off that grows while it keeps dying and
  resets once it has stayed up for a while, and says so — except a child that exits at once with
  a usage error (exit code 2), or one that cannot listen on its port (exit code 3, at any time):
  restarting cannot help either, so ``up`` stops;
* waits until every child has printed its ready line and every node reports Ready *with a
  heartbeat from this run* (a resumed state dir still holds the Ready conditions of the last
  run), watched through ``client.watch``, not polled; then prints where the API is, every
  component's endpoints with their actual ports, the kubeconfig it wrote, and commands to try;
* on Ctrl-C or SIGTERM stops the kubelets first (``--stop-pods-on-exit``: they stop their pods'
  processes), then the controllers, the proxy and the DNS, then the apiserver, escalating to SIGKILL for any child that
  outlives its grace period; a second Ctrl-C kills everything at once;
* with ``--chaos``, once the cluster is up, SIGKILLs a random component every
  ``--chaos-interval`` (never the last etcd quorum member, nor an apiserver over ``memory://``)
  and says when it is back (``kubelite.chaos``): the restarts above heal the cluster.

**Security** (``cluster_pki``): before the first child starts, the cluster's CA, the
apiserver's serving certificate, the admin's and every component's client certificates and the
service-account key are made (or reused) under ``<state-dir>/pki``; the apiserver serves HTTPS
on ``--secure-port`` (6443) with them beside the plain loopback port, and ``<state-dir>/kubeconfig``
names ``https://<bind-address>:<secure-port>`` with the admin certificate (``system:masters``);
each component's own kubeconfig is written to ``<state-dir>/kubeconfigs/``. Each kubelet
serves its logs/exec/port-forward port over TLS (``kubelet-<node>.crt``), authenticating every
caller and asking the apiserver about each (``--authentication-token-webhook``,
``--authorization-mode=Webhook``; its ``/healthz`` moves to a free health port); the apiserver
reaches it with ``apiserver-kubelet-client.crt`` and checks its certificate against
``ca.crt``. Every component — the controller-manager
(``system:kube-controller-manager``), the scheduler (``system:kube-scheduler``), the proxy
(``system:kube-proxy``), the DNS (``system:serviceaccount:kube-system:coredns``) and each
kubelet (``system:node:<name>``, held to its own node by the Node authorizer and
NodeRestriction) — is started with ``--kubeconfig=<state-dir>/kubeconfigs/<name>.conf`` and
no ``--server``: it reaches the secure port as itself, and the bootstrap RBAC roles say what
it may do; ``up`` itself watches the nodes as the admin. With ``--port -1`` the plain port
is closed, so nothing can fall back to it; with ``--secure-port -1`` everything uses the
plain port, unauthenticated.

**etcd and high availability.** ``--store etcd`` starts a local etcd member first (``kubelite
etcd member``, data in ``<state-dir>/etcd/etcd-1``, ports ``--etcd-port`` and the next one),
supervised and restarted like every child and stopped last; the apiserver uses it. ``--ha``
starts three members as one cluster (``--initial-cluster`` on loopback ports), three
apiservers on the bind address + 1, + 2 and + 3 — all at the same port numbers, so the
``kubernetes`` Service's endpoints name them as Kubernetes' do — then ``kubelite front`` on
the bind address itself at the port the kubeconfigs name (``https://<bind-address>:6443``), and
two schedulers and two controller-managers with ``--leader-elect``: every component and
kubectl reach the API through the front, which skips an apiserver that is down, and the
standbys take over within a lease duration when a leader dies. A port given as 0 is picked
once, before the first start, so restarted children come back on the same addresses.

All state lives under ``--state-dir`` (the SQLite store, each kubelet's pod state), so a second
``kubelite up`` on the same directory resumes the cluster as it was: same objects, and the pods'
containers started again in place (same pod IPs) by their kubelets. Each cluster's pod
addresses come from a block of 127/8 derived from its state dir (``cluster_pod_cidr``), and so
do its Service addresses (``cluster_service_cidr``, a /20 in 127.128.0.0-127.191.255.255), so two
clusters in two state dirs run side by side (with different ``--port`` and ``--kubelet-port``).

What it does not do: it is not a production init system. It watches its own children only; a
child that forks and detaches is that child's business (pods' processes are the kubelets'). If
``up`` itself is SIGKILLed, its children get SIGTERM from the kernel (``PR_SET_PDEATHSIG``, Linux)
and stop as on Ctrl-C, but nobody escalates to SIGKILL for them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import ipaddress
import json
import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import uvloop

from api.errors import StatusError
from api.registry import REGISTRY, ResourceType
from client.rest import ApiClient
from component.flags import add_log_flags, duration, port, port_or_off
from kubelite import cluster_pki, commands
from kubelite.chaos import Chaos, ChaosOptions
from kubelite.supervision import COLOURS, Child, Supervision

__all__ = [
    "STOP_ORDER",
    "Child",
    "Options",
    "Supervisor",
    "build_parser",
    "ensure_pki",
    "main",
    "parse_options",
    "plan",
]

STOP_ORDER = (
    ("kubelet",),
    ("controller-manager", "scheduler", "proxy", "dns"),
    ("front",),
    ("apiserver",),
    ("etcd",),
)
"""How ``up`` stops: kubelets first (they stop their pods), then the controllers, the proxy
and the DNS, then the front, the apiservers they all talk to, and etcd last."""
# How long each child gets to exit after SIGTERM before SIGKILL. Kubelets stop their pods'
# processes on the way out (SIGTERM, then SIGKILL after 10 s), so they get longer.
STOP_GRACE = {"kubelet": 20.0}
HEARTBEAT_SLACK = timedelta(seconds=2)
"""A node's Ready heartbeat counts as this run's if it is no older than the start minus this
(heartbeats have one-second resolution on the wire)."""
STORE_SCHEMES = ("memory://", "sqlite://", "etcd://")
LOCAL_ETCD = "etcd"
"""``--store etcd``: a local etcd member that ``up`` starts (``--ha``: three)."""
HA_APISERVERS = 3
HA_ETCD_MEMBERS = 3
HA_STANDBYS = 2
"""``--ha`` runs this many schedulers and controller-managers; leader election picks who works."""
ETCD_READY_LINE = "ready to serve client requests"
"""etcd's own log line once it serves clients (a member of a cluster: once it has a quorum)."""
RELIST_PAUSE = 0.5
"""Seconds before listing nodes again after the node watch broke (the apiserver restarting)."""


def _nodes() -> ResourceType:
    rt = REGISTRY.by_kind("", "Node")
    if rt is None:  # pragma: no cover - the registry always serves nodes
        raise RuntimeError("the registry has no Node")
    return rt


@dataclass(frozen=True, slots=True)
class Options:
    state_dir: Path
    port: int
    bind_address: str
    nodes: int
    runtime: str
    store: str
    kubelet_port: int
    scheduler_port: int
    controller_manager_port: int
    pod_cidr: str | None
    colour: bool
    log_level: str
    ready_timeout: float
    verbosity: int | None = None
    proxy_port: int = 10256
    dns_health_port: int = 8181
    secure_port: int = 6443
    etcd_ports: tuple[tuple[int, int], ...] = ()
    """(client, peer) port of each local etcd member ``up`` starts (none: ``--store`` names
    an external store)."""
    apiservers: int = 1
    standbys: int = 1
    """How many schedulers and controller-managers run (more than one: leader election)."""
    chaos: ChaosOptions | None = None
    """``--chaos``: kill a random component on an interval once the cluster is up."""

    @property
    def ha(self) -> bool:
        return self.apiservers > 1

    @property
    def server(self) -> str:
        return f"http://{self.bind_address}:{self.port}"

    @property
    def secure_server(self) -> str:
        return f"https://{self.bind_address}:{self.secure_port}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite up",
        description="Start a local kubelite cluster: apiserver, controller-manager, scheduler and "
        "N kubelets as supervised OS processes. Ctrl-C stops everything (pods' processes too); "
        "running it again on the same --state-dir resumes the cluster.",
    )
    p.add_argument(
        "--state-dir",
        default="./.kubelite",
        help="where the store, the kubeconfig and each kubelet's state live (default ./.kubelite)",
    )
    p.add_argument(
        "--port",
        type=port_or_off,
        default=8080,
        help="the apiserver's plain-HTTP port (loopback, no authentication); 0 picks a free "
        "one, shown in the banner; -1 closes it — the cluster then runs on the secure port "
        "alone (default 8080)",
    )
    p.add_argument(
        "--bind-address",
        default="127.0.0.1",
        help="address the apiserver's HTTP and HTTPS ports bind to (default 127.0.0.1, local only)",
    )
    p.add_argument(
        "--secure-port",
        type=port_or_off,
        default=6443,
        help="the apiserver's HTTPS port (TLS, authentication; the kubeconfig's server); 0 "
        "picks a free one, -1 serves none (default 6443)",
    )
    p.add_argument(
        "--nodes", type=int, default=2, help="number of kubelets: node1..nodeN (default 2)"
    )
    p.add_argument(
        "--runtime",
        choices=("process", "sim"),
        default="process",
        help="kubelet runtime: real OS processes, or simulated containers (default process)",
    )
    p.add_argument(
        "--store",
        default=None,
        help="store URL: memory://, sqlite:///path.db, etcd://host:2379[,host:port...], or "
        "etcd: a local etcd member up starts, its data in <state-dir>/etcd "
        "(default sqlite:///<state-dir>/kubelite.db)",
    )
    p.add_argument(
        "--etcd-port",
        type=port,
        default=2379,
        help="client port of the local etcd member (--store etcd); its peer port is the next "
        "one; with --ha the members use this port, +2 and +4; 0 picks free ports "
        "(default 2379)",
    )
    p.add_argument(
        "--ha",
        action="store_true",
        help="run highly available: 3 etcd members, 3 apiservers (on the bind address + 1, "
        "+ 2, + 3) behind the front on the bind address, 2 schedulers and 2 "
        "controller-managers with leader election; needs a fresh --state-dir",
    )
    p.add_argument(
        "--kubelet-port",
        type=port,
        default=10250,
        help="port of node1's kubelet server (logs, exec, /healthz); nodeK uses this + K-1; "
        "0 lets each pick a free one, shown in the banner (default 10250)",
    )
    p.add_argument(
        "--scheduler-port",
        type=port_or_off,
        default=10259,
        help="port of the scheduler's /healthz and /metrics; 0 picks a free one, shown in the "
        "banner; -1 serves none (default 10259)",
    )
    p.add_argument(
        "--controller-manager-port",
        type=port_or_off,
        default=10257,
        help="port of the controller-manager's /healthz; 0 picks a free one, shown in the "
        "banner; -1 serves none (default 10257)",
    )
    p.add_argument(
        "--proxy-port",
        type=port_or_off,
        default=10256,
        help="port of the proxy's /healthz; 0 picks a free one, shown in the banner; -1 serves "
        "none (default 10256)",
    )
    p.add_argument(
        "--dns-health-port",
        type=port_or_off,
        default=8181,
        help="port of the cluster DNS's /healthz and /ready; 0 picks a free one, shown in the "
        "banner; -1 serves none (default 8181)",
    )
    p.add_argument(
        "--pod-cidr",
        default=None,
        help="loopback range split evenly between the nodes for pod IPs, e.g. 127.100.0.0/16 "
        "(default: a /24 per node in a block of 127.1.0.0-127.127.255.255 derived from the "
        "state dir, so clusters in different state dirs do not share pod addresses)",
    )
    p.add_argument(
        "--no-color", action="store_true", help="never colour the log prefixes (default: on a TTY)"
    )
    chaos = p.add_argument_group("chaos")
    chaos.add_argument(
        "--chaos",
        action="store_true",
        help="once the cluster is up, SIGKILL a random component every --chaos-interval and "
        "say when it is back (never the last etcd quorum member): watch the cluster heal",
    )
    chaos.add_argument(
        "--chaos-interval",
        type=duration,
        default=30.0,
        help="time between two --chaos kills (default 30s)",
    )
    chaos.add_argument(
        "--chaos-seed",
        type=int,
        default=None,
        help="seed of --chaos's choice of victims (default: different each run)",
    )
    add_log_flags(p)  # passed on to every component
    p.add_argument(
        "--ready-timeout",
        type=duration,
        default=60.0,
        help="time to wait for the apiserver and every node to be ready (default 1m)",
    )
    return p


def parse_options(argv: Sequence[str]) -> Options:
    parser = build_parser()
    ns = parser.parse_args(list(argv))
    if ns.nodes < 0:
        parser.error("--nodes must be >= 0")
    if ns.pod_cidr is not None:
        try:
            node_pod_cidrs(ns.pod_cidr, max(ns.nodes, 1))
        except ValueError as exc:
            parser.error(f"--pod-cidr: {exc}")
    elif ns.nodes:
        try:
            cluster_pod_cidr(Path(ns.state_dir), ns.nodes)
        except ValueError as exc:
            parser.error(f"--nodes {ns.nodes}: {exc}")
    if ns.chaos_interval <= 0:
        parser.error("--chaos-interval must be positive")
    if ns.port == -1 and ns.secure_port == -1:
        parser.error("--port -1 with --secure-port -1: the apiserver would serve nothing")
    local_etcd = ns.store == LOCAL_ETCD or (ns.ha and ns.store is None)
    if ns.store is not None and not local_etcd and not ns.store.startswith(STORE_SCHEMES):
        parser.error(
            f"--store {ns.store!r}: expected {LOCAL_ETCD} or one of {', '.join(STORE_SCHEMES)}"
        )
    if ns.ha and not local_etcd:
        parser.error("--ha starts its own etcd members: leave --store out (or say etcd)")
    state_dir = Path(ns.state_dir).resolve()
    etcd_ports: tuple[tuple[int, int], ...] = ()
    if local_etcd:
        etcd_ports = local_etcd_ports(ns.etcd_port, HA_ETCD_MEMBERS if ns.ha else 1)
        store = etcd_url(etcd_ports)
    else:
        store = ns.store or f"sqlite://{state_dir / 'kubelite.db'}"
    port, secure_port = ns.port, ns.secure_port
    if ns.ha:
        try:
            addresses = ha_apiserver_addresses(ns.bind_address)
        except ValueError as exc:
            parser.error(f"--ha: {exc}")
        port, secure_port = (
            shared_free_port([ns.bind_address, *addresses]) if chosen == 0 else chosen
            for chosen in (ns.port, ns.secure_port)
        )
    return Options(
        state_dir=state_dir,
        port=port,
        bind_address=ns.bind_address,
        nodes=ns.nodes,
        runtime=ns.runtime,
        store=store,
        etcd_ports=etcd_ports,
        apiservers=HA_APISERVERS if ns.ha else 1,
        standbys=HA_STANDBYS if ns.ha else 1,
        kubelet_port=ns.kubelet_port,
        scheduler_port=ns.scheduler_port,
        controller_manager_port=ns.controller_manager_port,
        proxy_port=ns.proxy_port,
        dns_health_port=ns.dns_health_port,
        secure_port=secure_port,
        pod_cidr=ns.pod_cidr,
        colour=not ns.no_color and sys.stdout.isatty(),
        log_level=ns.log_level,
        ready_timeout=ns.ready_timeout,
        verbosity=ns.verbosity,
        chaos=ChaosOptions(ns.chaos_interval, ns.chaos_seed) if ns.chaos else None,
    )


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def shared_free_port(hosts: Sequence[str]) -> int:
    """A port free on every one of ``hosts`` right now (the front's and the apiservers'
    addresses share one port number, as apiservers behind one Service do)."""
    for _ in range(50):
        chosen = _free_port(hosts[0])
        if all(_bindable(host, chosen) for host in hosts[1:]):
            return chosen
    raise RuntimeError(f"no port is free on all of {', '.join(hosts)}")


def local_etcd_ports(base: int, members: int) -> tuple[tuple[int, int], ...]:
    """(client, peer) ports of each local member: ``base``, ``base + 1`` for the first, and
    two more for each next one; ``base`` 0 picks free ports (once: restarts reuse them)."""
    if base == 0:
        return tuple((_free_port(), _free_port()) for _ in range(members))
    if base + 2 * members > 65536:
        raise ValueError(f"--etcd-port {base}: too high for {members} member(s)")
    return tuple((base + 2 * i, base + 2 * i + 1) for i in range(members))


def etcd_url(ports: Sequence[tuple[int, int]]) -> str:
    return "etcd://" + ",".join(f"127.0.0.1:{client}" for client, _ in ports)


def ha_apiserver_addresses(bind_address: str) -> list[str]:
    """Where ``--ha``'s apiservers listen: the bind address + 1, + 2, + 3 (on loopback, one
    port number for all of them and the front, which takes the bind address itself)."""
    try:
        base = ipaddress.IPv4Address(bind_address)
    except ValueError:
        raise ValueError(f"needs an IPv4 --bind-address, not {bind_address!r}") from None
    if not base.is_loopback:
        raise ValueError(
            f"the apiservers listen beside the front on the next loopback addresses; "
            f"{bind_address} is not a loopback address"
        )
    return [str(base + k) for k in range(1, HA_APISERVERS + 1)]


def apiserver_addresses(opts: Options) -> list[str]:
    """The address each apiserver binds: the bind address, or ``--ha``'s own."""
    return ha_apiserver_addresses(opts.bind_address) if opts.ha else [opts.bind_address]


def _numbered(name: str, count: int) -> list[str]:
    return [name] if count == 1 else [f"{name}-{k}" for k in range(1, count + 1)]


def node_names(count: int) -> list[str]:
    return [f"node{i}" for i in range(1, count + 1)]


CLUSTER_POD_POOL = ipaddress.IPv4Network("127.0.0.0/9")
"""Where ``up`` picks each cluster's pod range: 127.1.0.0-127.127.255.255 (127.0/16 is the
host's own; 127.128/9 is left to the sim runtime's defaults and to explicit ranges)."""
NODE_POD_PREFIX = 24
"""A /24 per node: 253 pod addresses, over twice the kubelet's default ``--max-pods`` of 110."""
CLUSTER_POD_PREFIX = 20
"""A cluster's block holds 16 nodes' /24s (more nodes: the smallest block that fits, up to a
/16); the block does not depend on ``--nodes`` up to 16, so adding a node keeps the others'."""


def cluster_pod_cidr(state_dir: Path, nodes: int) -> str:
    """The default pod block of the cluster kept in ``state_dir``: aligned, at a place in
    ``CLUSTER_POD_POOL`` chosen by a hash of the directory's absolute path.

    Two clusters in different directories get different blocks (two /20s meet 1 time in 2,032,
    and the kubelets also skip addresses some socket already uses); the same directory gets the
    same block on every start, so resumed pods keep their addresses.
    """
    bits = max(nodes - 1, 0).bit_length()
    prefix = min(CLUSTER_POD_PREFIX, NODE_POD_PREFIX - bits)
    if prefix < 16:
        raise ValueError(f"{nodes} nodes need more than a /16 of pod addresses: pass --pod-cidr")
    pool = CLUSTER_POD_POOL
    slots = 1 << (prefix - pool.prefixlen)
    reserved = 1 << (prefix - 16)  # the blocks inside 127.0.0.0/16
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).digest()
    slot = reserved + int.from_bytes(digest[:8], "big") % (slots - reserved)
    block = int(pool.network_address) + (slot << (32 - prefix))
    return f"{ipaddress.IPv4Address(block)}/{prefix}"


CLUSTER_SERVICE_POOL = ipaddress.IPv4Network("127.128.0.0/10")
"""Where ``up`` picks each cluster's service range: 127.128.0.0-127.191.255.255, disjoint from
every pod block; LoadBalancer ingress addresses come from above it."""
CLUSTER_SERVICE_PREFIX = 20
"""4,094 ClusterIPs per cluster."""
DNS_SERVICE_INDEX = 10
"""The cluster DNS Service takes the tenth address of the range (kubeadm's convention)."""


def cluster_service_cidr(state_dir: Path) -> str:
    """The service range of the cluster kept in ``state_dir`` (the apiserver's
    ``--service-cluster-ip-range``): a /20 of ``CLUSTER_SERVICE_POOL`` chosen by a hash of the
    directory's absolute path, the same on every start."""
    pool = CLUSTER_SERVICE_POOL
    slots = 1 << (CLUSTER_SERVICE_PREFIX - pool.prefixlen)
    digest = hashlib.sha256(b"services:" + str(state_dir.resolve()).encode()).digest()
    slot = int.from_bytes(digest[:8], "big") % slots
    block = int(pool.network_address) + (slot << (32 - CLUSTER_SERVICE_PREFIX))
    return f"{ipaddress.IPv4Address(block)}/{CLUSTER_SERVICE_PREFIX}"


def cluster_dns_ip(service_cidr: str) -> str:
    """The ClusterIP of ``kube-system/kube-dns``: the tenth address of the service range."""
    return str(ipaddress.IPv4Network(service_cidr)[DNS_SERVICE_INDEX])


def cluster_node_pod_cidrs(state_dir: Path, count: int) -> list[str]:
    """node1 gets the first /24 of the cluster's block, node2 the next, and so on."""
    block = ipaddress.IPv4Network(cluster_pod_cidr(state_dir, count))
    subnets = block.subnets(new_prefix=NODE_POD_PREFIX)
    return [str(net) for _, net in zip(range(count), subnets, strict=False)]


def node_pod_cidrs(cidr: str, count: int) -> list[str]:
    """Split a loopback range into ``count`` equal blocks, one per node, in node order."""
    network = ipaddress.ip_network(cidr, strict=False)
    if not isinstance(network, ipaddress.IPv4Network) or not network.subnet_of(
        ipaddress.IPv4Network("127.0.0.0/8")
    ):
        raise ValueError(f"{cidr} is not inside 127.0.0.0/8 (pod traffic stays on loopback)")
    bits = max(count - 1, 0).bit_length()
    if network.prefixlen + bits > 29:
        raise ValueError(f"{cidr} is too small for {count} node(s)")
    blocks = network.subnets(prefixlen_diff=bits) if bits else iter([network])
    return [str(block) for _, block in zip(range(count), blocks, strict=False)]


def ensure_pki(opts: Options) -> cluster_pki.ClusterPki:
    """The cluster's CA, certificates and service-account key that ``plan``'s command lines
    name, made where missing (``kubelite up`` calls it before the first child starts)."""
    return cluster_pki.ensure_cluster_pki(
        opts.state_dir,
        nodes=node_names(opts.nodes),
        service_cidr=cluster_service_cidr(opts.state_dir),
        bind_address=opts.bind_address,
        apiserver_names=apiserver_addresses(opts) if opts.ha else (),
    )


def _etcd_children(opts: Options) -> list[tuple[str, commands.Command]]:
    """One member per port pair, data in ``<state-dir>/etcd/<name>``."""
    names = [f"etcd-{k}" for k in range(1, len(opts.etcd_ports) + 1)]
    peers = [f"http://127.0.0.1:{peer}" for _, peer in opts.etcd_ports]
    cluster = [f"{name}={peer}" for name, peer in zip(names, peers, strict=True)]
    return [
        (
            child,
            commands.etcd_member(
                name=name,
                data_dir=opts.state_dir / "etcd" / name,
                client_url=f"http://127.0.0.1:{client}",
                peer_url=peer,
                initial_cluster=cluster,
            ),
        )
        for child, name, peer, (client, _) in zip(
            _numbered("etcd", len(names)), names, peers, opts.etcd_ports, strict=True
        )
    ]


def _front(opts: Options, addresses: Sequence[str]) -> tuple[str, commands.Command]:
    """``--ha``'s front: the bind address, at the port the kubeconfigs name."""
    secure = opts.secure_port != -1
    served = opts.secure_port if secure else opts.port
    return (
        "front",
        commands.front(
            backends=[f"{address}:{served}" for address in addresses],
            bind_address=opts.bind_address,
            port=served,
            health_scheme="https" if secure else "http",
            healthz_port=0,
            log_level=opts.log_level,
            verbosity=opts.verbosity,
        ),
    )


def plan(opts: Options) -> list[Child]:
    """The children to start, in start order (the apiserver first, kubelets last)."""
    level, verbosity = opts.log_level, opts.verbosity
    service_cidr = cluster_service_cidr(opts.state_dir)
    dns_ip = cluster_dns_ip(service_cidr)
    pki_dir = opts.state_dir / "pki"
    secure = opts.secure_port != -1
    # on the secure port each component is itself: server and credentials from its kubeconfig
    server = None if secure else opts.server

    def kubeconfig_of(name: str) -> Path | None:
        return cluster_pki.kubeconfig_path(opts.state_dir, name) if secure else None

    addresses = apiserver_addresses(opts)
    children: list[tuple[str, commands.Command]] = _etcd_children(opts)
    children += [
        (
            name,
            commands.apiserver(
                store=opts.store,
                state_dir=opts.state_dir,
                bind_address=address,
                port=opts.port,
                secure_bind_address=address,
                secure_port=opts.secure_port,
                tls_cert_file=pki_dir / "apiserver.crt" if secure else None,
                tls_private_key_file=pki_dir / "apiserver.key" if secure else None,
                client_ca_file=pki_dir / "ca.crt" if secure else None,
                service_account_signing_key_file=pki_dir / "sa.key" if secure else None,
                kubelet_client_certificate=(
                    pki_dir / "apiserver-kubelet-client.crt" if secure else None
                ),
                kubelet_client_key=pki_dir / "apiserver-kubelet-client.key" if secure else None,
                kubelet_certificate_authority=pki_dir / "ca.crt" if secure else None,
                service_cluster_ip_range=service_cidr,
                log_level=level,
                verbosity=verbosity,
            ),
        )
        for name, address in zip(_numbered("apiserver", len(addresses)), addresses, strict=True)
    ]
    if opts.ha:
        children.append(_front(opts, addresses))
    # several of each (--ha): the first on its port, the others on free ones (shown in the
    # banner); leader election decides which one works
    leader_elect = True if opts.standbys > 1 else None
    for index, name in enumerate(_numbered("controller-manager", opts.standbys)):
        children.append(
            (
                name,
                commands.controller_manager(
                    server=server,
                    kubeconfig=kubeconfig_of("controller-manager"),
                    healthz_port=opts.controller_manager_port if index == 0 else 0,
                    leader_elect=leader_elect,
                    root_ca_file=pki_dir / "ca.crt" if secure else None,
                    log_level=level,
                    verbosity=verbosity,
                ),
            )
        )
    for index, name in enumerate(_numbered("scheduler", opts.standbys)):
        children.append(
            (
                name,
                commands.scheduler(
                    server=server,
                    kubeconfig=kubeconfig_of("scheduler"),
                    healthz_port=opts.scheduler_port if index == 0 else 0,
                    leader_elect=leader_elect,
                    log_level=level,
                    verbosity=verbosity,
                ),
            )
        )
    names = node_names(opts.nodes)
    children.append(
        (
            "proxy",
            commands.proxy(
                server=server,
                kubeconfig=kubeconfig_of("proxy"),
                hostname_override=names or None,
                healthz_port=opts.proxy_port,
                log_level=level,
                verbosity=verbosity,
            ),
        )
    )
    children.append(
        (
            "dns",
            commands.dns(
                server=server,
                kubeconfig=kubeconfig_of("dns"),
                cluster_dns_ip=dns_ip,
                # port 53 needs root; elsewhere the proxy's .10:53 cannot be bound either
                dns_port=53 if os.geteuid() == 0 else 0,
                healthz_port=opts.dns_health_port,
                log_level=level,
                verbosity=verbosity,
            ),
        )
    )
    if opts.pod_cidr:
        cidrs = node_pod_cidrs(opts.pod_cidr, len(names)) if names else []
    else:
        cidrs = cluster_node_pod_cidrs(opts.state_dir, len(names))
    for index, node in enumerate(names):
        children.append(
            (
                node,
                commands.kubelet(
                    server=server,
                    kubeconfig=kubeconfig_of(f"node-{node}"),
                    node_name=node,
                    runtime=opts.runtime,
                    state_dir=opts.state_dir / "kubelets" / node,
                    port=opts.kubelet_port + index if opts.kubelet_port else 0,
                    pod_cidr=cidrs[index],
                    # several kubelets share this host, so not the one fixed 10248: over TLS
                    # each gets a free health port (its --port asks for credentials), else
                    # /healthz is served on each one's --port (10250, 10251, ...)
                    healthz_port=0 if secure else -1,
                    stop_pods_on_exit=True,
                    cluster_dns=dns_ip,
                    tls_cert_file=pki_dir / f"kubelet-{node}.crt" if secure else None,
                    tls_private_key_file=pki_dir / f"kubelet-{node}.key" if secure else None,
                    client_ca_file=pki_dir / "ca.crt" if secure else None,
                    authentication_token_webhook=secure,
                    authorization_mode="Webhook" if secure else None,
                    log_level=level,
                    verbosity=verbosity,
                ),
            )
        )
    return [
        Child(
            name=name,
            kind=command.component,
            argv=command.python(),
            colour=COLOURS[i % len(COLOURS)],
        )
        for i, (name, command) in enumerate(children)
    ]


def kubeconfig(server: str) -> str:
    """A kubeconfig for the local cluster (plain HTTP on loopback, no credentials needed)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubelite", "cluster": {"server": server}}],
        "users": [{"name": "kubelite-admin", "user": {}}],
        "contexts": [
            {
                "name": "kubelite",
                "context": {
                    "cluster": "kubelite",
                    "user": "kubelite-admin",
                    "namespace": "default",
                },
            }
        ],
        "current-context": "kubelite",
        "preferences": {},
    }
    # JSON is valid YAML, and kubectl reads either.
    return json.dumps(doc, indent=2) + "\n"


class Supervisor(Supervision):
    """Starts, watches, restarts and finally stops the children of one ``kubelite up``
    (``kubelite.supervision`` does the starting, restarting and stopping)."""

    def __init__(self, opts: Options) -> None:
        super().__init__(
            plan(opts),
            own_name="up",
            whole="the cluster",
            colour=opts.colour,
            stop_grace=STOP_GRACE,
        )
        self.opts = opts

    async def _watch_nodes_ready(
        self, client: ApiClient, *, wanted: set[str], since: datetime
    ) -> None:
        """Until every wanted node is Ready with a heartbeat at or after ``since``: list, then
        watch (``client.watch``); list again when the watch ends or breaks."""
        nodes = _nodes()
        while True:
            try:
                listing = await client.list(nodes)
                ready = {
                    str(node["metadata"]["name"])
                    for node in listing.get("items", [])
                    if _is_ready(node, since=since)
                }
                if wanted <= ready:
                    return
                rv = str((listing.get("metadata") or {}).get("resourceVersion") or "")
                async with client.watch(nodes, resource_version=rv) as stream:
                    async for event in stream:
                        if event.type == "BOOKMARK":
                            continue
                        name = str((event.object.get("metadata") or {}).get("name") or "")
                        if event.type != "DELETED" and _is_ready(event.object, since=since):
                            ready.add(name)
                        else:
                            ready.discard(name)
                        if wanted <= ready:
                            return
                # the server ended the watch (its timeout): list and watch again
            except (ConnectionError, StatusError):
                # the apiserver is restarting, or our resourceVersion expired: list again
                await asyncio.sleep(RELIST_PAUSE)

    async def _all_ready(self, children: Sequence[Child]) -> None:
        """Until every child in ``children`` printed its ready line."""
        await asyncio.gather(*(child.ready.wait() for child in children))

    def _note(self, child: Child, text: str) -> None:
        """etcd prints no kubelite ready line: its own says when it serves clients."""
        if child.kind == "etcd":
            if ETCD_READY_LINE in text:
                child.ready.set()
            return
        super()._note(child, text)

    async def _start_and_wait(self, children: Sequence[Child], what: str) -> bool:
        """Start ``children`` and wait until all are ready (or ``ready_timeout`` passed: then
        say so and go on); False when asked to stop meanwhile."""
        for child in children:
            self._start(child)
        waiting = asyncio.create_task(
            asyncio.wait_for(self._all_ready(children), self.opts.ready_timeout),
            name=f"up:wait-{what}",
        )
        try:
            return await self._until_stopped(waiting)
        except TimeoutError:
            self.say(
                f"{what} not ready after {self.opts.ready_timeout:.0f}s; starting the other "
                "components anyway — read the logs above"
            )
            return True

    async def _until_stopped(self, what: asyncio.Task[Any]) -> bool:
        """Wait for ``what`` or a stop request; True when ``what`` finished first."""
        stop = asyncio.create_task(self._stopping.wait(), name="up:stop-requested")
        try:
            await asyncio.wait([what, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not what.done():
            what.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await what
            return False
        what.result()
        return True

    async def _bring_up(self, kubeconfig_path: Path) -> bool:
        """Start in order and announce readiness; False when asked to stop meanwhile or when
        the cluster did not get ready in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.opts.ready_timeout
        since = datetime.now(UTC) - HEARTBEAT_SLACK
        etcd = [c for c in self.children if c.kind == "etcd"]
        apiservers = [c for c in self.children if c.kind == "apiserver"]
        others = [c for c in self.children if c.kind not in ("etcd", "apiserver")]
        # etcd first (a cluster's members become ready together, once they have a quorum),
        # then the apiservers (ready once their watch caches loaded): events, not polls
        if etcd and not await self._start_and_wait(etcd, "etcd"):
            return False
        if not await self._start_and_wait(apiservers, "the apiserver"):
            return False
        if not self.opts.ha:
            self._learn_apiserver_port(apiservers[0])
        await asyncio.to_thread(self._write_kubeconfigs, kubeconfig_path)
        for child in others:
            self._start(child)
        wanted = set(node_names(self.opts.nodes))
        remaining = max(1.0, deadline - loop.time())
        async with self._client(kubeconfig_path) as client:
            up = asyncio.create_task(
                asyncio.wait_for(
                    asyncio.gather(
                        self._watch_nodes_ready(client, wanted=wanted, since=since),
                        self._all_ready(self.children),
                    ),
                    remaining,
                ),
                name="up:wait-ready",
            )
            try:
                if not await self._until_stopped(up):
                    return False
            except (TimeoutError, OSError, ValueError) as exc:
                late = [c.name for c in self.children if not c.ready.is_set()]
                self.say(
                    f"the cluster is not ready after {self.opts.ready_timeout:.0f}s "
                    f"({type(exc).__name__}"
                    + (f"; not ready: {', '.join(late)}" if late else "")
                    + "); still running — read the logs above"
                )
                return False
        self._banner(kubeconfig_path)
        return True

    def _client(self, kubeconfig_path: Path) -> ApiClient:
        """How ``up`` itself watches the nodes: as the admin on the secure port when it
        serves (the kubeconfig it wrote), else on the plain port."""
        if self.opts.secure_port == -1:
            return ApiClient(server=self.opts.server)
        return ApiClient.from_kubeconfig(str(kubeconfig_path))

    def _write_kubeconfigs(self, path: Path) -> None:
        """The admin's kubeconfig (https with the admin certificate when the secure port
        serves, else the plain port) and the components' (``cluster_pki``)."""
        opts = self.opts
        if opts.secure_port == -1:
            path.write_text(kubeconfig(opts.server))
            return
        cluster_pki.write_kubeconfigs(opts.state_dir, self._pki(), server=opts.secure_server)

    def _pki(self) -> cluster_pki.ClusterPki:
        return ensure_pki(self.opts)

    def _learn_apiserver_port(self, apiserver: Child) -> None:
        """With ``--port 0`` or ``--secure-port 0``: from now on, everyone (a restarted
        apiserver too) uses the ports the apiserver bound."""
        api, secure = apiserver.endpoints.get("api"), apiserver.endpoints.get("secure")
        port = api.port if self.opts.port == 0 and api is not None else self.opts.port
        secure_port = self.opts.secure_port
        if secure_port == 0 and secure is not None:
            secure_port = secure.port
        if (port, secure_port) == (self.opts.port, self.opts.secure_port):
            return
        self.opts = replace(self.opts, port=port, secure_port=secure_port)
        argv = {child.name: child.argv for child in plan(self.opts)}
        for child in self.children:
            child.argv = argv[child.name]

    async def run(self) -> int:
        opts = self.opts
        opts.state_dir.mkdir(parents=True, exist_ok=True)
        kubeconfig_path = opts.state_dir / "kubeconfig"
        if opts.secure_port != -1:
            await asyncio.to_thread(self._pki)  # the apiserver reads its certificates at start

        self.handle_signals()

        self.say(
            f"starting {len(self.children)} processes "
            f"(store {opts.store}, runtime {opts.runtime}, state in {opts.state_dir})"
        )
        chaos: asyncio.Task[None] | None = None
        try:
            if await self._bring_up(kubeconfig_path) and opts.chaos is not None:
                chaos = asyncio.create_task(self._chaos(opts.chaos).run(), name="up:chaos")
            await self._stopping.wait()
        finally:
            if chaos is not None:
                chaos.cancel()
                await asyncio.gather(chaos, return_exceptions=True)
            self.say(
                "stopping: kubelets first (and their pods), then controllers, then the apiserver"
            )
            await self.stop_in_order(STOP_ORDER)
            self.say("stopped")
        return self.exit_code

    def _chaos(self, options: ChaosOptions) -> Chaos:
        """``--chaos``, sparing an apiserver whose store lives in its memory."""
        in_memory = self.opts.store.startswith("memory://")
        self.say(
            f"chaos: killing a random component every {options.interval:g}s"
            + (f" (seed {options.seed})" if options.seed is not None else "")
            + (
                "; the apiserver is spared: its memory:// store would die with it"
                if in_memory
                else ""
            )
        )
        return Chaos(self, options, spare=lambda c: in_memory and c.kind == "apiserver")

    def _banner(self, kubeconfig_path: Path) -> None:
        opts = self.opts
        nodes = ", ".join(node_names(opts.nodes)) or "no nodes"
        api = opts.server if opts.port != -1 else opts.secure_server
        if opts.ha:  # the front is on the bind address, the apiservers beside it
            first = apiserver_addresses(opts)[0]
            api = f"http://{first}:{opts.port}" if opts.port != -1 else opts.secure_server
        lines = [
            f"kubelite is up: API at {api} ({nodes} Ready)",
            *(
                [
                    f"highly available: {len(opts.etcd_ports)} etcd members, {opts.apiservers} "
                    f"apiservers behind the front at {self._front_url()}, {opts.standbys} "
                    "schedulers and controller-managers (leader election)"
                ]
                if opts.ha
                else []
            ),
            *(
                [f"secure API at {opts.secure_server} (TLS; the kubeconfig's server)"]
                if opts.secure_port != -1 and opts.port != -1
                else []
            ),
            "endpoints (the ports each component bound):",
            *self._endpoint_lines(),
            f"kubeconfig: {kubeconfig_path}",
            "try:",
            f"  export KUBECONFIG={kubeconfig_path}",
            "  kubectl get nodes -o wide",
            "  kubectl run web --image=nginx && kubectl get pods -o wide -w",
            *([f"  curl -s {api}/api/v1/namespaces/default/pods"] if opts.port != -1 else []),
            "Ctrl-C stops the cluster; `kubelite up` again resumes it.",
        ]
        for line in lines:
            self.say(line)

    def _front_url(self) -> str:
        opts = self.opts
        return opts.secure_server if opts.secure_port != -1 else opts.server

    def _endpoint_lines(self) -> list[str]:
        width = max(len(c.name) for c in self.children)
        paths = {
            "api": "",
            "secure": "",
            "health": "/healthz",
            "server": "/healthz",
            "dns": "",
            "front": "",
        }
        lines = []
        for child in self.children:
            for endpoint, where in sorted(child.endpoints.items()):
                lines.append(
                    f"  {child.name.ljust(width)}  {endpoint.ljust(6)}  {where.url}{paths[endpoint]}"
                )
        return lines


def _is_ready(node: dict[str, Any], *, since: datetime) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") != "Ready":
            continue
        if cond.get("status") != "True":
            return False
        try:
            beat = datetime.fromisoformat(cond.get("lastHeartbeatTime") or "")
        except ValueError:
            return False
        return beat >= since
    return False


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_options(sys.argv[1:] if argv is None else argv)
    return uvloop.run(Supervisor(opts).run())


if __name__ == "__main__":
    sys.exit(main())
