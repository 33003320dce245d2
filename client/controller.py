"""Run N workers over a reconcile function with the work-queue contract kept for you.

Why: every controller (replication, scheduler queue consumers, the kubelet's pod sync) has the
same loop, and the same three ways to get it subtly wrong — forgetting ``done`` on an exception,
retrying without backoff, or clearing the backoff on failure. ``Controller`` owns that loop:

* wait until the given informers have synced (never reconcile from a half-filled cache);
* start ``workers`` named tasks; each takes a key, awaits ``reconcile(key)``, then
  - on success: ``forget(key)`` (clear its backoff); if ``reconcile`` returned a number,
    requeue the key after that many seconds (a "check again later", e.g. a toleration period);
  - on an exception: log it with the delay and ``add_rate_limited(key)`` (retry with backoff);
  - always ``done(key)``, so a key dirtied meanwhile is processed again;
* on cancellation of ``run()``: shut the queue down, let in-flight reconciles finish (they are
  not cancelled mid-write), and return once every worker has exited.

``run_controllers(name, queues, wait_for=...)`` runs one ``Controller`` per (queue, reconcile)
under one task group, for a controller that keys two kinds apart (claims and volumes) and stops
as one.

It does not drop keys after N failures (client-go controllers sometimes do): reconciles are
level-triggered and the per-key delay is capped (1000 s by default), so a key that keeps failing
keeps being retried slowly. Reconcile must not block the loop (no sync I/O).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, Protocol, TypeVar

from client.workqueue import ShutDown, WorkQueue
from component.tasks import TaskGroup

__all__ = ["Controller", "Reconcile", "Syncable", "run_controllers"]

K = TypeVar("K", bound=Hashable)

log = logging.getLogger(__name__)

Reconcile = Callable[[K], Awaitable[float | None]]
"""``async def reconcile(key) -> None | seconds``: converge one key; a number requeues it later."""


class Syncable(Protocol):
    async def wait_synced(self) -> None: ...


class Controller(Generic[K]):
    def __init__(
        self,
        *,
        name: str,
        queue: WorkQueue[K],
        reconcile: Callable[[K], Awaitable[float | None]],
        workers: int = 1,
        wait_for: Sequence[Syncable] = (),
    ) -> None:
        if workers < 1:
            raise ValueError("a controller needs at least one worker")
        self.name = name
        self.queue = queue
        self.reconcile = reconcile
        self.workers = workers
        self.wait_for = tuple(wait_for)

    async def run(self) -> None:
        """Wait for caches, run the workers until cancelled; then drain and return."""
        for informer in self.wait_for:
            await informer.wait_synced()
        log.info("%s: caches synced; starting %d worker(s)", self.name, self.workers)
        tasks = [
            asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
            for i in range(self.workers)
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            # Cancelled (or a worker crashed): stop taking keys, let in-flight reconciles end.
            self.queue.shut_down()
            await asyncio.wait(tasks)
            for task in tasks:
                if not task.cancelled() and task.exception() is not None:
                    log.error(
                        "%s: worker %s crashed",
                        self.name,
                        task.get_name(),
                        exc_info=task.exception(),
                    )
            log.info("%s: workers stopped", self.name)

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            # Shielded: cancelling run() lets the reconcile in flight finish its writes first.
            inner = asyncio.ensure_future(self._process(key))
            try:
                await asyncio.shield(inner)
            except asyncio.CancelledError:
                await inner
                raise

    async def _process(self, key: K) -> None:
        try:
            requeue_after = await self.reconcile(key)
        except Exception as exc:
            delay_hint = self.queue.num_requeues(key)
            self.queue.add_rate_limited(key)
            log.warning(
                "%s: reconcile %s failed (%s: %s); will retry with backoff (attempt %d)",
                self.name,
                key,
                type(exc).__name__,
                exc,
                delay_hint + 1,
            )
        else:
            self.queue.forget(key)
            if requeue_after is not None:
                self.queue.add_after(key, requeue_after)
        finally:
            self.queue.done(key)


async def run_controllers(
    name: str,
    queues: Sequence[tuple[WorkQueue[K], Reconcile[K]]],
    *,
    wait_for: Sequence[Syncable] = (),
    logger: logging.Logger | None = None,
) -> None:
    """Run a ``Controller`` per (queue, reconcile), named ``"<name> <queue name>"``, in one task
    group owned by ``name``, until cancelled or one of them ends (the group logs it)."""
    async with TaskGroup(name, logger=logger or log) as tasks:
        for queue, reconcile in queues:
            controller = Controller(
                name=f"{name} {queue.name}", queue=queue, reconcile=reconcile, wait_for=wait_for
            )
            tasks.start(f"{name} {queue.name}", controller.run())
        await tasks.wait()
