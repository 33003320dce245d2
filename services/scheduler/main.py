"""``kubelite scheduler`` / ``python -m services.scheduler``: flags, wiring, serving, stopping.

Start-up, in order: informers on pods and nodes start filling the cache and the queue; the
``/healthz`` + ``/metrics`` server listens (the line ``scheduler serving on http://HOST:PORT``
on stderr names the port, so ``--port 0`` works for tests); once both informers have synced,
the replica campaigns for the ``kube-system/kube-scheduler`` Lease and schedules only while it
leads. A standby replica keeps its cache warm, so a take-over starts scheduling at once.

Stopping: SIGINT/SIGTERM cancel the scheduling loop (in-flight bindings finish), release the
Lease so a standby takes over within a retry period, stop the informers and close the client.
Losing the Lease (it could not be renewed in time) ends the process with status 1, as
kube-scheduler does; a supervisor (``kubelite up``) restarts it as a follower.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import uvloop
from aiohttp import web

from api.registry import REGISTRY
from client.events import EventRecorder
from client.informer import Informer
from client.kubeconfig import ClientConfig, KubeconfigError, add_client_arguments
from client.leader_election import LeaderElectionConfig, LeaderElector
from client.rest import ApiClient
from services.scheduler.config import SchedulerConfig, build_framework, load_config
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.queue import SchedulingQueue
from services.scheduler.scheduler import DEFAULT_BIND_CONCURRENCY, Scheduler

__all__ = ["SchedulerOptions", "main", "parse_args", "run"]

log = logging.getLogger("kubelite.scheduler")

READY_LINE = "scheduler serving on http://{host}:{port}"
DEFAULT_SERVER = "http://127.0.0.1:8080"


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    client: ClientConfig
    config: SchedulerConfig
    bind_address: str = "127.0.0.1"
    port: int = 10259
    leader_elect: bool = True
    lease_name: str = "kube-scheduler"
    lease_namespace: str = "kube-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""
    bind_concurrency: int = DEFAULT_BIND_CONCURRENCY


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite scheduler",
        description="The kubelite scheduler: binds pending pods to nodes.",
    )
    add_client_arguments(p)
    p.add_argument("--config", type=Path, default=None, help="KubeSchedulerConfiguration YAML")
    p.add_argument("--bind-address", default="127.0.0.1", help="address of /healthz and /metrics")
    p.add_argument(
        "--port",
        type=int,
        default=10259,
        help="port of /healthz and /metrics (Kubernetes' kube-scheduler port; 0 picks one)",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="campaign for the Lease and schedule only while leading (default: on)",
    )
    p.add_argument("--leader-elect-resource-name", default="kube-scheduler")
    p.add_argument("--leader-elect-resource-namespace", default="kube-system")
    p.add_argument("--leader-elect-lease-duration", type=float, default=15.0)
    p.add_argument("--leader-elect-renew-deadline", type=float, default=10.0)
    p.add_argument("--leader-elect-retry-period", type=float, default=2.0)
    p.add_argument("--identity", default="", help="leader-election identity (default: host_uuid)")
    p.add_argument(
        "--bind-concurrency",
        type=int,
        default=DEFAULT_BIND_CONCURRENCY,
        help=f"bindings in flight at once (default: {DEFAULT_BIND_CONCURRENCY})",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default: INFO)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="same as --log-level DEBUG")
    return p


def parse_args(argv: Sequence[str]) -> tuple[SchedulerOptions, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.server is None and args.kubeconfig is None and not os.environ.get("KUBECONFIG"):
        args.server = DEFAULT_SERVER
    try:
        client = ClientConfig.from_args(args).with_options(user_agent="kubelite-scheduler")
        config = load_config(args.config)
    except (KubeconfigError, ValueError, OSError) as exc:
        parser.error(str(exc))
    identity = args.identity or f"{socket.gethostname()}_{uuid.uuid4()}"
    try:
        LeaderElectionConfig(
            lease_name=args.leader_elect_resource_name,
            identity=identity,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.bind_concurrency < 1:
        parser.error("--bind-concurrency must be at least 1")
    options = SchedulerOptions(
        client=client,
        config=config,
        bind_address=args.bind_address,
        port=args.port,
        leader_elect=args.leader_elect,
        lease_name=args.leader_elect_resource_name,
        lease_namespace=args.leader_elect_resource_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        identity=identity,
        bind_concurrency=args.bind_concurrency,
    )
    return options, args


def _health_app(sched: Scheduler, informers: Sequence[Informer]) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(request: web.Request) -> web.Response:
        if all(i.has_synced for i in informers):
            return web.Response(text="ok")
        return web.Response(status=503, text="informers not synced")

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(
            text=sched.metrics.render(), content_type="text/plain", charset="utf-8",
            headers={"X-Content-Type-Options": "nosniff"},
        )  # fmt: skip

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


async def run(options: SchedulerOptions) -> int:
    """Run until cancelled (0) or until leadership is lost (1)."""
    pods_rt = REGISTRY.by_kind("", "Pod")
    nodes_rt = REGISTRY.by_kind("", "Node")
    assert pods_rt is not None and nodes_rt is not None
    profile = options.config.profile
    client = ApiClient(options.client)
    queue = SchedulingQueue(
        initial_backoff=options.config.pod_initial_backoff_seconds,
        max_backoff=options.config.pod_max_backoff_seconds,
    )
    recorder = EventRecorder(client, component=profile.scheduler_name)
    elector: LeaderElector | None = None
    sched = Scheduler(
        client=client,
        framework=build_framework(options.config),
        queue=queue,
        recorder=recorder,
        scheduler_name=profile.scheduler_name,
        bind_concurrency=options.bind_concurrency,
    )
    sched.metrics = SchedulerMetrics(
        profile=profile.scheduler_name,
        queue_lengths=queue.lengths,
        is_leader=lambda: elector.is_leader if elector is not None else True,
        lease_name=options.lease_name,
    )
    pods = Informer(client, pods_rt, name="pods")
    pods.add_handler(
        on_add=sched.on_pod_add, on_update=sched.on_pod_update, on_delete=sched.on_pod_delete
    )
    nodes = Informer(client, nodes_rt, name="nodes")
    nodes.add_handler(
        on_add=sched.on_node_add, on_update=sched.on_node_update, on_delete=sched.on_node_delete
    )
    background = [
        pods.start(),
        nodes.start(),
        asyncio.create_task(queue.run(), name="scheduling queue timers"),
        recorder.start(),
    ]
    runner = web.AppRunner(_health_app(sched, [pods, nodes]), access_log=None)
    await runner.setup()
    lost = False
    try:
        site = web.TCPSite(runner, options.bind_address, options.port)
        await site.start()
        port = runner.addresses[0][1] if runner.addresses else options.port
        print(READY_LINE.format(host=options.bind_address, port=port), file=sys.stderr, flush=True)
        log.info("waiting for the pod and node informers to sync from %s", options.client.server)
        await asyncio.gather(pods.wait_synced(), nodes.wait_synced())
        log.info(
            "cache synced: %d node(s), %d placed pod(s), %d pending; profile %s, filters %s, scores %s",
            len(sched.cache.nodes()), sched.cache.pod_count, len(queue), profile.scheduler_name,
            ",".join(profile.filters), ",".join(f"{n}={w}" for n, w in profile.scores),
        )  # fmt: skip
        if not options.leader_elect:
            log.info("leader election off: scheduling now")
            await sched.run()
            return 0
        elector = LeaderElector(
            client,
            LeaderElectionConfig(
                lease_name=options.lease_name,
                identity=options.identity,
                namespace=options.lease_namespace,
                lease_duration=options.lease_duration,
                renew_deadline=options.renew_deadline,
                retry_period=options.retry_period,
            ),
            on_started_leading=sched.run,
        )
        log.info(
            "campaigning for lease %s/%s as %s; scheduling starts once elected",
            options.lease_namespace, options.lease_name, options.identity,
        )  # fmt: skip
        await elector.run()
        lost = True
        log.error("lost the lease %s/%s; exiting", options.lease_namespace, options.lease_name)
        return 1
    finally:
        if not lost:
            log.info("stopping: informers, queue timers and event recorder")
        with contextlib.suppress(Exception):
            await asyncio.wait_for(recorder.flush(), timeout=2.0)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await runner.cleanup()
        await client.close()


async def _run_until_signalled(options: SchedulerOptions) -> int:
    main_task = asyncio.create_task(run(options), name="scheduler")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main_task.cancel)
    try:
        return await main_task
    except asyncio.CancelledError:
        log.info("scheduler stopped")
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level="DEBUG" if args.verbose else args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return uvloop.run(_run_until_signalled(options))
    except OSError as exc:
        print(f"kubelite scheduler: {exc}", file=sys.stderr)
        return 1
