"""What a pod worker remembers about its pod: the newest pod object and each container's story.

Why a module of its own: the worker's sync, its container starts, its probes, its status and its
termination all read and write the same memory — which instances each container has had, why
it waits, its back-offs, its readiness — and the node-wide parts every worker shares
(``WorkerContext``). Naming that memory lets each of those concerns live in a module of its own.

What it owns: ``WorkerContext`` (the node's client, runtime, status manager, recorder, names),
``ContainerState`` (one container of the spec, across restarts) and ``PodMemory`` (one pod: its
object, its containers and init containers, sandbox IP, start time, the wake-up event and the
exit-watch tasks).

What it does not guarantee: nothing here is shared between pods or persisted; a restarted
kubelet rebuilds it from the runtime's instances (``PodWorker`` re-adopts them), so back-off
timers start afresh.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from client.backoff import Backoff
from client.events import EventRecorder, EventType
from client.rest import ApiClient
from services.kubelet.runtime.base import ContainerRecord, PodSandbox, Runtime
from services.kubelet.status_manager import StatusManager

__all__ = ["DEFAULT_GRACE", "ContainerState", "PodMemory", "WorkerContext"]

Obj = dict[str, Any]

DEFAULT_GRACE = 30
"""``terminationGracePeriodSeconds`` when the pod does not say."""


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What every pod worker of one node shares."""

    client: ApiClient
    runtime: Runtime
    status: StatusManager
    recorder: EventRecorder
    node_name: str
    host_ip: str
    on_exit: Callable[[str], None] = lambda uid: None
    """Called with the pod uid when the worker has finished (pod gone)."""


@dataclass(slots=True)
class ContainerState:
    """The worker's memory of one container of the spec."""

    name: str
    instances: list[ContainerRecord] = field(default_factory=list)
    waiting: tuple[str, str | None] | None = None
    crash_backoff: Backoff | None = None
    """The container's restart back-off, created at its first restart."""
    restart_not_before: float = 0.0
    restart_delay: float = 0.0
    pull_backoff: Backoff | None = None
    """The image pull back-off, while pulls fail."""
    pull_not_before: float = 0.0
    pull_failed_at: float | None = None
    backoff_reported_for: str | None = None
    """The instance whose CrashLoopBackOff was already announced with an event."""
    ready: bool = True
    started: bool = True
    probe_kill: str | None = None
    """Why a failed liveness/startup probe wants the current instance restarted."""
    probes: list[asyncio.Task[None]] = field(default_factory=list)

    def stop_probes(self) -> None:
        for task in self.probes:
            task.cancel()
        self.probes.clear()

    @property
    def current(self) -> ContainerRecord | None:
        return self.instances[-1] if self.instances else None

    @property
    def previous(self) -> ContainerRecord | None:
        return self.instances[-2] if len(self.instances) > 1 else None


@dataclass(slots=True)
class PodMemory:
    """One pod as its worker knows it."""

    ctx: WorkerContext
    pod: Obj
    uid: str
    namespace: str
    name: str
    gone: bool = False
    """The pod object is gone from the API."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    containers: dict[str, ContainerState] = field(default_factory=dict)
    init: dict[str, ContainerState] = field(default_factory=dict)
    exit_watches: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    pod_ip: str | None = None
    start_time: str | None = None

    @classmethod
    def of(cls, pod: Obj, *, ctx: WorkerContext) -> PodMemory:
        meta = pod["metadata"]
        return cls(
            ctx=ctx, pod=pod, uid=meta["uid"], namespace=meta["namespace"], name=meta["name"]
        )

    def container(self, name: str) -> ContainerState | None:
        """An app container's state, else an init container's, else None."""
        return self.containers.get(name) or self.init.get(name)

    def all_containers(self) -> tuple[ContainerState, ...]:
        return (*self.containers.values(), *self.init.values())

    @property
    def restart_policy(self) -> str:
        return str((self.pod.get("spec") or {}).get("restartPolicy") or "Always")

    @property
    def sandbox(self) -> PodSandbox:
        spec = self.pod.get("spec") or {}
        return PodSandbox(
            uid=self.uid,
            namespace=self.namespace,
            name=self.name,
            hostname=spec.get("hostname") or self.name,
        )

    def grace_period(self) -> float:
        meta = self.pod.get("metadata") or {}
        spec = self.pod.get("spec") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds")
        return float(DEFAULT_GRACE if grace is None else grace)

    def event(self, type_: EventType, reason: str, message: str) -> None:
        self.ctx.recorder.event(self.pod, type_, reason, message)
