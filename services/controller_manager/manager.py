"""The controller-manager: every controller in one process, acting only while it leads.

Why: the controllers share one apiserver connection, one informer per resource and one leader
election, exactly like ``kube-controller-manager``. Only the replica holding the Lease
``kube-system/kube-controller-manager`` runs controllers; a standby replica keeps campaigning,
so killing the leader hands over within a lease duration (15 s by default).

What it owns:

* ``healthy()``: the leader-election health check its process serves as ``/healthz`` (and
  ``/healthz/leaderElection``; see ``service``): ``ok`` unless this replica leads and has not
  renewed its lease for ``lease_duration`` + 20 s (Kubernetes' check);
* while leading: the controllers' work queues (reporting client-go's ``workqueue_*`` metrics
  to ``queue_metrics``, ``client.workqueue_metrics``, when given), the ``SharedInformers``,
  one ``EventRecorder`` per controller (so ``kubectl describe`` names the controller as the
  event source), and each enabled controller as a named task, all in one supervised task group (``component.tasks``): a controller that
  ends stops them all;
* losing the lease stops every controller and makes ``run()`` raise ``LeadershipLost`` (the
  process exits 1 with one line and its supervisor restarts it, as Kubernetes does);
  cancelling ``run()`` stops everything and releases the lease.

``controllers`` follows ``--controllers``: ``*`` is every controller, ``name`` enables one,
``-name`` disables one (``*,-nodelifecycle``).

Limits: no fencing between an old and a new leader (see ``client.leader_election``); every write
is a compare-and-swap, which is what makes a brief overlap harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from client.events import EventRecorder
from client.leader_election import LeaderElectionConfig, LeaderElector, LeadershipLost
from client.rest import ApiClient
from client.workqueue_metrics import WorkQueueMetrics
from component.tasks import TaskGroup
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
    concurrent_rc_syncs: int = 5
    concurrent_replicaset_syncs: int = 5
    concurrent_deployment_syncs: int = 5
    concurrent_gc_syncs: int = 20
    concurrent_namespace_syncs: int = 10
    concurrent_job_syncs: int = 5
    concurrent_ttl_after_finished_syncs: int = 5
    node_monitor_grace_period: float = 40.0
    node_startup_grace_period: float = 60.0
    node_eviction_rate: float = 0.1
    secondary_node_eviction_rate: float = 0.01
    concurrent_endpoint_syncs: int = 5
    concurrent_service_endpoint_syncs: int = 5
    max_endpoints_per_slice: int = 100
    service_lb_range: str = "127.192.0.0/16"
    root_ca: str = ""
    """The CA bundle the root-CA publisher puts in every namespace (``--root-ca-file``, else the
    client's CA); empty: that controller does not run."""

    def __post_init__(self) -> None:
        unknown = {c.lstrip("-") for c in self.controllers} - {"*", *CONTROLLERS}
        if unknown:
            raise ValueError(
                f"unknown controller(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(CONTROLLERS))}"
            )
        if self.node_monitor_grace_period <= 0:
            raise ValueError("--node-monitor-grace-period must be positive")
        if not 1 <= self.max_endpoints_per_slice <= 1000:
            raise ValueError("--max-endpoints-per-slice must be between 1 and 1000")
        try:
            ipaddress.IPv4Network(self.service_lb_range)
        except ValueError as exc:
            raise ValueError(f"--service-lb-range: {exc}") from None


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


Factory = Callable[[_Context], RunnableController | None]
"""Builds a controller; None (logged by the factory) when this process cannot run it."""


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


def _serviceaccount(ctx: _Context) -> RunnableController:
    from services.controller_manager.serviceaccounts import ServiceAccountsController

    return ServiceAccountsController(client=ctx.client, informers=ctx.informers)


def _persistentvolume_binder(ctx: _Context) -> RunnableController:
    from services.controller_manager.persistentvolume_binder import PersistentVolumeController

    return PersistentVolumeController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("persistentvolume-controller"),
    )


def _local_path_provisioner(ctx: _Context) -> RunnableController:
    from api.storage import LOCAL_PATH_PROVISIONER
    from services.controller_manager.local_path_provisioner import LocalPathProvisioner

    return LocalPathProvisioner(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder(LOCAL_PATH_PROVISIONER),
    )


def _daemonset(ctx: _Context) -> RunnableController:
    from services.controller_manager.daemonset import DaemonSetController

    return DaemonSetController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("daemonset-controller"),
    )


def _disruption(ctx: _Context) -> RunnableController:
    from services.controller_manager.disruption import DisruptionController

    return DisruptionController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("controllermanager"),
    )


def _statefulset(ctx: _Context) -> RunnableController:
    from services.controller_manager.statefulset import StatefulSetController

    return StatefulSetController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("statefulset-controller"),
    )


def _job(ctx: _Context) -> RunnableController:
    from services.controller_manager.job import JobController

    return JobController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("job-controller"),
        workers=ctx.options.concurrent_job_syncs,
    )


def _ttl_after_finished(ctx: _Context) -> RunnableController:
    from services.controller_manager.ttl_after_finished import TTLAfterFinishedController

    return TTLAfterFinishedController(
        client=ctx.client,
        informers=ctx.informers,
        workers=ctx.options.concurrent_ttl_after_finished_syncs,
    )


def _cronjob(ctx: _Context) -> RunnableController:
    from services.controller_manager.cronjob import CronJobController

    return CronJobController(
        client=ctx.client, informers=ctx.informers, recorder=ctx.recorder("cronjob-controller")
    )


def _endpoint(ctx: _Context) -> RunnableController:
    from services.controller_manager.endpoints import EndpointsController

    return EndpointsController(
        client=ctx.client, informers=ctx.informers, workers=ctx.options.concurrent_endpoint_syncs
    )


def _endpointslice(ctx: _Context) -> RunnableController:
    from services.controller_manager.endpointslice import EndpointSliceController

    return EndpointSliceController(
        client=ctx.client,
        informers=ctx.informers,
        max_endpoints_per_slice=ctx.options.max_endpoints_per_slice,
        workers=ctx.options.concurrent_service_endpoint_syncs,
    )


def _endpointslice_mirroring(ctx: _Context) -> RunnableController:
    from services.controller_manager.endpointslice_mirroring import (
        EndpointSliceMirroringController,
    )

    return EndpointSliceMirroringController(client=ctx.client, informers=ctx.informers)


def _service_lb(ctx: _Context) -> RunnableController:
    from services.controller_manager.service_lb import ServiceLBController

    return ServiceLBController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("service-lb-controller"),
        lb_range=ctx.options.service_lb_range,
    )


def _clusterrole_aggregation(ctx: _Context) -> RunnableController:
    from services.controller_manager.clusterrole_aggregation import (
        ClusterRoleAggregationController,
    )

    return ClusterRoleAggregationController(client=ctx.client, informers=ctx.informers)


def _root_ca_cert_publisher(ctx: _Context) -> RunnableController | None:
    from services.controller_manager.root_ca_publisher import CONFIGMAP, RootCAPublisher

    if not ctx.options.root_ca:
        log.warning("no --root-ca-file and no CA in the client's config: not publishing %s",
                    CONFIGMAP)  # fmt: skip
        return None
    return RootCAPublisher(client=ctx.client, informers=ctx.informers, root_ca=ctx.options.root_ca)


def _horizontal_pod_autoscaling(ctx: _Context) -> RunnableController:
    from services.controller_manager.horizontal_pod_autoscaler import (
        HorizontalPodAutoscalerController,
    )

    return HorizontalPodAutoscalerController(
        client=ctx.client,
        informers=ctx.informers,
        recorder=ctx.recorder("horizontal-pod-autoscaler"),
    )


CONTROLLERS: dict[str, Factory] = {
    "replicationcontroller": _replicationcontroller,
    "replicaset": _replicaset,
    "deployment": _deployment,
    "nodelifecycle": _nodelifecycle,
    "taint-eviction-controller": _taint_eviction,
    "garbagecollector": _garbagecollector,
    "namespace": _namespace,
    "serviceaccount": _serviceaccount,
    "root-ca-cert-publisher": _root_ca_cert_publisher,
    "persistentvolume-binder": _persistentvolume_binder,
    "local-path-provisioner": _local_path_provisioner,
    "job": _job,
    "ttl-after-finished": _ttl_after_finished,
    "cronjob": _cronjob,
    "statefulset": _statefulset,
    "disruption": _disruption,
    "daemonset": _daemonset,
    "endpoint": _endpoint,
    "endpointslice": _endpointslice,
    "endpointslice-mirroring": _endpointslice_mirroring,
    "service-lb": _service_lb,
    "clusterrole-aggregation": _clusterrole_aggregation,
    "horizontalpodautoscaling": _horizontal_pod_autoscaling,
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
    def __init__(
        self,
        client: ApiClient,
        options: ManagerOptions | None = None,
        *,
        queue_metrics: WorkQueueMetrics | None = None,
    ) -> None:
        self.client = client
        self.options = options or ManagerOptions()
        self.queue_metrics = queue_metrics
        self.elector: LeaderElector | None = None
        self.leading = asyncio.Event()
        self.controllers: dict[str, RunnableController] = {}
        self.informers: SharedInformers | None = None

    # -- running --------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign, run the controllers while leading; until cancelled."""
        opts = self.options
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
        await self.elector.campaign(what="controllers start")

    async def _lead(self) -> None:
        """Build the informers and controllers, run them until cancelled (or one dies)."""
        opts = self.options
        informers = SharedInformers(self.client)
        ctx = _Context(self.client, informers, opts, [])
        names = enabled_controllers(opts.controllers)
        with contextlib.ExitStack() as building:
            if self.queue_metrics is not None:  # the controllers' queues report to it
                building.enter_context(self.queue_metrics.providing())
            built = {name: CONTROLLERS[name](ctx) for name in names}
        controllers = {name: c for name, c in built.items() if c is not None}
        names = list(controllers)
        self.informers, self.controllers = informers, controllers
        # controllers run forever: the first to end is logged loudly and stops them all
        tasks = TaskGroup("controller-manager", logger=log)
        try:
            informers.start()
            for rec in ctx.recorders:
                tasks.adopt(rec.start())
            for name, controller in controllers.items():
                tasks.start(f"controller {name}", controller.run())
            log.info("leading: started controllers %s", ", ".join(names) or "(none)")
            self.leading.set()
            await tasks.wait()
        finally:
            self.leading.clear()
            await tasks.cancel()
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
