"""Ending a pod on the node: stop its containers, write its final status, confirm the deletion.

Why a module of its own: termination is the one path where the kubelet has the last word on a
pod, and it must hold even when the apiserver is briefly away, as in the kubelet's
``killPod`` + ``status_manager`` deletion:

* every running container gets SIGTERM, SIGKILL after the grace period (``deletionGracePeriod
  Seconds``, else ``terminationGracePeriodSeconds``, else 30 s), each with a Killing event
  "Stopping container X";
* the pod's volume dirs go (a tmpfs emptyDir unmounted first; hostPath and PV data stay) —
  before the deletion is confirmed, as the kubelet waits for a pod's volumes to be reclaimed;
* the final status (Succeeded/Failed) is written, then the pod object is deleted with grace 0
  and a uid precondition — the kubelet's confirmation; both are retried with back-off;
* a pod that vanished from the API without that (force-deleted) is stopped with at most
  ``ORPHAN_GRACE`` and removed;
* the pod's references to ConfigMaps, Secrets and claims are released, and the sandbox is
  removed last.

What it does not guarantee: the final status write is tried five times and the confirmation ten
(then the pod is left to the garbage collector / node lifecycle controller); a 409 on the
confirmation means a new pod took the name, and ours is gone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from api.errors import NotFound, StatusError
from api.registry import REGISTRY, ResourceType
from client.backoff import Backoff
from services.kubelet.pod_memory import PodMemory
from services.kubelet.restart_backoff import SYNC_ERROR_BACKOFF
from services.kubelet.volumes import tear_down
from services.kubelet.worker_status import render_status

__all__ = ["ORPHAN_GRACE", "stop_containers", "terminate"]

log = logging.getLogger("kubelet.pods")

Obj = dict[str, Any]

ORPHAN_GRACE = 2.0
"""Grace for containers of pods that vanished from the API while the kubelet was away."""
FINAL_STATUS_ATTEMPTS = 5
CONFIRM_ATTEMPTS = 10


def _pods() -> ResourceType:
    rt = REGISTRY.get("", "v1", "pods")
    assert rt is not None
    return rt


async def stop_containers(mem: PodMemory, *, grace: float) -> None:
    """SIGTERM every running container of the pod, SIGKILL after ``grace`` seconds."""
    stops = []
    for st in mem.all_containers():
        st.stop_probes()
        cur = st.current
        if cur is not None and cur.running:
            mem.event("Normal", "Killing", f"Stopping container {st.name}")
            stops.append(mem.ctx.runtime.stop_container(cur.container_id, grace_period=grace))
        st.waiting = None
    if stops:
        log.info(
            "pod %s/%s: stopping %d container(s) with a %.0fs grace period",
            mem.namespace,
            mem.name,
            len(stops),
            grace,
        )
        await asyncio.gather(*stops)


async def terminate(mem: PodMemory) -> None:
    """Stop the pod's containers, report and confirm its end, and remove it from the node."""
    grace = mem.grace_period() if not mem.gone else min(mem.grace_period(), ORPHAN_GRACE)
    await stop_containers(mem, grace=grace)
    # like the kubelet's PodResourcesAreReclaimed: volumes go before the deletion is confirmed
    await tear_down(mem.ctx.volumes.root, mem.uid)
    if not mem.gone:
        status = render_status(mem, policy=mem.restart_policy, terminal=True)
        pod = await _write_final(mem, status)
        if pod is not None:
            await _confirm_deletion(mem)
    mem.ctx.status.forget(mem.uid)
    mem.ctx.objects.release(mem.uid)
    await mem.ctx.runtime.remove_pod_sandbox(mem.uid)
    log.info("pod %s/%s: terminated and removed from the node", mem.namespace, mem.name)


async def _write_final(mem: PodMemory, status: Obj) -> Obj | None:
    backoff = Backoff(SYNC_ERROR_BACKOFF)
    for _ in range(FINAL_STATUS_ATTEMPTS):
        try:
            return await mem.ctx.status.write_now(mem.pod, status)
        except (StatusError, ConnectionError) as exc:
            if isinstance(exc, NotFound):
                return None
            delay = backoff.next_delay()
            log.warning(
                "pod %s/%s: final status write failed (%s); will retry in %.1fs",
                mem.namespace,
                mem.name,
                exc,
                delay,
            )
            await asyncio.sleep(delay)
    return mem.pod


async def _confirm_deletion(mem: PodMemory) -> None:
    """The kubelet's last word on a pod: delete it with grace 0 once its containers are gone."""
    backoff = Backoff(SYNC_ERROR_BACKOFF)
    for _ in range(CONFIRM_ATTEMPTS):
        try:
            await mem.ctx.client.delete(
                _pods(),
                mem.name,
                namespace=mem.namespace,
                grace_period_seconds=0,
                preconditions={"uid": mem.uid},
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
                mem.namespace,
                mem.name,
                exc,
                delay,
            )
        await asyncio.sleep(delay)
