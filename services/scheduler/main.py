"""``kubelite scheduler`` / ``python -m services.scheduler``: flags -> options -> the runtime.

Parses kube-scheduler's flags that kubelite implements into ``SchedulerOptions`` and hands
``service.SchedulerService`` to the component runtime (``component.run``). The health server
listens on ``--healthz-bind-address:--healthz-port`` (127.0.0.1:10259, kube-scheduler's port;
0 picks one, named by the ``kubelite: scheduler health listening on ...`` line).
``--bind-address`` and ``--port`` are the old spellings of the health flags, still accepted.
"""

from __future__ import annotations

import argparse
import socket
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import component
from client.kubeconfig import DEFAULT_SERVER, ClientConfig, KubeconfigError, add_client_arguments
from client.leader_election import LeaderElectionConfig
from component.flags import (
    add_health_flags,
    add_leader_election_flags,
    add_log_flags,
    health_address,
    leader_election_flags,
    log_flags,
    port_or_off,
)
from services.scheduler.config import load_config
from services.scheduler.scheduler import DEFAULT_BIND_CONCURRENCY
from services.scheduler.service import SchedulerOptions, SchedulerService

__all__ = ["SchedulerOptions", "build_parser", "main", "parse_args"]

HEALTH_PORT = 10259
"""kube-scheduler's port."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite scheduler",
        description="The kubelite scheduler: binds pending pods to nodes.",
    )
    add_client_arguments(p)
    p.add_argument("--config", type=Path, default=None, help="KubeSchedulerConfiguration YAML")
    add_health_flags(p, default_port=HEALTH_PORT)
    # the health flags' old names, kept working for scripts written against them
    p.add_argument(
        "--bind-address", dest="healthz_bind_address", default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )  # fmt: skip
    p.add_argument(
        "--port", dest="healthz_port", type=port_or_off, default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )  # fmt: skip
    add_leader_election_flags(p, resource_name="kube-scheduler")
    p.add_argument("--identity", default="", help="leader-election identity (default: host_uuid)")
    p.add_argument(
        "--bind-concurrency",
        type=int,
        default=DEFAULT_BIND_CONCURRENCY,
        help=f"bindings in flight at once (default: {DEFAULT_BIND_CONCURRENCY})",
    )
    add_log_flags(p)
    return p


def parse_args(argv: Sequence[str]) -> tuple[SchedulerOptions, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    try:
        client = ClientConfig.from_args(args, default_server=DEFAULT_SERVER).with_options(
            user_agent="kubelite-scheduler"
        )
        config = load_config(args.config)
    except (KubeconfigError, ValueError, OSError) as exc:
        parser.error(str(exc))
    identity = args.identity or f"{socket.gethostname()}_{uuid.uuid4()}"
    le = leader_election_flags(args)
    try:
        LeaderElectionConfig(
            lease_name=le.resource_name,
            identity=identity,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.bind_concurrency < 1:
        parser.error("--bind-concurrency must be at least 1")
    options = SchedulerOptions(
        client=client,
        config=config,
        leader_election=le,
        identity=identity,
        health=health_address(args),
        bind_concurrency=args.bind_concurrency,
    )
    return options, args


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_args(sys.argv[1:] if argv is None else argv)
    component.setup_logging(log_flags(args).level)
    return component.run(lambda: SchedulerService(options), component="scheduler")
