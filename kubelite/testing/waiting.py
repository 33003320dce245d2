"""Awaiting a state of the cluster in a test: re-checked on every watch event, never on a timer.

Why: a test that sleeps, or polls the API, passes or fails with the machine's speed. Here a
condition is evaluated once now and again after every event an informer delivers, so the
test goes on the moment the state is reached, however fast or slow the machine is.

* ``Changes(*informers)``: set by every add/update/delete of the informers it follows;
  ``await changes.until(condition, what=...)`` returns once ``condition()`` holds.
* ``Watcher(client, rt, ...)``: one resource seen through an informer of its own (``async
  with``); ``await watcher.wait_until(predicate, what=...)`` awaits ``predicate(objects)``;
  ``on_event`` callbacks see every change, for invariants that must hold at every observed
  moment.
* ``poll_until`` (``apoll_until`` for a condition that is a coroutine): the one polling
  helper, for what has no watch to await (an external tool's answer, a port nothing announces,
  a compactor's interval); its deadline is generous.

``within`` is only a safety net: it fails the test with what was awaited (and, where given,
``describe()`` of what was seen); it never decides a result. Nothing here guarantees the
condition still holds after ``until`` returns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from api.registry import ResourceType
from client.informer import Informer
from client.rest import ApiClient

__all__ = ["POLL_EVERY", "WITHIN", "Changes", "Watcher", "apoll_until", "poll_until"]

T = TypeVar("T")
Obj = dict[str, Any]

WITHIN = 60.0
"""Seconds before a wait gives up (generous: two shared cores, several suites at once)."""
POLL_EVERY = 0.2
"""Seconds between two asks of ``poll_until``: each ask is one cheap loopback probe, and a
test waits on average half of this after the state is reached."""


class Changes:
    """Wakes ``until`` after every event of the informers it follows."""

    def __init__(self, *informers: Informer, describe: Callable[[], str] | None = None) -> None:
        self._changed = asyncio.Event()
        self._describe = describe
        for informer in informers:
            self.follow(informer)

    def follow(self, informer: Informer) -> None:
        informer.add_handler(
            on_add=lambda _o: self.notify(),
            on_update=lambda _o, _n: self.notify(),
            on_delete=lambda _o: self.notify(),
        )

    def notify(self) -> None:
        """Re-check the awaited conditions (informer handlers call this)."""
        self._changed.set()

    async def until(
        self, condition: Callable[[], bool], *, what: str, within: float = WITHIN
    ) -> None:
        """Return once ``condition()`` holds, checked now and after every event."""
        try:
            async with asyncio.timeout(within):
                while True:
                    self._changed.clear()
                    if condition():
                        return
                    await self._changed.wait()
        except TimeoutError:
            seen = f"\n{self._describe()}" if self._describe is not None else ""
            raise AssertionError(f"timed out after {within}s waiting for {what}{seen}") from None


class Watcher:
    """Informer-backed view of one resource in the test process (``async with``)."""

    def __init__(
        self,
        client: ApiClient,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        on_event: Callable[[str, Obj], None] | None = None,
    ) -> None:
        self.informer = Informer(
            client, rt, namespace=namespace, label_selector=label_selector,
            field_selector=field_selector, name=f"test {rt.plural}",
        )  # fmt: skip
        self.changes = Changes()
        self.on_event = on_event
        self._task: asyncio.Task[None] | None = None
        self.informer.add_handler(
            on_add=lambda o: self._event("ADDED", o),
            on_update=lambda _old, o: self._event("MODIFIED", o),
            on_delete=lambda o: self._event("DELETED", o),
        )

    def _event(self, type_: str, obj: Obj) -> None:
        if self.on_event is not None:
            self.on_event(type_, obj)
        self.changes.notify()

    async def __aenter__(self) -> Watcher:
        self._task = self.informer.start()
        await asyncio.wait_for(self.informer.wait_synced(), WITHIN)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def objects(self) -> list[Obj]:
        return self.informer.list()

    def get(self, key: str) -> Obj | None:
        return self.informer.get(key)

    async def wait_until(
        self, predicate: Callable[[list[Obj]], bool], *, what: str, within: float = WITHIN
    ) -> list[Obj]:
        """Await ``predicate(objects)``; the objects it held for."""
        seen: list[list[Obj]] = []

        def holds() -> bool:
            objects = self.informer.list()
            seen[:] = [objects]
            return predicate(objects)

        await self.changes.until(holds, what=what, within=within)
        return seen[0]


def poll_until(
    condition: Callable[[], T],
    *,
    what: str,
    within: float = 2 * WITHIN,
    every: float = POLL_EVERY,
    describe: Callable[[], str] | None = None,
) -> T:
    """Ask ``condition()`` every ``every`` seconds until it is truthy; its value. Only for
    what has no watch to await (an external tool's answer)."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"\n{describe()}" if describe is not None else ""
            raise AssertionError(f"timed out after {within}s waiting for {what}{seen}")
        time.sleep(every)  # the polled thing offers nothing to await


async def apoll_until(
    condition: Callable[[], Awaitable[T]],
    *,
    what: str,
    within: float = 2 * WITHIN,
    every: float = POLL_EVERY,
    describe: Callable[[], str] | None = None,
) -> T:
    """``poll_until`` for a condition that is awaited (an HTTP probe, say); its value."""
    deadline = time.monotonic() + within
    while True:
        value = await condition()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"\n{describe()}" if describe is not None else ""
            raise AssertionError(f"timed out after {within}s waiting for {what}{seen}")
        await asyncio.sleep(every)  # the polled thing offers nothing to await
