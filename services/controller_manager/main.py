"""``kubelite controller-manager`` / ``python -m services.controller_manager``: flags -> options.

Parses ``kube-controller-manager``'s flags that kubelite implements into ``ManagerOptions``
and hands ``service.ControllerManagerService`` to the component runtime (``component.run``):
SIGINT/SIGTERM stop the controllers and release the lease (exit 0); losing the lease exits 1.
Durations are Go-style (``40s``, ``5m``, ``1m30s``, ``500ms``) or plain seconds
(``component.flags``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import component
from client.kubeconfig import DEFAULT_SERVER, ClientConfig, KubeconfigError, add_client_arguments
from component.flags import (
    add_health_flags,
    add_leader_election_flags,
    add_log_flags,
    duration,
    health_address,
    leader_election_flags,
    log_flags,
)
from services.controller_manager.manager import CONTROLLERS, ManagerOptions
from services.controller_manager.service import ControllerManagerService, ServiceOptions

__all__ = ["build_parser", "main", "parse_args"]

HEALTH_PORT = 10257
"""kube-controller-manager's port."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite controller-manager",
        description="Run the kubelite controllers (replication, ReplicaSets, Deployments, node "
        "lifecycle, garbage collection, namespaces) under one leader election.",
    )
    add_client_arguments(p)
    p.add_argument(
        "--controllers",
        default="*",
        help="comma-separated controllers to run: '*' is all, 'name' enables, '-name' disables "
        f"(known: {', '.join(CONTROLLERS)}) (default: *)",
    )
    add_leader_election_flags(p, resource_name="kube-controller-manager")
    add_health_flags(p, default_port=HEALTH_PORT)
    w = p.add_argument_group("workers")
    w.add_argument("--concurrent-rc-syncs", type=int, default=5)
    w.add_argument("--concurrent-replicaset-syncs", type=int, default=5)
    w.add_argument("--concurrent-deployment-syncs", type=int, default=5)
    w.add_argument("--concurrent-gc-syncs", type=int, default=20)
    w.add_argument("--concurrent-namespace-syncs", type=int, default=10)
    w.add_argument("--concurrent-job-syncs", type=int, default=5)
    w.add_argument("--concurrent-ttl-after-finished-syncs", type=int, default=5)
    n = p.add_argument_group("node lifecycle")
    n.add_argument(
        "--node-monitor-grace-period",
        type=duration,
        default=40.0,
        metavar="DURATION",
        help="a node whose lease is not renewed this long turns Unknown (default: 40s)",
    )
    n.add_argument(
        "--node-startup-grace-period",
        type=duration,
        default=60.0,
        metavar="DURATION",
        help="grace for a node that never reported (default: 1m)",
    )
    n.add_argument(
        "--node-eviction-rate",
        type=float,
        default=0.1,
        help="nodes per second tainted for eviction (default: 0.1)",
    )
    n.add_argument("--secondary-node-eviction-rate", type=float, default=0.01)
    sv = p.add_argument_group("services")
    sv.add_argument("--concurrent-endpoint-syncs", type=int, default=5)
    sv.add_argument("--concurrent-service-endpoint-syncs", type=int, default=5)
    sv.add_argument(
        "--max-endpoints-per-slice",
        type=int,
        default=100,
        help="endpoints per EndpointSlice the endpointslice controller writes (default: 100)",
    )
    sv.add_argument(
        "--service-lb-range",
        default="127.192.0.0/16",
        metavar="CIDR",
        help="where the service-lb controller takes LoadBalancer ingress IPs from "
        "(default: 127.192.0.0/16)",
    )
    sa = p.add_argument_group("service accounts")
    sa.add_argument(
        "--root-ca-file",
        metavar="PATH",
        help="the CA bundle published as the ConfigMap kube-root-ca.crt in every namespace "
        "(default: the CA of the controller-manager's own client config)",
    )
    add_log_flags(p)
    return p


def _root_ca(path: str | None, client: ClientConfig) -> str:
    """``--root-ca-file``'s bundle, else the client's CA (as kube-controller-manager does)."""
    if path:
        return Path(path).read_text()
    if client.ca_data:
        return client.ca_data
    return Path(client.ca_file).read_text() if client.ca_file else ""


def parse_args(argv: Sequence[str]) -> tuple[ServiceOptions, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    le = leader_election_flags(args)
    try:
        client = ClientConfig.from_args(args, default_server=DEFAULT_SERVER).with_options(
            user_agent="kubelite-controller-manager"
        )
        manager = ManagerOptions(
            controllers=tuple(c for c in args.controllers.split(",") if c.strip()),
            leader_elect=le.enabled,
            lease_name=le.resource_name,
            lease_namespace=le.resource_namespace,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
            concurrent_rc_syncs=args.concurrent_rc_syncs,
            concurrent_replicaset_syncs=args.concurrent_replicaset_syncs,
            concurrent_deployment_syncs=args.concurrent_deployment_syncs,
            concurrent_gc_syncs=args.concurrent_gc_syncs,
            concurrent_namespace_syncs=args.concurrent_namespace_syncs,
            concurrent_job_syncs=args.concurrent_job_syncs,
            concurrent_ttl_after_finished_syncs=args.concurrent_ttl_after_finished_syncs,
            node_monitor_grace_period=args.node_monitor_grace_period,
            node_startup_grace_period=args.node_startup_grace_period,
            node_eviction_rate=args.node_eviction_rate,
            secondary_node_eviction_rate=args.secondary_node_eviction_rate,
            concurrent_endpoint_syncs=args.concurrent_endpoint_syncs,
            concurrent_service_endpoint_syncs=args.concurrent_service_endpoint_syncs,
            max_endpoints_per_slice=args.max_endpoints_per_slice,
            service_lb_range=args.service_lb_range,
            root_ca=_root_ca(args.root_ca_file, client),
        )
    except (KubeconfigError, ValueError, OSError) as exc:
        parser.error(str(exc))
    return ServiceOptions(manager=manager, client=client, health=health_address(args)), args


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_args(sys.argv[1:] if argv is None else argv)
    component.setup_logging(log_flags(args).level)
    return component.run(lambda: ControllerManagerService(options), component="controller-manager")
