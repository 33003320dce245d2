"""One sync of a pod: bring its containers one step closer to the spec.

Why a module of its own: a sync is the level-triggered heart of a pod worker (the kubelet's
``SyncPod``): it looks at the newest pod object, at the container instances and at the clock,
does what is due now, and says when it wants to look again. Keeping it apart from the worker's
loop, from container starts and from termination keeps each rule findable:

* the sandbox (pod IP) first; then the objects the pod references (ConfigMaps, Secrets, PVCs
  and their PVs, through the node's ``ObjectCache``, whose watches wake the pod when they
  change); then its volumes (``volumes.py``): until every volume was set up once the pod stays
  Pending with its containers ``ContainerCreating``, each failure a FailedMount warning, retried
  with back-off and at once when a referenced object changes; every later sync sets them up
  again, which is how a changed ConfigMap reaches a running pod's files — and a renewed
  service-account token: the sync is due again when a token is;
* an emptyDir over its ``sizeLimit`` evicts the pod (measured every ``EVICTION_INTERVAL``):
  event Evicted, containers killed, phase Failed with reason ``Evicted``; it never runs again;
* then init containers one by one, each to exit 0 (restarting on failure unless
  ``restartPolicy: Never``), then the app containers;
* **exits** follow ``restartPolicy``: Always restarts, OnFailure restarts non-zero exits, Never
  does not. The first restart is immediate, later ones wait (``CrashLoopBackOff``, event
  BackOff, ``restart_backoff.CRASH_BACKOFF``);
* a running container whose definition changed — its image, the one container field a pod
  update may change — is stopped (Killing "Container X definition changed, will be restarted")
  and started anew; a change of the values its env reads from ConfigMaps and Secrets is not
  one, before or after a kubelet restart; one a liveness or startup probe failed is stopped and
  restarted by its policy;
* a pod that reached Succeeded/Failed under a policy other than Always never runs again.

What it does not guarantee: one step per sync — the caller syncs again when woken or at the
returned deadline; ``activeDeadlineSeconds`` and ephemeral containers are not handled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from api.meta import now_time
from client.backoff import Backoff
from services.kubelet.container_env import Objects
from services.kubelet.container_start import start_container
from services.kubelet.object_cache import ObjectRef
from services.kubelet.pod_memory import ContainerState, PodMemory
from services.kubelet.pod_termination import stop_containers
from services.kubelet.restart_backoff import CRASH_BACKOFF, go_duration
from services.kubelet.runtime.base import ContainerRecord
from services.kubelet.volumes import emptydir_over_limit, pod_references, pv_references, set_up
from services.kubelet.worker_status import publish_status

__all__ = ["EVICTION_INTERVAL", "sync_pod"]

EVICTION_INTERVAL = 10.0
"""How often emptyDir usage is measured against ``sizeLimit`` (the kubelet's eviction manager
monitors every 10 s)."""


async def sync_pod(mem: PodMemory) -> float | None:
    """One pass; returns the loop time at which a back-off ends (None: wait for news)."""
    pod = mem.pod
    spec = pod.get("spec") or {}
    policy = spec.get("restartPolicy") or "Always"
    deadlines: list[float] = []
    if mem.start_time is None:
        mem.start_time = (pod.get("status") or {}).get("startTime")
    mem.pod_ip = await mem.ctx.runtime.run_pod_sandbox(mem.sandbox)
    if mem.start_time is None:
        mem.start_time = now_time()

    terminal = _phase_is_terminal(mem, policy=policy)
    if not terminal and not any(st.instances for st in mem.containers.values()):
        # first sight: say Pending/ContainerCreating now; if the start is quick the status
        # manager coalesces this with the Running status that follows
        publish_status(mem, policy=policy)
    if not terminal:
        mem.objects = await _read_objects(mem)
        mounted = await _set_up_volumes(mem, deadlines=deadlines)
        if mem.volumes_ready and not await _evicted(mem, deadlines):
            await _sync_containers(mem, spec, policy=policy, deadlines=deadlines)
        if mounted and not _waits_for_references(mem):
            mem.reference_backoff = None
    publish_status(mem, policy=policy)
    return min(deadlines) if deadlines else None


async def _read_objects(mem: PodMemory) -> Objects:
    """The objects the pod references, from the node's cache (its watches now wake the pod)."""
    objects: dict[ObjectRef, dict[str, Any] | None] = {}
    for refs in (pod_references(mem.pod), None):
        for ref in sorted(refs if refs is not None else pv_references(objects)):
            objects[ref] = await mem.ctx.objects.get(ref, pod=mem.uid)
    return objects


async def _set_up_volumes(mem: PodMemory, *, deadlines: list[float]) -> bool:
    """Set up the pod's volumes, each failure a FailedMount warning; True when all are.
    A token due for renewal sets a deadline: the sync then writes its successor."""
    tokens = mem.ctx.tokens
    ready, failures = await set_up(
        mem.pod, host=mem.ctx.volumes, objects=mem.objects, tokens=tokens
    )
    renew_in = tokens.renew_in(mem.uid) if tokens is not None else None
    if renew_in is not None:
        deadlines.append(asyncio.get_running_loop().time() + renew_in)
    mem.volumes.update(ready)
    for message in failures:
        mem.event("Warning", "FailedMount", message)
    if failures:
        deadlines.append(mem.retry_references_at())
        return False
    mem.volumes_ready = True
    return True


async def _evicted(mem: PodMemory, deadlines: list[float]) -> bool:
    """Evict the pod when an emptyDir exceeds its ``sizeLimit``; True once evicted."""
    spec = mem.pod.get("spec") or {}
    if not any((v.get("emptyDir") or {}).get("sizeLimit") for v in spec.get("volumes") or ()):
        return False
    message = emptydir_over_limit(mem.pod, mem.volumes)
    if message is None:
        deadlines.append(asyncio.get_running_loop().time() + EVICTION_INTERVAL)
        return False
    mem.evicted = message
    mem.event("Warning", "Evicted", message)
    await stop_containers(mem, grace=0.0)
    return True


def _waits_for_references(mem: PodMemory) -> bool:
    return any(
        st.waiting is not None and st.waiting[0] == "CreateContainerConfigError"
        for st in mem.all_containers()
    )


async def _sync_containers(
    mem: PodMemory, spec: Mapping[str, Any], *, policy: str, deadlines: list[float]
) -> None:
    """The first unfinished init container, or (all init containers done) every app one."""
    for c in spec.get("initContainers") or []:
        st = mem.init.setdefault(c["name"], ContainerState(name=c["name"]))
        cur = st.current
        if cur is not None and not cur.running and cur.exit_code == 0:
            continue
        # init containers restart on failure unless the policy is Never
        init_policy = "Never" if policy == "Never" else "OnFailure"
        await _converge(mem, st, spec=c, policy=init_policy, deadlines=deadlines)
        for app in spec.get("containers") or []:
            waiting = mem.containers.setdefault(app["name"], ContainerState(name=app["name"]))
            waiting.waiting = ("PodInitializing", None)
        return
    for c in spec.get("containers") or []:
        st = mem.containers.setdefault(c["name"], ContainerState(name=c["name"]))
        await _converge(mem, st, spec=c, policy=policy, deadlines=deadlines)


def _phase_is_terminal(mem: PodMemory, *, policy: str) -> bool:
    """A pod that reached Succeeded/Failed never runs again; nor does an evicted one."""
    if mem.evicted is not None:
        return True
    phase = (mem.ctx.status.status_of(mem.uid) or (mem.pod.get("status") or {})).get("phase")
    return phase in ("Succeeded", "Failed") and policy != "Always"


async def _converge(
    mem: PodMemory,
    st: ContainerState,
    *,
    spec: Mapping[str, Any],
    policy: str,
    deadlines: list[float],
) -> None:
    cur = st.current
    changed = cur is not None and _definition_changed(cur, spec=spec)
    if cur is not None and cur.running:
        await _converge_running(mem, st, cur, spec=spec, changed=changed, deadlines=deadlines)
    elif cur is not None:
        await _restart_exited(
            mem, st, cur, spec=spec, policy=policy, changed=changed, deadlines=deadlines
        )
    else:
        await start_container(mem, st, spec=spec, attempt=0, deadlines=deadlines)


def _definition_changed(cur: ContainerRecord, *, spec: Mapping[str, Any]) -> bool:
    """Whether ``cur`` runs an older definition of the container than ``spec``.

    The image is the one field of a pod's container the apiserver lets change, so it is the
    definition; the env its ConfigMaps and Secrets resolve to is not (a running container never
    sees those change), nor is the runtime's hash of a config, which holds resolved values."""
    return cur.image != (spec.get("image") or "")


async def _converge_running(
    mem: PodMemory,
    st: ContainerState,
    cur: ContainerRecord,
    *,
    spec: Mapping[str, Any],
    changed: bool,
    deadlines: list[float],
) -> None:
    """Restart a running instance a probe failed, or whose definition changed."""
    if st.probe_kill is not None:
        mem.event("Normal", "Killing", st.probe_kill)
        st.probe_kill = None
        st.stop_probes()
        await mem.ctx.runtime.stop_container(cur.container_id, grace_period=mem.grace_period())
        mem.wake.set()  # the next sync restarts it by the restart policy
        return
    if changed:
        mem.event("Normal", "Killing", f"Container {st.name} definition changed, will be restarted")
        await mem.ctx.runtime.stop_container(cur.container_id, grace_period=mem.grace_period())
        await start_container(mem, st, spec=spec, attempt=cur.attempt + 1, deadlines=deadlines)


async def _restart_exited(
    mem: PodMemory,
    st: ContainerState,
    cur: ContainerRecord,
    *,
    spec: Mapping[str, Any],
    policy: str,
    changed: bool,
    deadlines: list[float],
) -> None:
    """Restart an exited instance by the restart policy, after its crash-loop back-off."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    restart = policy == "Always" or (policy == "OnFailure" and cur.exit_code != 0)
    if not restart and not (changed and policy != "Never"):
        st.waiting = None
        return
    if now < st.restart_not_before and not changed:
        _crash_loop_back_off(mem, st, cur)
        deadlines.append(st.restart_not_before)
        return
    if st.crash_backoff is None:
        st.crash_backoff = Backoff(CRASH_BACKOFF)
    await start_container(mem, st, spec=spec, attempt=cur.attempt + 1, deadlines=deadlines)
    if st.current is not cur:
        st.restart_delay = st.crash_backoff.next_delay()
        st.restart_not_before = loop.time() + st.restart_delay


def _crash_loop_back_off(mem: PodMemory, st: ContainerState, cur: ContainerRecord) -> None:
    """Say ``CrashLoopBackOff``; announce it with a BackOff event once per exited instance."""
    st.waiting = (
        "CrashLoopBackOff",
        f"back-off {go_duration(st.restart_delay)} restarting failed container={st.name} "
        f"pod={mem.name}_{mem.namespace}({mem.uid})",
    )
    if st.backoff_reported_for != cur.container_id:
        st.backoff_reported_for = cur.container_id
        mem.event(
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {st.name} in pod "
            f"{mem.name}_{mem.namespace}({mem.uid})",
        )
