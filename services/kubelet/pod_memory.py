"""What a pod worker remembers about its pod: the newest pod object and each container's story.

Why a module of its own: the worker's sync, its container starts, its probes, its status and its
termination all read and write the same memory — which instances each container has had, why
it waits, its back-offs, its readiness — and the node-wide parts every worker shares
(``WorkerContext``). Naming that memory lets each of those concerns live in a module of its own.

What it owns: ``WorkerContext`` (the node's client, runtime, status manager, recorder, names,
the cache of referenced objects, the token manager and where volumes live), ``ContainerState`` (one container of
the spec, across restarts) and ``PodMemory`` (one pod: its object, its containers and init
containers, sandbox IP, start time, its volumes, the objects it references as last read, an
eviction, the wake-up event and the exit-watch tasks). ``PodMemory.sandbox`` is what the
runtime is told about the pod (hostname, subdomain, host aliases, resolv.conf).

What it does not guarantee: nothing here is shared between pods or persisted; a restarted
kubelet rebuilds it from the runtime's instances (``PodWorker`` re-adopts them), so back-off
timers start afresh.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from client.backoff import Backoff, BackoffPolicy
from client.events import EventRecorder, EventType
from client.rest import ApiClient
from services.kubelet.container_env import Objects
from services.kubelet.object_cache import ObjectCache
from services.kubelet.pod_dns import ClusterDns, resolv_conf
from services.kubelet.runtime.base import ContainerRecord, PodSandbox, Runtime
from services.kubelet.status_manager import StatusManager
from services.kubelet.token_manager import TokenManager
from services.kubelet.volumes import MountedVolume, VolumeHost

__all__ = [
    "DEFAULT_GRACE",
    "REFERENCE_BACKOFF",
    "ContainerState",
    "PodMemory",
    "ServiceSource",
    "WorkerContext",
]

Obj = dict[str, Any]

DEFAULT_GRACE = 30
"""``terminationGracePeriodSeconds`` when the pod does not say."""
REFERENCE_BACKOFF = BackoffPolicy(initial=0.5, factor=2.0, cap=122.0, jitter=0.0, reset_after=600.0)
"""Retries of a FailedMount or CreateContainerConfigError when nothing woke the pod sooner: the
kubelet's volume operation back-off (500 ms doubling to 2m2s). A change of a referenced object
wakes the pod at once."""


class ServiceSource(Protocol):
    """What the service variables are read from: the kubelet's Services informer."""

    @property
    def has_synced(self) -> bool: ...

    def list(self) -> list[Obj]: ...


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What every pod worker of one node shares."""

    client: ApiClient
    runtime: Runtime
    status: StatusManager
    recorder: EventRecorder
    node_name: str
    host_ip: str
    objects: ObjectCache
    """The ConfigMaps, Secrets, PVCs and PVs the node's pods reference, watched by name."""
    volumes: VolumeHost
    node_resolv_conf: str = ""
    """The node's ``/etc/resolv.conf``, which a pod's ``dnsConfig`` extends."""
    cluster_dns: ClusterDns = field(default_factory=ClusterDns)
    """``--cluster-dns`` and ``--cluster-domain``: ClusterFirst pods' resolver."""
    services: ServiceSource | None = None
    """The Services informer (service environment variables); None: no variables."""
    tokens: TokenManager | None = None
    """The node's service-account tokens (projected volumes); None: token files left out."""
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
    objects: Objects = field(default_factory=dict)
    """The referenced objects as this sync read them (None: not found)."""
    volumes: dict[str, MountedVolume] = field(default_factory=dict)
    """Volumes set up so far, by name."""
    volumes_ready: bool = False
    """Every volume was set up once; later failures (a ConfigMap deleted) only warn."""
    reference_backoff: Backoff | None = None
    """While a volume or an env reference fails: when to try again without news."""
    evicted: str | None = None
    """Why the kubelet evicted the pod (phase Failed, reason Evicted); it never runs again."""

    @classmethod
    def of(cls, pod: Obj, *, ctx: WorkerContext) -> PodMemory:
        meta = pod["metadata"]
        status = pod.get("status") or {}
        return cls(
            ctx=ctx,
            pod=pod,
            uid=meta["uid"],
            namespace=meta["namespace"],
            name=meta["name"],
            evicted=(status.get("message") or "") if status.get("reason") == "Evicted" else None,
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
            subdomain=spec.get("subdomain") or "",
            resolv_conf=resolv_conf(
                spec,
                node_resolv_conf=self.ctx.node_resolv_conf,
                namespace=self.namespace,
                cluster=self.ctx.cluster_dns,
            ),
            host_aliases=tuple(
                (str(alias.get("ip") or ""), tuple(alias.get("hostnames") or ()))
                for alias in spec.get("hostAliases") or ()
            ),
        )

    def retry_references_at(self) -> float:
        """A reference failed (FailedMount, CreateContainerConfigError): the loop time to try
        again if no change of a referenced object wakes the pod sooner."""
        if self.reference_backoff is None:
            self.reference_backoff = Backoff(REFERENCE_BACKOFF)
        return asyncio.get_running_loop().time() + self.reference_backoff.next_delay()

    def grace_period(self) -> float:
        meta = self.pod.get("metadata") or {}
        spec = self.pod.get("spec") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds")
        return float(DEFAULT_GRACE if grace is None else grace)

    def event(self, type_: EventType, reason: str, message: str) -> None:
        self.ctx.recorder.event(self.pod, type_, reason, message)
