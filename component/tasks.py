"""One supervised task group: named tasks that run until the first one ends.

Why: a component's long-lived tasks (reflectors, controllers, node agents, watch caches) are
meant to run until the component stops. When one ends anyway — it crashed, or returned — the
others cannot do their job for long without it, and a component limping on without its
informer is worse than one that stops and is restarted. So every group behaves the same way:

* every task has a name and this group as its owner (``start(name, coro)``; ``adopt(task)``
  for a task someone else created, such as ``Informer.start()``);
* the first task to end is logged loudly at once — its traceback, or "returned; it was meant
  to run until cancelled" — unless it raised ``component.errors.Fatal``, whose one line
  ``component.run`` prints;
* ``wait()`` returns only by raising: once the first task ended it cancels the others (in
  reverse start order) and re-raises that task's exception, or ``TaskEnded``;
* ``cancel()`` (and leaving ``async with``) cancels every task and waits for them; a task's
  own ending during cancellation is not an error. ``retire(task)`` does that for one task
  first, for a stop that must happen in order (stop scheduling, then flush its events).

A group with no tasks waits forever. Tasks added while ``wait()`` waits are supervised too.

Not here: restarting tasks (a supervisor restarts the *process*), or cancelling the caller:
``wait()`` raises in the caller's task, which decides what the ending means.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, NoReturn

from component.errors import Fatal, TaskEnded

__all__ = ["TaskGroup", "ended_error"]

log = logging.getLogger("kubelite.component")


class TaskGroup:
    """``TaskGroup(owner)``: ``start``/``adopt`` tasks, then ``await wait()`` (see module)."""

    def __init__(self, owner: str, *, logger: logging.Logger | None = None) -> None:
        self.owner = owner
        self._log = logger or log
        self._tasks: list[asyncio.Task[Any]] = []
        self._first: asyncio.Future[asyncio.Task[Any]] | None = None
        self._closing = False
        self._retired: set[asyncio.Task[Any]] = set()

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        return list(self._tasks)

    def start(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a task named ``name``, owned by this group."""
        return self.adopt(asyncio.create_task(coro, name=name))

    def adopt(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Supervise ``task`` (already created, and named, by someone else)."""
        if self._closing:
            task.cancel()
        self._tasks.append(task)
        task.add_done_callback(self._ended)
        return task

    def _future(self) -> asyncio.Future[asyncio.Task[Any]]:
        if self._first is None:
            self._first = asyncio.get_running_loop().create_future()
        return self._first

    def _ended(self, task: asyncio.Task[Any]) -> None:
        if self._closing or task in self._retired:
            return
        first = self._future()
        if first.done():
            return  # a consequence of the first ending, which was reported
        name = task.get_name()
        if task.cancelled():
            self._log.error("%s: task %s was cancelled; stopping the others", self.owner, name)
        elif (exc := task.exception()) is None:
            self._log.error(
                "%s: task %s returned; it was meant to run until cancelled; stopping the others",
                self.owner, name,
            )  # fmt: skip
        elif not isinstance(exc, Fatal):
            self._log.error(
                "%s: task %s failed; stopping the others", self.owner, name, exc_info=exc
            )
        first.set_result(task)

    async def first_ended(self) -> asyncio.Task[Any]:
        """Wait until a task ends (without cancelling anything); that task."""
        return await asyncio.shield(self._future())

    async def wait(self) -> NoReturn:
        """Until the first task ends; then cancel the others and raise what ended it."""
        task = await self.first_ended()
        await self.cancel()
        raise ended_error(task, owner=self.owner)

    async def retire(self, task: asyncio.Task[Any]) -> None:
        """Cancel one task and wait for it, as the first step of an orderly stop (its ending
        is not an error); the others keep running."""
        self._retired.add(task)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def cancel(self) -> None:
        """Cancel every task (newest first) and wait until all have ended."""
        self._closing = True
        tasks = list(reversed(self._tasks))
        for task in tasks:
            task.cancel()
        # gather, not a loop of awaits: cancelling the caller meanwhile is never swallowed
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> TaskGroup:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.cancel()


def ended_error(task: asyncio.Task[Any], *, owner: str) -> BaseException:
    """The exception that says why ``task`` ended: its own, or a ``TaskEnded``."""
    if task.cancelled():
        return TaskEnded(f"{owner}: task {task.get_name()} was cancelled")
    exc = task.exception()
    if exc is not None:
        return exc
    return TaskEnded(f"{owner}: task {task.get_name()} returned")
