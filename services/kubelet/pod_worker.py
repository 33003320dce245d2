"""One pod worker per pod: drives its containers toward the spec and reports what happened.

Why: each pod has its own timeline (pulls, starts, crashes, back-offs, graceful stops) that must
not wait on other pods, so every pod bound to the node gets a named task of its own, as the
kubelet's ``pod_workers.go`` does. The worker is level-triggered: each *sync* looks at the newest
pod object (the informer pushes it with ``update``), at the runtime's container instances and at
the clock, does what is due, renders the status (``pod_status.py``) and hands it to the status
manager. It sleeps until something wakes it — a new pod object, a container exit, or a back-off
deadline on the event loop's clock (virtual time drives it in tests).

Lifecycle, as Kubernetes users know it:

* **Start**: sandbox (pod IP) → init containers one by one, each to exit 0 → the app containers:
  pull (events Pulling/Pulled, or "already present" by ``imagePullPolicy``) → Created → Started.
  An image that cannot be pulled shows ``ErrImagePull``, then ``ImagePullBackOff`` while the next
  attempt waits (10 s doubling to 5 min); a command that cannot start ends ``StartError`` (128).
* **Exits** follow ``restartPolicy``: Always restarts, OnFailure restarts non-zero exits, Never
  does not. The first restart is immediate, later ones wait 10 s doubling to 5 min
  (``CrashLoopBackOff``, event BackOff); a container that ran 10 minutes is forgiven.
* **Spec change**: a running container whose definition changed (image, command, ...) is stopped
  (Killing "Container X definition changed, will be restarted") and started anew.
* **Termination**: on ``deletionTimestamp`` every container gets SIGTERM, SIGKILL after the grace
  period (Killing "Stopping container X"); the final status (Succeeded/Failed) is written, then the
  pod object is deleted with grace 0 — the kubelet's confirmation — and the sandbox removed. A pod
  that vanished from the API without that (force-deleted) is just stopped and removed.
* **Re-adoption**: a worker started by a restarted kubelet finds the runtime's instances of its
  pod and carries on with them: same processes, same restart counts.

Probes (``probes.py``): readiness gates ``ready``, a startup probe gates ``started`` and the other
probes, a failed liveness (or startup) probe restarts the container by its restart policy.

Not provided: volumes, ``activeDeadlineSeconds``,
ephemeral containers, resource-pressure eviction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.errors import NotFound, StatusError
from api.meta import now_time
from api.quantity import to_bytes
from api.registry import REGISTRY, ResourceType
from client.backoff import Backoff, BackoffPolicy
from client.events import EventRecorder
from client.rest import ApiClient
from services.kubelet.pod_status import ContainerView, build_pod_status
from services.kubelet.probes import ProbeLoop, run_probe
from services.kubelet.runtime.base import (
    ContainerConfig,
    ContainerRecord,
    ContainerStartError,
    ImagePullError,
    ImageRef,
    PodSandbox,
    Runtime,
)
from services.kubelet.runtime.images import default_pull_policy
from services.kubelet.status_manager import StatusManager

__all__ = ["CRASH_BACKOFF", "PULL_BACKOFF", "PodWorker", "WorkerContext", "container_config"]

log = logging.getLogger("kubelet.pods")

Obj = dict[str, Any]

CRASH_BACKOFF = BackoffPolicy(initial=10.0, factor=2.0, cap=300.0, jitter=0.0, reset_after=600.0)
"""The kubelet's container restart back-off: 10 s doubling to 5 min, forgiven after 10 min."""
PULL_BACKOFF = CRASH_BACKOFF
"""Image pulls back off the same way."""
ERR_IMAGE_PULL_SHOWN = 1.0
"""How long ``ErrImagePull`` stays in the status before it reads ``ImagePullBackOff``."""
DEFAULT_GRACE = 30
ORPHAN_GRACE = 2.0
"""Grace for containers of pods that vanished from the API while the kubelet was away."""
SYNC_ERROR_BACKOFF = BackoffPolicy(initial=1.0, factor=2.0, cap=30.0, jitter=0.2, reset_after=60.0)


def _pods() -> ResourceType:
    rt = REGISTRY.get("", "v1", "pods")
    assert rt is not None
    return rt


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


def _field_ref(pod: Mapping[str, Any], path: str, pod_ip: str, host_ip: str) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return str(simple[path] or "")
    for prefix, source in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str((meta.get(source) or {}).get(path[len(prefix) + 2 : -2], ""))
    return ""


def container_config(
    pod: Mapping[str, Any], spec: Mapping[str, Any], *, attempt: int, pod_ip: str, host_ip: str
) -> ContainerConfig:
    """Flatten one container of the pod spec for the runtime."""
    env: dict[str, str] = {}
    for var in spec.get("env") or []:
        if "value" in var and var["value"] is not None:
            env[var["name"]] = str(var["value"])
        elif (var.get("valueFrom") or {}).get("fieldRef"):
            env[var["name"]] = _field_ref(
                pod, var["valueFrom"]["fieldRef"].get("fieldPath", ""), pod_ip, host_ip
            )
        else:
            env[var["name"]] = ""
    limit = ((spec.get("resources") or {}).get("limits") or {}).get("memory")
    return ContainerConfig(
        name=spec["name"],
        image=spec.get("image") or "",
        command=tuple(spec.get("command") or ()),
        args=tuple(spec.get("args") or ()),
        env=env,
        working_dir=spec.get("workingDir"),
        ports=tuple(
            int(p["containerPort"]) for p in spec.get("ports") or [] if p.get("containerPort")
        ),
        memory_limit_bytes=to_bytes(limit) if limit else None,
        attempt=attempt,
    )


@dataclass(slots=True)
class _Container:
    """The worker's memory of one container of the spec."""

    name: str
    instances: list[ContainerRecord] = field(default_factory=list)
    waiting: tuple[str, str | None] | None = None
    crash_backoff: Backoff | None = None
    restart_not_before: float = 0.0
    restart_delay: float = 0.0
    pull_backoff: Backoff | None = None
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


class PodWorker:
    def __init__(self, *, pod: Obj, ctx: WorkerContext) -> None:
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.ctx = ctx
        self._pod = pod
        self._gone = False
        self._wake = asyncio.Event()
        self._containers: dict[str, _Container] = {}
        self._init: dict[str, _Container] = {}
        self._exit_watches: dict[str, asyncio.Task[None]] = {}
        self._pod_ip: str | None = None
        self._start_time: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.terminated = asyncio.Event()

    # ---- inputs ----------------------------------------------------------------------------

    def update(self, pod: Obj) -> None:
        if pod["metadata"].get("uid") == self.uid:
            self._pod = pod
            self.ctx.status.observe(pod)
            self._wake.set()

    def removed(self) -> None:
        """The pod object is gone from the API."""
        self._gone = True
        self._wake.set()

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(
            self.run(), name=f"pod worker {self.namespace}/{self.name} ({self.ctx.node_name})"
        )
        return self.task

    @property
    def pod(self) -> Obj:
        return self._pod

    @property
    def sandbox(self) -> PodSandbox:
        spec = self._pod.get("spec") or {}
        return PodSandbox(
            uid=self.uid,
            namespace=self.namespace,
            name=self.name,
            hostname=spec.get("hostname") or self.name,
        )

    def find_instance(self, container: str, *, previous: bool) -> ContainerRecord | None:
        """The instance ``kubectl logs [--previous]`` means: the current one, or the last one
        that terminated before it (which, while waiting to restart, is the current one)."""
        st = self._containers.get(container) or self._init.get(container)
        if st is None:
            return None
        if not previous:
            return st.current
        cur = st.current
        if cur is not None and not cur.running and st.waiting is not None:
            return cur
        return st.previous

    def waiting_reason(self, container: str) -> str | None:
        st = self._containers.get(container) or self._init.get(container)
        if st is None:
            return None
        if st.waiting is not None:
            return st.waiting[0]
        return None if st.current is not None else "ContainerCreating"

    # ---- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        errors = Backoff(SYNC_ERROR_BACKOFF)
        self._adopt()
        try:
            while True:
                self._wake.clear()
                if self._gone or (self._pod.get("metadata") or {}).get("deletionTimestamp"):
                    await self._terminate()
                    return
                try:
                    deadline = await self._sync()
                    errors.reset()
                except Exception as exc:  # a bad sync must not orphan the pod: retry it
                    delay = errors.next_delay()
                    log.warning(
                        "pod %s/%s: sync failed (%s: %s); will retry in %.1fs",
                        self.namespace,
                        self.name,
                        type(exc).__name__,
                        exc,
                        delay,
                        exc_info=not isinstance(exc, (StatusError, ConnectionError, OSError)),
                    )
                    deadline = asyncio.get_running_loop().time() + delay
                await self._sleep_until(deadline)
        finally:
            for task in self._exit_watches.values():
                task.cancel()
            for st in (*self._containers.values(), *self._init.values()):
                st.stop_probes()
            self.terminated.set()
            self.ctx.on_exit(self.uid)

    async def _sleep_until(self, deadline: float | None) -> None:
        if deadline is None:
            await self._wake.wait()
            return
        timeout = max(0.0, deadline - asyncio.get_running_loop().time())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    def _adopt(self) -> None:
        """Pick up instances a previous kubelet (or a previous worker) left in the runtime."""
        spec = self._pod.get("spec") or {}
        init_names = {c["name"] for c in spec.get("initContainers") or []}
        for record in self.ctx.runtime.list_containers(self.uid):
            table = self._init if record.name in init_names else self._containers
            st = table.setdefault(record.name, _Container(name=record.name))
            st.instances.append(record)
        self._pod_ip = self.ctx.runtime.pod_ip(self.uid)
        specs = {c["name"]: c for c in (spec.get("containers") or [])}
        for st in (*self._containers.values(), *self._init.values()):
            cur = st.current
            if cur is not None and cur.running:
                self._watch_exit(cur)
                if cur.name in specs:
                    self._start_probes(st, specs[cur.name], cur)
        if self._pod_ip:
            log.info(
                "pod %s/%s: re-adopted %d container instance(s) at %s",
                self.namespace,
                self.name,
                sum(len(c.instances) for c in (*self._containers.values(), *self._init.values())),
                self._pod_ip,
            )

    def _watch_exit(self, record: ContainerRecord) -> None:
        async def watch() -> None:
            await self.ctx.runtime.wait_container(record.container_id)
            st = self._containers.get(record.name) or self._init.get(record.name)
            if st is not None and st.current is record:
                st.stop_probes()
            self._wake.set()

        old = self._exit_watches.pop(record.name, None)
        if old is not None:
            old.cancel()
        self._exit_watches[record.name] = asyncio.create_task(
            watch(), name=f"exit watch {self.namespace}/{self.name}/{record.name}"
        )

    # ---- sync ------------------------------------------------------------------------------

    async def _sync(self) -> float | None:
        """One pass; returns the loop time at which a back-off ends (None: wait for news)."""
        pod = self._pod
        spec = pod.get("spec") or {}
        policy = spec.get("restartPolicy") or "Always"
        deadlines: list[float] = []
        if self._start_time is None:
            self._start_time = (pod.get("status") or {}).get("startTime")
        self._pod_ip = await self.ctx.runtime.run_pod_sandbox(self.sandbox)
        if self._start_time is None:
            self._start_time = now_time()

        terminal = self._phase_is_terminal(policy)
        if not terminal and not any(st.instances for st in self._containers.values()):
            # first sight: say Pending/ContainerCreating now; if the start is quick the status
            # manager coalesces this with the Running status that follows
            self._publish(policy=policy)
        initialized = True
        if not terminal:
            for c in spec.get("initContainers") or []:
                st = self._init.setdefault(c["name"], _Container(name=c["name"]))
                cur = st.current
                if cur is not None and not cur.running and cur.exit_code == 0:
                    continue
                initialized = False
                # init containers restart on failure unless the policy is Never
                init_policy = "Never" if policy == "Never" else "OnFailure"
                await self._converge(st, c, init_policy, deadlines)
                break
            if initialized:
                for c in spec.get("containers") or []:
                    st = self._containers.setdefault(c["name"], _Container(name=c["name"]))
                    await self._converge(st, c, policy, deadlines)
            else:
                for c in spec.get("containers") or []:
                    st = self._containers.setdefault(c["name"], _Container(name=c["name"]))
                    st.waiting = ("PodInitializing", None)
        self._publish(policy=policy)
        return min(deadlines) if deadlines else None

    def _phase_is_terminal(self, policy: str) -> bool:
        """A pod that reached Succeeded/Failed never runs again."""
        phase = (self.ctx.status.status_of(self.uid) or (self._pod.get("status") or {})).get(
            "phase"
        )
        return phase in ("Succeeded", "Failed") and policy != "Always"

    async def _converge(
        self, st: _Container, spec: Mapping[str, Any], policy: str, deadlines: list[float]
    ) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        cur = st.current
        assert self._pod_ip is not None
        wanted = container_config(
            self._pod, spec, attempt=0, pod_ip=self._pod_ip, host_ip=self.ctx.host_ip
        )
        if cur is not None and cur.running:
            if st.probe_kill is not None:
                self._event("Normal", "Killing", st.probe_kill)
                st.probe_kill = None
                st.stop_probes()
                await self.ctx.runtime.stop_container(
                    cur.container_id, grace_period=self._grace_period()
                )
                self._wake.set()  # the next sync restarts it by the restart policy
                return
            if cur.spec_hash and cur.spec_hash != wanted.spec_hash:
                self._event(
                    "Normal",
                    "Killing",
                    f"Container {st.name} definition changed, will be restarted",
                )
                await self.ctx.runtime.stop_container(
                    cur.container_id, grace_period=self._grace_period()
                )
                await self._start(st, spec, attempt=cur.attempt + 1, deadlines=deadlines)
            return
        if cur is not None:
            changed = bool(cur.spec_hash) and cur.spec_hash != wanted.spec_hash
            restart = policy == "Always" or (policy == "OnFailure" and cur.exit_code != 0)
            if not restart and not (changed and policy != "Never"):
                st.waiting = None
                return
            if now < st.restart_not_before and not changed:
                st.waiting = (
                    "CrashLoopBackOff",
                    f"back-off {_duration(st.restart_delay)} restarting failed container={st.name} "
                    f"pod={self.name}_{self.namespace}({self.uid})",
                )
                if st.backoff_reported_for != cur.container_id:
                    st.backoff_reported_for = cur.container_id
                    self._event(
                        "Warning",
                        "BackOff",
                        f"Back-off restarting failed container {st.name} in pod "
                        f"{self.name}_{self.namespace}({self.uid})",
                    )
                deadlines.append(st.restart_not_before)
                return
            if st.crash_backoff is None:
                st.crash_backoff = Backoff(CRASH_BACKOFF)
            await self._start(st, spec, attempt=cur.attempt + 1, deadlines=deadlines)
            if st.current is not cur:
                st.restart_delay = st.crash_backoff.next_delay()
                st.restart_not_before = loop.time() + st.restart_delay
            return
        await self._start(st, spec, attempt=0, deadlines=deadlines)

    async def _start(
        self, st: _Container, spec: Mapping[str, Any], *, attempt: int, deadlines: list[float]
    ) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        image_name = spec.get("image") or ""
        if now < st.pull_not_before:
            assert st.pull_failed_at is not None
            if now - st.pull_failed_at >= ERR_IMAGE_PULL_SHOWN or st.waiting is None:
                if st.waiting is None or st.waiting[0] != "ImagePullBackOff":
                    self._event("Normal", "BackOff", f'Back-off pulling image "{image_name}"')
                    self._event("Warning", "Failed", "Error: ImagePullBackOff")
                st.waiting = ("ImagePullBackOff", f'Back-off pulling image "{image_name}"')
                deadlines.append(st.pull_not_before)
            else:
                deadlines.append(st.pull_failed_at + ERR_IMAGE_PULL_SHOWN)
            return
        image = await self._pull(st, spec, deadlines)
        if image is None:
            return
        assert self._pod_ip is not None
        config = container_config(
            self._pod, spec, attempt=attempt, pod_ip=self._pod_ip, host_ip=self.ctx.host_ip
        )
        self._event("Normal", "Created", f"Created container: {st.name}")
        try:
            record = await self.ctx.runtime.start_container(self.sandbox, config, image=image)
        except ContainerStartError as exc:
            self._event("Warning", "Failed", f"Error: {exc.message}")
            st.instances.append(exc.record)
            st.waiting = None
            return
        self._event("Normal", "Started", f"Started container {st.name}")
        st.instances.append(record)
        st.waiting = None
        self._watch_exit(record)
        self._start_probes(st, spec, record)

    # ---- probes ----------------------------------------------------------------------------

    def _start_probes(
        self, st: _Container, spec: Mapping[str, Any], record: ContainerRecord
    ) -> None:
        st.stop_probes()
        st.probe_kill = None
        startup = spec.get("startupProbe")
        readiness = spec.get("readinessProbe")
        liveness = spec.get("livenessProbe")
        simulated = self.ctx.runtime.name == "sim"  # nothing listens in a simulated container
        st.started = startup is None or simulated
        st.ready = readiness is None or simulated
        if simulated:
            return

        def attempt(probe: Mapping[str, Any]) -> Callable[[], Any]:
            return lambda: run_probe(
                probe,
                runtime=self.ctx.runtime,
                container_id=record.container_id,
                container=spec,
                pod_ip=self._pod_ip or "127.0.0.1",
            )

        def handler(kind: str) -> Callable[[bool, str, bool | None], None]:
            def on_result(ok: bool, message: str, state: bool | None) -> None:
                if st.current is not record:
                    return
                if not ok:
                    self._event("Warning", "Unhealthy", f"{kind} probe failed: {message}")
                if kind == "Startup" and state is True and not st.started:
                    st.started = True
                    self._wake.set()
                elif kind == "Readiness" and (state is True) != st.ready:
                    st.ready = state is True
                    self._wake.set()
                elif kind in ("Startup", "Liveness") and state is False and st.probe_kill is None:
                    st.probe_kill = (
                        f"Container {st.name} failed {kind.lower()} probe, will be restarted"
                    )
                    self._wake.set()

            return on_result

        gate: asyncio.Event | None = None
        loops: list[tuple[str, ProbeLoop]] = []
        if startup:
            first = ProbeLoop(probe=startup, attempt=attempt(startup), on_result=handler("Startup"))
            gate = first.succeeded
            loops.append(("startup", first))
        for kind, probe in (("Readiness", readiness), ("Liveness", liveness)):
            if probe:
                loops.append(
                    (
                        kind.lower(),
                        ProbeLoop(
                            probe=probe, attempt=attempt(probe), on_result=handler(kind), after=gate
                        ),
                    )
                )
        for kind, loop in loops:
            st.probes.append(
                asyncio.create_task(
                    loop.run(), name=f"{kind} probe {self.namespace}/{self.name}/{st.name}"
                )
            )

    async def _pull(
        self, st: _Container, spec: Mapping[str, Any], deadlines: list[float]
    ) -> ImageRef | None:
        image_name = spec.get("image") or ""
        policy = spec.get("imagePullPolicy") or default_pull_policy(image_name)
        started = time.monotonic()
        try:
            image, present = await self.ctx.runtime.pull_image(image_name, policy=policy)
        except ImagePullError as exc:
            now = asyncio.get_running_loop().time()
            if exc.reason == "ErrImageNeverPull":
                self._event("Warning", "ErrImageNeverPull", exc.message)
            else:
                self._event("Normal", "Pulling", f'Pulling image "{image_name}"')
                self._event(
                    "Warning", "Failed", f'Failed to pull image "{image_name}": {exc.message}'
                )
            self._event("Warning", "Failed", f"Error: {exc.reason}")
            if st.pull_backoff is None:
                st.pull_backoff = Backoff(PULL_BACKOFF)
            st.pull_not_before = now + st.pull_backoff.next_delay()
            st.pull_failed_at = now
            st.waiting = (exc.reason, exc.message)
            deadlines.append(now + ERR_IMAGE_PULL_SHOWN)
            return None
        st.pull_backoff = None
        st.pull_not_before = 0.0
        st.pull_failed_at = None
        if present:
            self._event(
                "Normal", "Pulled", f'Container image "{image_name}" already present on machine'
            )
        else:
            took = _duration(time.monotonic() - started, precise=True)
            self._event("Normal", "Pulling", f'Pulling image "{image_name}"')
            self._event(
                "Normal",
                "Pulled",
                f'Successfully pulled image "{image_name}" in {took} ({took} including waiting). '
                f"Image size: {image.size_bytes} bytes.",
            )
        return image

    # ---- status ----------------------------------------------------------------------------

    def _views(
        self, table: Mapping[str, _Container], specs: list[Mapping[str, Any]]
    ) -> list[ContainerView]:
        views = []
        for c in specs:
            st = table.get(c["name"])
            cur = st.current if st else None
            views.append(
                ContainerView(
                    name=c["name"],
                    image=c.get("image") or "",
                    current=cur,
                    previous=st.previous if st else None,
                    waiting=st.waiting if st else None,
                    ready=cur is not None
                    and cur.running
                    and st is not None
                    and st.ready
                    and st.started,
                    started=cur is not None and cur.running and st is not None and st.started,
                )
            )
        return views

    def _render(self, *, policy: str, terminal: bool = False) -> Obj:
        spec = self._pod.get("spec") or {}
        return build_pod_status(
            old=self._pod.get("status") or {},
            views=self._views(self._containers, spec.get("containers") or []),
            init_views=self._views(self._init, spec.get("initContainers") or []),
            restart_policy=policy,
            pod_ip=self._pod_ip,
            host_ip=self.ctx.host_ip,
            sandbox_ready=self._pod_ip is not None and not terminal,
            terminal=terminal,
            start_time=self._start_time,
        )

    def _publish(self, *, policy: str) -> None:
        self.ctx.status.set_status(self._pod, self._render(policy=policy))

    # ---- termination -----------------------------------------------------------------------

    def _grace_period(self) -> float:
        meta = self._pod.get("metadata") or {}
        spec = self._pod.get("spec") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds")
        return float(DEFAULT_GRACE if grace is None else grace)

    async def _terminate(self) -> None:
        grace = self._grace_period() if not self._gone else min(self._grace_period(), ORPHAN_GRACE)
        stops = []
        for st in (*self._containers.values(), *self._init.values()):
            st.stop_probes()
            cur = st.current
            if cur is not None and cur.running:
                self._event("Normal", "Killing", f"Stopping container {st.name}")
                stops.append(self.ctx.runtime.stop_container(cur.container_id, grace_period=grace))
            st.waiting = None
        if stops:
            log.info(
                "pod %s/%s: stopping %d container(s) with a %.0fs grace period",
                self.namespace,
                self.name,
                len(stops),
                grace,
            )
            await asyncio.gather(*stops)
        if not self._gone:
            policy = (self._pod.get("spec") or {}).get("restartPolicy") or "Always"
            status = self._render(policy=policy, terminal=True)
            pod = await self._write_final(status)
            if pod is not None:
                await self._confirm_deletion()
        self.ctx.status.forget(self.uid)
        await self.ctx.runtime.remove_pod_sandbox(self.uid)
        log.info("pod %s/%s: terminated and removed from the node", self.namespace, self.name)

    async def _write_final(self, status: Obj) -> Obj | None:
        backoff = Backoff(SYNC_ERROR_BACKOFF)
        for _ in range(5):
            try:
                return await self.ctx.status.write_now(self._pod, status)
            except (StatusError, ConnectionError) as exc:
                if isinstance(exc, NotFound):
                    return None
                delay = backoff.next_delay()
                log.warning(
                    "pod %s/%s: final status write failed (%s); will retry in %.1fs",
                    self.namespace,
                    self.name,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
        return self._pod

    async def _confirm_deletion(self) -> None:
        """The kubelet's last word on a pod: delete it with grace 0 once its containers are gone."""
        backoff = Backoff(SYNC_ERROR_BACKOFF)
        for _ in range(10):
            try:
                await self.ctx.client.delete(
                    _pods(),
                    self.name,
                    namespace=self.namespace,
                    grace_period_seconds=0,
                    preconditions={"uid": self.uid},
                )
                return
            except NotFound:
                return
            except StatusError as exc:
                if exc.code == 409:  # precondition failed: a new pod took the name; ours is gone
                    return
                delay = backoff.next_delay()
            except ConnectionError as exc:
                delay = backoff.next_delay()
                log.warning(
                    "pod %s/%s: delete failed (%s); will retry in %.1fs",
                    self.namespace,
                    self.name,
                    exc,
                    delay,
                )
            await asyncio.sleep(delay)

    def _event(self, type_: str, reason: str, message: str) -> None:
        self.ctx.recorder.event(self._pod, type_, reason, message)  # type: ignore[arg-type]


def _duration(seconds: float, *, precise: bool = False) -> str:
    """Go's ``time.Duration`` spelling: ``10s``, ``1m20s``, ``5m0s``, ``412ms``."""
    if precise and seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if precise:
        return f"{seconds:.3f}s"
    total = round(seconds)
    minutes, secs = divmod(total, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"
