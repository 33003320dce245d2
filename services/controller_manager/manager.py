"""The controller-manager: every controller in one process, acting only while it leads.

Why: the controllers share one apiserver connection, one informer per resource and one leader
election, exactly like ``kube-controller-manager``. Only the replica holding the Lease
``kube-system/kube-controller-manager`` runs controllers; a standby replica keeps campaigning,
so killing the leader hands over within a lease duration (15 s by default).

What it owns:

* ``/healthz`` (and ``/healthz/leaderElection``) on ``healthz_bind_address:healthz_port``
  (127.0.0.1:10257; port 0 disables it; a port already in use is skipped with a warning):
  ``ok`` unless this replica leads and has not renewed its lease for ``lease_duration`` + 20 s
  (Kubernetes' leader-election health check);
* while leading: the ``SharedInformers``, one ``EventRecorder`` per controller (so
  ``kubectl describe`` names the controller as the event source), and each enabled controller
  as a named task;
* losing the lease stops every controller and makes ``run()`` raise ``LeadershipLost`` (the
  process exits non-zero and its supervisor restarts it, as Kubernetes does); cancelling
  ``run()`` stops everything and releases the lease.

``controllers`` follows ``--controllers``: ``*`` is every controller, ``name`` enables one,
``-name`` disables one (``*,-nodelifecycle``).

Limits: no fencing between an old and a new leader (see ``client.leader_election``); every write
is a compare-and-swap, which is what makes a brief overlap harmless.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web

from client.events import EventRecorder
from client.leader_election import LeaderElectionConfig, LeaderElector
from client.rest import ApiClient
from services.controller_manager.informers import SharedInformers

__all__ = [
    "CONTROLLERS",
    "ControllerManager",
    "LeadershipLost",
    "ManagerOptions",
    "RunnableController",
    "enabled_controllers",
]

log = logging.getLogger(__name__)

LEADER_HEALTH_TIMEOUT = 20.0
"""Kubernetes' leader-election health check tolerance beyond the lease duration."""


class RunnableController(Protocol):
    name: str

    async def run(self) -> None: ...


class LeadershipLost(RuntimeError):
    """The lease could not be renewed; this process must stop acting (and exit)."""


@dataclass(frozen=True, slots=True)
class ManagerOptions:
    controllers: tuple[str, ...] = ("*",)
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4()}")
    leader_elect: bool = True
    lease_name: str = "kube-controller-manager"
    lease_namespace: str = "kube-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    healthz_bind_address: str = "127.0.0.1"
    healthz_port: int = 10257
    concurrent_rc_syncs: int = 5
    concurrent_replicaset_syncs: int = 5
    concurrent_deployment_syncs: int = 5
    concurrent_gc_syncs: int = 20
    concurrent_namespace_syncs: int = 10
    node_monitor_grace_period: float = 40.0
    node_startup_grace_period: float = 60.0
    node_eviction_rate: float = 0.1
    secondary_node_eviction_rate: float = 0.01

    def __post_init__(self) -> None:
        unknown = {c.lstrip("-") for c in self.controllers} - {"*", *CONTROLLERS}
        if unknown:
            raise ValueError(
                f"unknown controller(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(CONTROLLERS))}"
            )
        if self.node_monitor_grace_period <= 0:
            raise ValueError("--node-monitor-grace-period must be positive")


@dataclass(slots=True)
class _Context:
    """What a controller factory may use while this replica leads."""

    client: ApiClient
    informers: SharedInformers
    options: ManagerOptions
    recorders: list[EventRecorder]

    def recorder(self, component: str) -> EventRecorder:
        rec = EventRecorder(self.client, component=component)
        self.recorders.append(rec)
        return rec


Factory = Callable[[_Context], RunnableController]


def _replicationcontroller(ctx: _Context) -> RunnableController:
    from services.controller_manager.replication import REPLICATIONCONTROLLER, ReplicaSetController

    return ReplicaSetController(
        client=ctx.client,
        kind=REPLICATIONCONTROLLER,
        informers=ctx.informers,
        recorder=ctx.recorder(REPLICATIONCONTROLLER.component),
        workers=ctx.options.concurrent_rc_syncs,
    )


def _replicaset(ctx: _Context) -> RunnableController:
    from services.controller_manager.replication import REPLICASET, ReplicaSetController

    return ReplicaSetController(
        client=ctx.client,
        kind=REPLICASET,
        informers=ctx.informers,
        recorder=ctx.recorder(REPLICASET.component),
        workers=ctx.options.concurrent_replicaset_syncs,
    )


def _deployment(ctx: _Context) -> RunnableController:
    from services.controller_manager.deployment import DeploymentController

    return DeploymentController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("deployment-controller"),
        workers=ctx.options.concurrent_deployment_syncs,
    )


def _nodelifecycle(ctx: _Context) -> RunnableController:
    from services.controller_manager.node_lifecycle import NodeLifecycleController

    opts = ctx.options
    return NodeLifecycleController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("node-controller"),
        grace_period=opts.node_monitor_grace_period,
        startup_grace_period=opts.node_startup_grace_period,
        eviction_rate=opts.node_eviction_rate,
    )


def _taint_eviction(ctx: _Context) -> RunnableController:
    from services.controller_manager.taint_eviction import TaintEvictionController

    return TaintEvictionController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("taint-eviction-controller"),
    )


def _garbagecollector(ctx: _Context) -> RunnableController:
    from services.controller_manager.garbage_collector import GarbageCollector

    return GarbageCollector(
        client=ctx.client, informers=ctx.informers, workers=ctx.options.concurrent_gc_syncs
    )


def _namespace(ctx: _Context) -> RunnableController:
    from services.controller_manager.namespace import NamespaceController

    return NamespaceController(
        client=ctx.client, informers=ctx.informers, workers=ctx.options.concurrent_namespace_syncs
    )


CONTROLLERS: dict[str, Factory] = {
    "replicationcontroller": _replicationcontroller,
    "replicaset": _replicaset,
    "deployment": _deployment,
    "nodelifecycle": _nodelifecycle,
    "taint-eviction-controller": _taint_eviction,
    "garbagecollector": _garbagecollector,
    "namespace": _namespace,
}
"""Every controller this process can run, by its ``--controllers`` name."""


def enabled_controllers(spec: Iterable[str]) -> list[str]:
    """Resolve ``--controllers`` (``*``, ``name``, ``-name``) into names, in CONTROLLERS order."""
    items = [s.strip() for s in spec if s.strip()]
    star = "*" in items
    on = {s for s in items if s != "*" and not s.startswith("-")}
    off = {s[1:] for s in items if s.startswith("-")}
    return [n for n in CONTROLLERS if (star or n in on) and n not in off]


class ControllerManager:
    def __init__(self, client: ApiClient, options: ManagerOptions | None = None) -> None:
        self.client = client
        self.options = options or ManagerOptions()
        self.elector: LeaderElector | None = None
        self.leading = asyncio.Event()
        self.controllers: dict[str, RunnableController] = {}
        self.informers: SharedInformers | None = None
        self._runner: web.AppRunner | None = None
        self.healthz_port: int | None = None

    # -- running --------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve /healthz, campaign, run the controllers while leading; until cancelled."""
        opts = self.options
        await self._start_healthz()
        try:
            if not opts.leader_elect:
                log.info("leader election disabled; starting controllers now")
                await self._lead()
                return
            self.elector = LeaderElector(
                self.client,
                LeaderElectionConfig(
                    lease_name=opts.lease_name,
                    identity=opts.identity,
                    namespace=opts.lease_namespace,
                    lease_duration=opts.lease_duration,
                    renew_deadline=opts.renew_deadline,
                    retry_period=opts.retry_period,
                ),
                on_started_leading=self._lead,
            )
            log.info(
                "campaigning for lease %s/%s as %s; controllers start once elected",
                opts.lease_namespace, opts.lease_name, opts.identity,
            )  # fmt: skip
            await self.elector.run()
            raise LeadershipLost(f"lost lease {opts.lease_namespace}/{opts.lease_name}")
        finally:
            await self._stop_healthz()

    async def _lead(self) -> None:
        """Build the informers and controllers, run them until cancelled (or one dies)."""
        opts = self.options
        informers = SharedInformers(self.client)
        ctx = _Context(self.client, informers, opts, [])
        names = enabled_controllers(opts.controllers)
        controllers = {name: CONTROLLERS[name](ctx) for name in names}
        self.informers, self.controllers = informers, controllers
        tasks: list[asyncio.Task[None]] = []
        try:
            informers.start()
            tasks += [rec.start() for rec in ctx.recorders]
            tasks += [
                asyncio.create_task(c.run(), name=f"controller {name}")
                for name, c in controllers.items()
            ]
            log.info("leading: started controllers %s", ", ".join(names) or "(none)")
            self.leading.set()
            if not tasks:
                await asyncio.Event().wait()
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:  # controllers run forever: an ending is a bug worth shouting
                exc = task.exception()
                log.error("%s ended unexpectedly; stopping all controllers", task.get_name(),
                          exc_info=exc)  # fmt: skip
            raise RuntimeError("a controller stopped")
        finally:
            self.leading.clear()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await informers.stop()
            log.info("controllers stopped")

    # -- health ---------------------------------------------------------------------------

    def healthy(self) -> tuple[bool, str]:
        elector = self.elector
        if elector is None or not elector.is_leader or elector.last_renewed is None:
            return True, "ok"
        age = asyncio.get_running_loop().time() - elector.last_renewed
        limit = self.options.lease_duration + LEADER_HEALTH_TIMEOUT
        if age > limit:
            return False, f"leaderElection: lease not renewed for {age:.0f}s (limit {limit:.0f}s)"
        return True, "ok"

    async def _healthz(self, request: web.Request) -> web.Response:
        ok, text = self.healthy()
        return web.Response(text=text, status=200 if ok else 500)

    async def _start_healthz(self) -> None:
        opts = self.options
        if opts.healthz_port == 0:
            return
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/healthz/leaderElection", self._healthz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, opts.healthz_bind_address, opts.healthz_port)
        try:
            await site.start()
        except OSError as exc:
            # another process holds the port (a second local cluster, a test run): the
            # controllers matter more than the probe endpoint, so go on without it
            await runner.cleanup()
            log.warning(
                "cannot serve /healthz on %s:%d (%s); continuing without it",
                opts.healthz_bind_address, opts.healthz_port, exc.strerror or exc,
            )  # fmt: skip
            return
        self._runner = runner
        self.healthz_port = opts.healthz_port
        log.info("serving /healthz on http://%s:%d", opts.healthz_bind_address, opts.healthz_port)

    async def _stop_healthz(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
