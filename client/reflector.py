"""The reflector: keeps a local view of one resource in step with the apiserver, forever.

Why: list-watch is how every component stays in sync yet decoupled. Getting it right takes care
— where to resume, when a relist is needed, how not to stampede a restarting apiserver — so it
is done once, here, following client-go's ``tools/cache/reflector.go``:

1. **List** at a resourceVersion chosen like client-go's ``relistResourceVersion``: ``"0"`` the
   first time (any cached state will do, the server may serve it from its watch cache), the last
   synced RV afterwards (state no older than what we already saw), ``""`` (a consistent read of
   the newest state) after the server said that RV is gone (410 ``Expired``, or 504 "Too large
   resource version" from a server that lost its history). The whole list goes to
   ``sink.replace(items, rv)``: the sink diffs it against what it holds, so an object deleted
   while we were away surfaces as a DELETED.
2. **Watch** from the list's RV with ``allowWatchBookmarks=true`` and ``timeoutSeconds`` drawn
   from [min, 2*min) (300 s by default) so a fleet of clients does not re-watch in lock-step.
   Each event goes to ``sink.apply(event)`` and advances the RV; a BOOKMARK only advances it.
3. When the watch **ends normally** (server timeout), re-watch at once from the last RV.
   When the server answers that the RV is *ahead* of it (504 "Too large resource version": it
   lost its history, e.g. a restarted memory store), relist the newest state (RV ``""``).
   When it **breaks** (connection dropped or refused, 429, 500, 503, 504), back off
   (0.8 s doubling to 30 s, jittered, reset after 2 min without failures) and re-watch from the
   last RV *without* relisting: the server replays what we missed. When the server says the RV
   is **too old** (410), relist at once. Any other error: back off, then relist.

Every failure is logged with what happens next ("will re-watch from RV 1234 in 1.6s").

Limits: one resource type and one selector per reflector; no list pagination (one list call);
the sink is called synchronously from the reflector's task and must not block. Cancelling
``run()`` stops it (cleanly closing the watch connection).
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from api.errors import (
    Expired,
    InternalError,
    ServiceUnavailable,
    StatusError,
    Timeout,
    TooManyRequests,
)
from api.registry import ResourceType
from client.backoff import Backoff, BackoffPolicy
from client.rest import ApiClient
from client.watch import WatchEvent

__all__ = ["Reflector", "ReflectorOptions", "ReflectorSink"]

log = logging.getLogger(__name__)

_TRANSIENT: tuple[type[BaseException], ...] = (
    ConnectionError,
    TooManyRequests,
    ServiceUnavailable,
    Timeout,
    InternalError,
)


class ReflectorSink(Protocol):
    """Where a reflector delivers what it learns (the informer)."""

    def replace(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        """The complete current set, from a list; the sink diffs it against what it holds."""

    def apply(self, event: WatchEvent) -> None:
        """One ADDED / MODIFIED / DELETED event, in order."""


@dataclass(frozen=True, slots=True)
class ReflectorOptions:
    min_watch_timeout: float = 300.0
    """Each watch asks the server for ``timeoutSeconds`` in [min, 2*min) (client-go: 5 min)."""
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    """Retry delays for failed lists and watches (client-go's reflector numbers by default)."""


def _too_large_resource_version(exc: StatusError) -> bool:
    """The server is behind the RV we asked for (it lost history, e.g. a fresh memory store)."""
    if not isinstance(exc, Timeout):
        return False
    if any(c.get("reason") == "ResourceVersionTooLarge" for c in exc.causes):
        return True
    return "too large resource version" in exc.message.lower()


class Reflector:
    def __init__(
        self,
        client: ApiClient,
        rt: ResourceType,
        *,
        sink: ReflectorSink,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        options: ReflectorOptions | None = None,
        name: str | None = None,
    ) -> None:
        self.client = client
        self.rt = rt
        self.sink = sink
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.options = options or ReflectorOptions()
        self.name = name or _describe(rt, namespace, label_selector, field_selector)
        self._backoff = Backoff(self.options.backoff)
        self._rv = ""
        self._rv_unavailable = False
        self.lists = 0
        """How many lists succeeded (1 + relists): for tests and metrics."""
        self.watches = 0
        """How many watches were opened."""

    @property
    def last_sync_resource_version(self) -> str:
        return self._rv

    def _relist_resource_version(self) -> str:
        if self._rv_unavailable:
            return ""
        return self._rv or "0"

    async def run(self) -> None:
        """List, then watch, forever; returns only by cancellation."""
        while True:
            await self._list()
            await self._watch_until_relist()

    # -- list -----------------------------------------------------------------------------

    async def _list(self) -> None:
        while True:
            rv = self._relist_resource_version()
            try:
                body = await self.client.list(
                    self.rt,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    resource_version=rv,
                )
            except (Expired, Timeout) as exc:
                if rv != "" and (isinstance(exc, Expired) or _too_large_resource_version(exc)):
                    self._rv_unavailable = True
                    log.info(
                        "list %s at resourceVersion %s: %s; will relist the newest state now",
                        self.name, rv, exc.message,
                    )  # fmt: skip
                    continue
                await self._back_off(f"list {self.name} failed: {exc!r}", "relist")
                continue
            except (ConnectionError, StatusError, ValueError) as exc:
                await self._back_off(f"list {self.name} failed: {exc!r}", "relist")
                continue
            items: list[dict[str, Any]] = body.get("items") or []
            for item in items:  # list items carry no kind/apiVersion on the wire; watch ones do
                item.setdefault("kind", self.rt.kind)
                item.setdefault("apiVersion", self.rt.api_version)
            list_rv = str((body.get("metadata") or {}).get("resourceVersion") or "")
            self._rv_unavailable = False
            self._rv = list_rv
            self.lists += 1
            log.debug("listed %d %s at resourceVersion %s", len(items), self.name, list_rv)
            self.sink.replace(items, list_rv)
            return

    # -- watch ----------------------------------------------------------------------------

    async def _watch_until_relist(self) -> None:
        loop = asyncio.get_running_loop()
        lo = self.options.min_watch_timeout
        while True:
            timeout = max(1, int(random.uniform(lo, 2 * lo)))
            started = loop.time()
            received = 0
            try:
                self.watches += 1
                async with self.client.watch(
                    self.rt,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    resource_version=self._rv,
                    timeout_seconds=timeout,
                    allow_bookmarks=True,
                ) as stream:
                    async for event in stream:
                        received += 1
                        if event.type != "BOOKMARK":
                            self.sink.apply(event)
                        rv = event.resource_version
                        if rv:
                            self._rv = rv
            except Expired as exc:
                log.info(
                    "watch %s from resourceVersion %s: %s; will relist now",
                    self.name, self._rv, exc.message,
                )  # fmt: skip
                return
            except Timeout as exc:
                if _too_large_resource_version(exc):
                    # The server is behind our resourceVersion (it lost its history): relist.
                    self._rv_unavailable = True
                    log.warning(
                        "watch %s from resourceVersion %s: %s; will relist the newest state now",
                        self.name, self._rv, exc.message,
                    )  # fmt: skip
                    return
                await self._back_off(
                    f"watch {self.name} failed: {exc!r}",
                    f"re-watch from resourceVersion {self._rv}",
                )
                continue
            except _TRANSIENT as exc:
                await self._back_off(
                    f"watch {self.name} failed: {exc!r}",
                    f"re-watch from resourceVersion {self._rv}",
                )
                continue
            except (StatusError, ValueError) as exc:
                await self._back_off(f"watch {self.name} failed: {exc!r}", "relist")
                return
            if received == 0 and loop.time() - started < 1.0:
                # client-go's "very short watch": the server closes at once; do not spin on it.
                await self._back_off(
                    f"watch {self.name} closed at once with no events",
                    f"re-watch from resourceVersion {self._rv}",
                )
                continue
            log.debug("watch %s ended after %d events; re-watching", self.name, received)

    async def _back_off(self, what: str, then: str) -> None:
        delay = self._backoff.next_delay()
        log.warning("%s; will %s in %.1fs", what, then, delay)
        await asyncio.sleep(delay)


def _describe(
    rt: ResourceType, namespace: str | None, label_selector: str | None, field_selector: str | None
) -> str:
    parts = [rt.plural if not rt.group else f"{rt.plural}.{rt.group}"]
    if namespace:
        parts.append(f"in {namespace}")
    if label_selector:
        parts.append(f"labels {label_selector}")
    if field_selector:
        parts.append(f"fields {field_selector}")
    return " ".join(parts)
