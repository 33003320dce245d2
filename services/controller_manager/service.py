"""The controller-manager as a component: the ``ControllerManager`` behind a health server.

What it owns (``ControllerManagerService``, a ``component.Service``):

* ``start``: the health server on ``--healthz-bind-address:--healthz-port`` (127.0.0.1:10257,
  kube-controller-manager's port; 0 picks one, named by the ``kubelite: controller-manager
  health listening on ...`` line) serving ``/healthz`` and ``/healthz/leaderElection`` from
  ``ControllerManager.healthy()`` (500 when this leader stopped renewing its lease), and
  ``/metrics``: client-go's ``workqueue_*{name}`` for every controller's queue and
  ``leader_election_master_status{name}`` (1 while this replica leads); then the manager
  itself (campaign, run the controllers while leading) as a supervised task;
* ``wait``: until the manager ends — losing the lease exits 1 with one line, and a supervisor
  restarts the process, as with Kubernetes;
* ``stop`` (SIGINT/SIGTERM): the controllers stop (in-flight reconciles finish their writes),
  the lease is released so a standby replica takes over at once, then the health server stops
  and the client closes; the process exits 0.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from client.kubeconfig import ClientConfig
from client.rest import ApiClient
from client.workqueue_metrics import WorkQueueMetrics
from component.flags import BindAddress
from component.health import HealthServer
from component.metrics import Metrics, leader_election_status
from component.tasks import TaskGroup
from services.controller_manager.manager import ControllerManager, ManagerOptions

__all__ = ["ControllerManagerService", "ServiceOptions"]

log = logging.getLogger("kubelite.controller-manager")


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    manager: ManagerOptions
    client: ClientConfig
    health: BindAddress = field(default_factory=lambda: BindAddress(host="127.0.0.1", port=10257))


class ControllerManagerService:
    def __init__(self, options: ServiceOptions) -> None:
        self.options = options
        self.client = ApiClient(options.client)
        self.metrics = Metrics()
        self.manager = ControllerManager(
            self.client, options.manager, queue_metrics=WorkQueueMetrics(self.metrics)
        )
        leader_election_status(
            self.metrics,
            lease_name=options.manager.lease_name,
            is_leader=lambda: self.manager.leading.is_set(),
        )
        self.health = HealthServer(component="controller-manager", address=options.health)
        for path in ("/healthz", "/healthz/leaderElection"):
            self.health.add_check(path, self.manager.healthy)
        self.health.add_metrics("/metrics", self.metrics.render)
        self.tasks = TaskGroup("controller-manager", logger=log)

    async def start(self) -> None:
        await self.health.start()
        log.info("talking to apiserver %s", self.client.server)
        self.tasks.start("controller-manager", self.manager.run())

    async def wait(self) -> None:
        await self.tasks.wait()

    async def stop(self) -> None:
        log.info("stopping controllers and releasing the lease")
        await self.tasks.cancel()
        await self.health.stop()
        await self.client.close()
