"""The scheduler as a component: informers, queue, health server and the scheduling loop.

What it owns (``SchedulerService``, a ``component.Service``):

* ``start``: informers on pods and nodes start filling the cache and the queue, informers on
  PersistentVolumeClaims, PersistentVolumes and StorageClasses the volume cache (VolumeBinding
  reads it), with the queue's timers and the event recorder, all in one supervised task group;
  the health server (``/healthz``, ``/livez``, ``/readyz`` once every informer synced,
  ``/metrics``) listens on
  ``--healthz-port`` (the ``kubelite: scheduler health listening on ...`` line names the port);
  then the scheduling task: once both informers have synced, the replica campaigns for the
  ``kube-system/kube-scheduler`` Lease and schedules only while it leads. A standby replica
  keeps its cache warm, so a take-over starts scheduling at once.
* ``wait``: until a task ends. Losing the Lease (it could not be renewed in time) ends the
  process with status 1 and one line, as kube-scheduler does; a supervisor (``kubelite up``)
  restarts it as a follower.
* ``stop`` (SIGINT/SIGTERM): cancels the scheduling loop (in-flight bindings finish) and
  releases the Lease so a standby takes over within a retry period, gives queued events 2 s
  to be written, then stops the informers and the health server and closes the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from aiohttp import web

from api.registry import REGISTRY
from client.events import EventRecorder
from client.informer import Informer, strip_managed_fields
from client.kubeconfig import ClientConfig
from client.leader_election import LeaderElectionConfig, LeaderElector
from client.rest import ApiClient
from component.flags import BindAddress, LeaderElectionFlags
from component.health import HealthServer, text_response
from component.tasks import TaskGroup
from services.scheduler.config import SchedulerConfig, build_framework
from services.scheduler.framework import Handle
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.queue import SchedulingQueue
from services.scheduler.scheduler import DEFAULT_BIND_CONCURRENCY, Scheduler
from services.scheduler.volumes import VolumeCache

__all__ = ["SchedulerOptions", "SchedulerService"]

log = logging.getLogger("kubelite.scheduler")

EVENT_FLUSH_TIMEOUT = 2.0
"""Seconds queued events get to be written on the way out."""


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    client: ClientConfig
    config: SchedulerConfig
    leader_election: LeaderElectionFlags
    identity: str
    health: BindAddress = field(default_factory=lambda: BindAddress(host="127.0.0.1", port=10259))
    bind_concurrency: int = DEFAULT_BIND_CONCURRENCY


class SchedulerService:
    def __init__(self, options: SchedulerOptions) -> None:
        self.options = options
        pods_rt = REGISTRY.by_kind("", "Pod")
        nodes_rt = REGISTRY.by_kind("", "Node")
        claims_rt = REGISTRY.by_kind("", "PersistentVolumeClaim")
        volumes_rt = REGISTRY.by_kind("", "PersistentVolume")
        classes_rt = REGISTRY.by_kind("storage.k8s.io", "StorageClass")
        assert pods_rt and nodes_rt and claims_rt and volumes_rt and classes_rt
        profile = options.config.profile
        self.client = ApiClient(options.client)
        volumes = VolumeCache()
        self.queue = SchedulingQueue(
            initial_backoff=options.config.pod_initial_backoff_seconds,
            max_backoff=options.config.pod_max_backoff_seconds,
        )
        self.recorder = EventRecorder(self.client, component=profile.scheduler_name)
        self.elector: LeaderElector | None = None
        self.scheduler = sched = Scheduler(
            client=self.client,
            framework=build_framework(
                options.config, handle=Handle(volumes=volumes, client=self.client)
            ),
            queue=self.queue,
            volumes=volumes,
            recorder=self.recorder,
            scheduler_name=profile.scheduler_name,
            bind_concurrency=options.bind_concurrency,
        )
        sched.metrics = SchedulerMetrics(
            profile=profile.scheduler_name,
            queue_lengths=self.queue.lengths,
            is_leader=lambda: self.elector.is_leader if self.elector is not None else True,
            lease_name=options.leader_election.resource_name,
        )
        # every pod of the cluster is cached: without its managedFields, as kube-scheduler's pod
        # informer trims them (nothing here reads field ownership)
        self.pods = Informer(self.client, pods_rt, name="pods", transform=strip_managed_fields)
        self.pods.add_handler(
            on_add=sched.on_pod_add, on_update=sched.on_pod_update, on_delete=sched.on_pod_delete
        )
        self.nodes = Informer(self.client, nodes_rt, name="nodes")
        self.nodes.add_handler(
            on_add=sched.on_node_add,
            on_update=sched.on_node_update,
            on_delete=sched.on_node_delete,
        )
        self.claims = Informer(self.client, claims_rt, name="persistentvolumeclaims")
        self.claims.add_handler(
            on_add=sched.on_claim_add,
            on_update=sched.on_claim_update,
            on_delete=sched.on_claim_delete,
        )
        self.volumes = Informer(self.client, volumes_rt, name="persistentvolumes")
        self.volumes.add_handler(
            on_add=sched.on_volume_add,
            on_update=sched.on_volume_update,
            on_delete=sched.on_volume_delete,
        )
        self.classes = Informer(self.client, classes_rt, name="storageclasses")
        self.classes.add_handler(
            on_add=sched.on_class_add,
            on_update=sched.on_class_update,
            on_delete=sched.on_class_delete,
        )
        self.informers = (self.pods, self.nodes, self.claims, self.volumes, self.classes)
        self.health = HealthServer(component="scheduler", address=options.health)
        self.health.add_ok("/healthz", "/livez")
        self.health.add("/readyz", self._readyz)
        self.health.add_metrics("/metrics", sched.metrics.render)
        self.tasks = TaskGroup("scheduler", logger=log)
        self._scheduling: asyncio.Task[None] | None = None

    async def _readyz(self, request: web.Request) -> web.Response:
        if all(informer.has_synced for informer in self.informers):
            return text_response("ok")
        return text_response("informers not synced", status=503)

    async def start(self) -> None:
        for informer in self.informers:
            self.tasks.adopt(informer.start())
        self.tasks.start("scheduling queue timers", self.queue.run())
        self.tasks.adopt(self.recorder.start())
        await self.health.start()
        self._scheduling = self.tasks.start("scheduling", self._schedule())

    async def wait(self) -> None:
        await self.tasks.wait()

    async def stop(self) -> None:
        log.info("stopping: scheduling, then informers, queue timers and event recorder")
        if self._scheduling is not None:  # first: in-flight bindings finish, the lease is released
            await self.tasks.retire(self._scheduling)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.recorder.flush(), timeout=EVENT_FLUSH_TIMEOUT)
        await self.tasks.cancel()
        await self.health.stop()
        await self.client.close()

    async def _schedule(self) -> None:
        """Once synced: schedule, while leading if leader election is on."""
        options, sched = self.options, self.scheduler
        profile = options.config.profile
        log.info(
            "waiting for the pod, node, claim, volume and storage class informers to sync from %s",
            options.client.server,
        )
        await asyncio.gather(*(informer.wait_synced() for informer in self.informers))
        log.info(
            "cache synced: %d node(s), %d placed pod(s), %d pending; profile %s, filters %s, scores %s",
            len(sched.cache.nodes()), sched.cache.pod_count, len(self.queue), profile.scheduler_name,
            ",".join(profile.filters), ",".join(f"{n}={w}" for n, w in profile.scores),
        )  # fmt: skip
        le = options.leader_election
        if not le.enabled:
            log.info("leader election off: scheduling now")
            await sched.run()
            return
        self.elector = LeaderElector(
            self.client,
            LeaderElectionConfig(
                lease_name=le.resource_name,
                identity=options.identity,
                namespace=le.resource_namespace,
                lease_duration=le.lease_duration,
                renew_deadline=le.renew_deadline,
                retry_period=le.retry_period,
            ),
            on_started_leading=sched.run,
        )
        await self.elector.campaign(what="scheduling starts")
