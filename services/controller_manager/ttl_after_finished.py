"""The TTL-after-finished controller: deletes a finished Job ``ttlSecondsAfterFinished`` later.

Why: Jobs and their pods stay after they finish so people can read their status and logs;
``spec.ttlSecondsAfterFinished`` says how long. Kubernetes' ``ttlafterfinished`` controller,
followed here:

* a Job needs cleaning up when the field is set and it has a ``Complete`` or ``Failed``
  condition (True); it expires at that condition's ``lastTransitionTime`` + the TTL;
* before it expires the key is requeued for exactly the time left (on the injectable
  ``Clock``, so tests move time instead of waiting);
* once expired the Job is read again from the apiserver (the cache may be stale, and the user
  may have changed or removed the TTL meanwhile), checked again, and deleted with
  ``propagationPolicy: Foreground`` and a ``resourceVersion`` precondition — so its pods are
  deleted before it is gone, and a Job changed after the fresh read is not deleted (the
  Conflict makes the key retry and re-read).

Limits: only Jobs (Kubernetes' controller handles only Jobs too); no events, as Kubernetes
records none (it logs "Cleaning up Job").
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from api.errors import NotFound
from api.meta import parse_time
from client.cache import object_key, split_key
from client.controller import Controller
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.clock import Clock, SystemClock
from services.controller_manager.informers import SharedInformers
from services.controller_manager.job_tracking import JOBS

__all__ = ["TTLAfterFinishedController", "expires_in"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def _finish_time(job: Obj) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            stamp = cond.get("lastTransitionTime")
            return str(stamp) if stamp else None
    return None


def expires_in(job: Obj, clock: Clock) -> float | None:
    """Seconds until the Job may be deleted (<= 0: now); None when it never will be (yet)."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    finished = _finish_time(job)
    if ttl is None or finished is None or (job.get("metadata") or {}).get("deletionTimestamp"):
        return None
    expire_at = parse_time(finished) + timedelta(seconds=int(ttl))
    return (expire_at - clock.now()) / timedelta(seconds=1)


class TTLAfterFinishedController:
    """``await run()`` until cancelled."""

    name = "ttl-after-finished"

    def __init__(
        self,
        *,
        client: ApiClient,
        informers: SharedInformers,
        workers: int = 5,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.workers = workers
        self.clock = clock or SystemClock()
        self.jobs = informers.get(JOBS)
        self.queue: WorkQueue[str] = WorkQueue(name="ttl-after-finished")
        self.jobs.add_handler(on_add=self._enqueue, on_update=lambda _old, new: self._enqueue(new))

    async def run(self) -> None:
        await Controller(
            name="ttl-after-finished",
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.jobs],
        ).run()

    def _enqueue(self, job: Obj) -> None:
        if expires_in(job, self.clock) is not None:
            self.queue.add(object_key(job))

    async def sync(self, key: str) -> None:
        job = self.jobs.get(key)
        if job is None:
            return
        left = expires_in(job, self.clock)
        if left is None:
            return
        if left > 0:
            self.clock.call_later(left, lambda: self.queue.add(key))
            return
        namespace, name = split_key(key)
        try:
            fresh = await self.client.get(JOBS, name, namespace=namespace)
        except NotFound:
            return
        left = expires_in(fresh, self.clock)
        if left is None:
            return
        if left > 0:
            self.clock.call_later(left, lambda: self.queue.add(key))
            return
        log.info("cleaning up Job %s: finished more than ttlSecondsAfterFinished ago", key)
        try:
            await self.client.delete(
                JOBS,
                name,
                namespace=namespace,
                propagation_policy="Foreground",
                preconditions={"resourceVersion": fresh["metadata"]["resourceVersion"]},
            )
        except NotFound:
            return
