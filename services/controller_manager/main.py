"""``kubelite controller-manager`` / ``python -m services.controller_manager``: flags, loop, signals.

Parses ``kube-controller-manager``'s flags that kubelite implements into ``ManagerOptions``,
then runs ``ControllerManager`` on uvloop until SIGINT/SIGTERM. On a signal the controllers
stop (in-flight reconciles finish their writes), the lease is released so a standby replica
takes over at once, and the process exits 0. Losing the lease exits 1 (a supervisor restarts
it, as with Kubernetes).

Durations are Go-style (``40s``, ``5m``, ``1m30s``, ``500ms``) or plain seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
import sys
from collections.abc import Sequence

import uvloop

from client.kubeconfig import ClientConfig, KubeconfigError, add_client_arguments
from client.rest import ApiClient
from services.controller_manager.manager import (
    CONTROLLERS,
    ControllerManager,
    LeadershipLost,
    ManagerOptions,
)

__all__ = ["build_parser", "main", "parse_duration"]

log = logging.getLogger("kubelite.controller-manager")

_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (``1h``, ``5m0s``, ``40s``, ``500ms``) or a plain number."""
    try:
        value = float(text)
    except ValueError:
        s = text.strip()
        parts = _PART.findall(s)
        if not parts or "".join(n + u for n, u in parts) != s:
            raise argparse.ArgumentTypeError(
                f"invalid duration {text!r} (use e.g. 40s, 5m, 1m30s)"
            ) from None
        value = sum(float(n) * _UNIT[u] for n, u in parts)
    if value < 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} is negative")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range 0-65535")
    return value


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite controller-manager",
        description="Run the kubelite controllers (replication, ReplicaSets, Deployments, node "
        "lifecycle, garbage collection, namespaces) under one leader election.",
    )
    add_client_arguments(p)
    p.set_defaults(server=None)
    p.add_argument(
        "--controllers",
        default="*",
        help="comma-separated controllers to run: '*' is all, 'name' enables, '-name' disables "
        f"(known: {', '.join(CONTROLLERS)}) (default: *)",
    )
    le = p.add_argument_group("leader election")
    le.add_argument(
        "--leader-elect",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        help="campaign for the lease before running controllers (default: true)",
    )
    le.add_argument(
        "--no-leader-elect",
        dest="leader_elect",
        action="store_false",
        help="same as --leader-elect=false",
    )
    le.add_argument("--leader-elect-lease-duration", type=parse_duration, default=15.0)
    le.add_argument("--leader-elect-renew-deadline", type=parse_duration, default=10.0)
    le.add_argument("--leader-elect-retry-period", type=parse_duration, default=2.0)
    le.add_argument("--leader-elect-resource-name", default="kube-controller-manager")
    le.add_argument("--leader-elect-resource-namespace", default="kube-system")
    p.add_argument(
        "--healthz-bind-address",
        default="127.0.0.1",
        help="address of /healthz (default: 127.0.0.1)",
    )
    p.add_argument(
        "--healthz-port",
        type=_port,
        default=10257,
        help="port of /healthz; 0 disables it (default: 10257)",
    )
    w = p.add_argument_group("workers")
    w.add_argument("--concurrent-rc-syncs", type=int, default=5)
    w.add_argument("--concurrent-replicaset-syncs", type=int, default=5)
    w.add_argument("--concurrent-deployment-syncs", type=int, default=5)
    w.add_argument("--concurrent-gc-syncs", type=int, default=20)
    w.add_argument("--concurrent-namespace-syncs", type=int, default=10)
    n = p.add_argument_group("node lifecycle")
    n.add_argument(
        "--node-monitor-grace-period",
        type=parse_duration,
        default=40.0,
        help="a node whose lease is not renewed this long turns Unknown (default: 40s)",
    )
    n.add_argument(
        "--node-startup-grace-period",
        type=parse_duration,
        default=60.0,
        help="grace for a node that never reported (default: 1m)",
    )
    n.add_argument(
        "--node-eviction-rate",
        type=float,
        default=0.1,
        help="nodes per second tainted for eviction (default: 0.1)",
    )
    n.add_argument("--secondary-node-eviction-rate", type=float, default=0.01)
    p.add_argument(
        "-v",
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default: INFO)",
    )
    return p  # fmt: skip


def parse_args(argv: Sequence[str]) -> tuple[ManagerOptions, ClientConfig, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.server is None and args.kubeconfig is None:
        args.server = "http://127.0.0.1:8080"
    try:
        config = ClientConfig.from_args(args)
        options = ManagerOptions(
            controllers=tuple(c for c in args.controllers.split(",") if c.strip()),
            leader_elect=args.leader_elect,
            lease_name=args.leader_elect_resource_name,
            lease_namespace=args.leader_elect_resource_namespace,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
            healthz_bind_address=args.healthz_bind_address,
            healthz_port=args.healthz_port,
            concurrent_rc_syncs=args.concurrent_rc_syncs,
            concurrent_replicaset_syncs=args.concurrent_replicaset_syncs,
            concurrent_deployment_syncs=args.concurrent_deployment_syncs,
            concurrent_gc_syncs=args.concurrent_gc_syncs,
            concurrent_namespace_syncs=args.concurrent_namespace_syncs,
            node_monitor_grace_period=args.node_monitor_grace_period,
            node_startup_grace_period=args.node_startup_grace_period,
            node_eviction_rate=args.node_eviction_rate,
            secondary_node_eviction_rate=args.secondary_node_eviction_rate,
        )
    except (KubeconfigError, ValueError) as exc:
        parser.error(str(exc))
    return options, config, args


async def serve(options: ManagerOptions, config: ClientConfig) -> int:
    """Run until SIGINT/SIGTERM (exit 0) or until the lease is lost (exit 1)."""
    loop = asyncio.get_running_loop()
    async with ApiClient(config.with_options(user_agent="kubelite-controller-manager")) as client:
        manager = ControllerManager(client, options)
        task = asyncio.create_task(manager.run(), name="controller-manager")
        stopping = False

        def stop() -> None:
            nonlocal stopping
            if not stopping:
                stopping = True
                log.info("signal received: stopping controllers and releasing the lease")
                task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop)
        log.info("talking to apiserver %s", config.server)
        try:
            await task
        except asyncio.CancelledError:
            if not stopping:
                raise
            return 0
        except LeadershipLost as exc:
            log.error("%s; exiting so a supervisor restarts this process", exc)
            return 1
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    options, config, args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s controller-manager %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return uvloop.run(serve(options, config))
