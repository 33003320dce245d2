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
* **Spec change**: a running container whose image changed (the one container field a pod
  update may change) is stopped (Killing "Container X definition changed, will be restarted")
  and started anew.
* **Termination**: on ``deletionTimestamp`` every container gets SIGTERM, SIGKILL after the grace
  period (Killing "Stopping container X"); the final status (Succeeded/Failed) is written, then the
  pod object is deleted with grace 0 — the kubelet's confirmation — and the sandbox removed. A pod
  that vanished from the API without that (force-deleted) is just stopped and removed.
* **Re-adoption**: a worker started by a restarted kubelet finds the runtime's instances of its
  pod and carries on with them: same processes, same restart counts.

Probes (``probes.py``): readiness gates ``ready``, a startup probe gates ``started`` and the other
probes, a failed liveness (or startup) probe restarts the container by its restart policy.

This module owns the worker's task and loop (wake-ups, sync-error back-off, re-adoption) and
what others ask a worker (its pod, the instance ``kubectl logs`` means). The rest lives beside
it: the worker's memory (``pod_memory.py``), one sync (``pod_sync.py``), a container start
(``container_start.py``), probe wiring (``container_probes.py``), the spec-to-runtime
translation (``container_config.py``), the status (``worker_status.py``), termination
(``pod_termination.py``) and the back-off numbers (``restart_backoff.py``).

Volumes and env references (``volumes.py``, ``container_env.py``): the objects a pod names are
watched by name (``object_cache.py``); their changes wake the worker (``poke``).

Not provided: ``activeDeadlineSeconds``, ephemeral containers, resource-pressure eviction
(only an emptyDir over its ``sizeLimit`` evicts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from api.errors import StatusError
from client.backoff import Backoff
from services.kubelet.container_probes import start_probes
from services.kubelet.container_start import watch_exit
from services.kubelet.pod_memory import ContainerState, PodMemory, WorkerContext
from services.kubelet.pod_sync import sync_pod
from services.kubelet.pod_termination import ORPHAN_GRACE, terminate
from services.kubelet.restart_backoff import CRASH_BACKOFF, PULL_BACKOFF, SYNC_ERROR_BACKOFF
from services.kubelet.runtime.base import ContainerRecord, PodSandbox

__all__ = [
    "CRASH_BACKOFF",
    "ORPHAN_GRACE",
    "PULL_BACKOFF",
    "PodWorker",
    "WorkerContext",
]

log = logging.getLogger("kubelet.pods")

Obj = dict[str, Any]


class PodWorker:
    def __init__(self, *, pod: Obj, ctx: WorkerContext) -> None:
        self._mem = PodMemory.of(pod, ctx=ctx)
        self.uid: str = self._mem.uid
        self.namespace: str = self._mem.namespace
        self.name: str = self._mem.name
        self.ctx = ctx
        self.task: asyncio.Task[None] | None = None
        self.terminated = asyncio.Event()

    # ---- inputs ----------------------------------------------------------------------------

    def update(self, pod: Obj) -> None:
        if pod["metadata"].get("uid") == self.uid:
            self._mem.pod = pod
            self.ctx.status.observe(pod)
            self._mem.wake.set()

    def poke(self) -> None:
        """Something the pod references changed: sync again."""
        self._mem.wake.set()

    def removed(self) -> None:
        """The pod object is gone from the API."""
        self._mem.gone = True
        self._mem.wake.set()

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(
            self.run(), name=f"pod worker {self.namespace}/{self.name} ({self.ctx.node_name})"
        )
        return self.task

    # ---- what others ask -------------------------------------------------------------------

    @property
    def pod(self) -> Obj:
        return self._mem.pod

    @property
    def sandbox(self) -> PodSandbox:
        return self._mem.sandbox

    def find_instance(self, container: str, *, previous: bool) -> ContainerRecord | None:
        """The instance ``kubectl logs [--previous]`` means: the current one, or the last one
        that terminated before it (which, while waiting to restart, is the current one)."""
        st = self._mem.container(container)
        if st is None:
            return None
        if not previous:
            return st.current
        cur = st.current
        if cur is not None and not cur.running and st.waiting is not None:
            return cur
        return st.previous

    def waiting_reason(self, container: str) -> str | None:
        st = self._mem.container(container)
        if st is None:
            return None
        if st.waiting is not None:
            return st.waiting[0]
        return None if st.current is not None else "ContainerCreating"

    # ---- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        mem = self._mem
        errors = Backoff(SYNC_ERROR_BACKOFF)
        self._adopt()
        try:
            while True:
                mem.wake.clear()
                if mem.gone or (mem.pod.get("metadata") or {}).get("deletionTimestamp"):
                    await terminate(mem)
                    return
                try:
                    deadline = await sync_pod(mem)
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
            for task in mem.exit_watches.values():
                task.cancel()
            for st in mem.all_containers():
                st.stop_probes()
            self.ctx.objects.release(self.uid)
            if self.ctx.tokens is not None:
                self.ctx.tokens.forget(self.uid)
            self.terminated.set()
            self.ctx.on_exit(self.uid)

    async def _sleep_until(self, deadline: float | None) -> None:
        if deadline is None:
            await self._mem.wake.wait()
            return
        timeout = max(0.0, deadline - asyncio.get_running_loop().time())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._mem.wake.wait(), timeout)

    def _adopt(self) -> None:
        """Pick up instances a previous kubelet (or a previous worker) left in the runtime."""
        mem = self._mem
        spec = mem.pod.get("spec") or {}
        init_names = {c["name"] for c in spec.get("initContainers") or []}
        for record in self.ctx.runtime.list_containers(self.uid):
            table = mem.init if record.name in init_names else mem.containers
            st = table.setdefault(record.name, ContainerState(name=record.name))
            st.instances.append(record)
        mem.pod_ip = self.ctx.runtime.pod_ip(self.uid)
        specs = {c["name"]: c for c in (spec.get("containers") or [])}
        for st in mem.all_containers():
            cur = st.current
            if cur is not None and cur.running:
                watch_exit(mem, cur)
                if cur.name in specs:
                    start_probes(mem, st, spec=specs[cur.name], record=cur)
        if mem.pod_ip:
            log.info(
                "pod %s/%s: re-adopted %d container instance(s) at %s",
                self.namespace,
                self.name,
                sum(len(c.instances) for c in mem.all_containers()),
                mem.pod_ip,
            )
