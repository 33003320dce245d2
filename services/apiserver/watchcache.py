"""The watch cache: one store watch per resource, a ring of recent events, fan-out to watchers.

Why: every component watches the apiserver, and a thousand kubelets watching pods must not mean
a thousand store watches each decoding every pod write. Kubernetes' *cacher* solves this and so
does this module: one store watch per resource feeds an in-memory cache that keeps

* the **current state** (key -> latest event), which serves ``resourceVersion=0`` lists and the
  synthetic ADDED events a watch starts with;
* a **ring buffer** of the last ``capacity`` events, so a watch resuming from a recent
  resourceVersion is replayed from memory;
* the **watchers**, each with its own predicate and a bounded queue. Each event is decoded and
  serialised once as it arrives, and only offered to the watchers that can match it: a watcher
  with an exact ``spec.nodeName=X`` (or ``metadata.name``, or namespace) requirement is filed
  under that value, so a pod event touches only the watchers of its old and new node (and the
  unfiltered ones), as Kubernetes' cacher does with its indexed triggers. A watcher's share of
  an event is a selector test on precomputed fields and the event's shared ``Delivery``; the
  frame bytes (``CacheEvent.chunk``) are made once per event, not per watcher.

Objects are kept compact (``CompactObject``): the JSON they are served as plus the fields
selectors and indexes read — a dict is decoded only for a consumer that asks for one
(``CacheEvent.obj``). An event's frames are kept while it is among the last ``RECENT_FRAMES``
events (the ones live watchers send); older ones make them again if a resuming watch needs them.

A watcher whose queue fills up (a client that cannot keep up) is closed, not waited for: its
client re-watches from the last resourceVersion it saw. A watch from before the ring's window is
fed by its own store watch (``StoreFeed``) instead, which fails with 410 ``Expired`` once the
store has compacted that history away.

On start the cache loads the current state; a client resuming after an apiserver restart from
a resourceVersion older than that is served by a ``StoreFeed`` from the store's history (or gets
410 if the store compacted it), and joins the cache on its next re-watch.

Each cache counts what ``/metrics`` reports of it (``services.apiserver.metrics``): events
received from the store, events handed to its watchers, live objects.

The cache's store watch asks for progress notifications (``store.base``): they say "every event
of this resource up to R has reached you" although the latest writes were to other resources,
and ``current_through`` records it. That is what lets a consistent list (no resourceVersion) be
served from the cache — with several apiservers on one etcd, too — once it finds the cache
current through the store's current revision (``services.apiserver.listing``, which asks the
store for a notification and waits for it with ``wait_current_through``).

Bookmarks carry ``current_through`` too, so a quiet resource's watchers resume from a recent
revision.

Limits: events are held in memory (``capacity`` per resource). Memory and SQLite send progress
notifications only when asked (``Store.request_progress``, answered at once); etcd's JSON
gateway cannot ask, so there a cache is known current only through etcd's periodic
notifications or when the latest write was to its own resource.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from api.errors import Expired, StatusError
from api.registry import ResourceType
from services.apiserver.codec import dumps, dumps_kept, loads
from services.apiserver.custom_objects import served_as
from services.apiserver.encryption import Undecryptable
from services.apiserver.predicate import INDEX_PREFERENCE, Predicate
from services.apiserver.storage import decode, too_old
from store.base import Compacted, Event, Store, StoreClosed, StoreFailed, WatchOverflow

__all__ = [
    "CacheEvent",
    "CompactObject",
    "Delivery",
    "StoreFeed",
    "Tally",
    "WatchCache",
    "Watcher",
    "WatcherClosed",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DEFAULT_CAPACITY = 10_000
"""Events kept per resource: resuming watches within the last 10k writes replay from memory."""

DEFAULT_QUEUE = 1_000
"""Events one watcher may have unsent before it is closed as too slow."""

RECENT_FRAMES = 1_024
"""Events that keep the frames made for them; older ones forget theirs (``forget_frames``)."""

_RETRY_DELAY = 1.0


class CompactObject:
    """One state of one object as the cache keeps it: its JSON as served (what lists and watch
    frames carry, made once) and the few fields a selector or an index reads; a dict is decoded
    from the JSON only when a consumer asks for one (``decoded``).

    A decoded pod is several times the size of its JSON, and the cache holds every live object
    plus the last ``capacity`` events: keeping bytes instead saves most of its memory.
    ``labels`` is the decoded object's own label map; ``fields`` holds ``metadata.name``,
    ``metadata.namespace`` and every field the resource declares selectable, as the strings a
    field selector compares.
    """

    __slots__ = ("fields", "json", "labels", "namespace")

    def __init__(self, rt: ResourceType, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        self.json = dumps_kept(obj)
        self.namespace = str(meta.get("namespace") or "")
        self.labels: dict[str, str] = meta.get("labels") or _NO_LABELS
        fields = {
            "metadata.name": str(meta.get("name") or ""),
            "metadata.namespace": self.namespace,
        }
        for path, getter in rt.field_getters.items():
            fields[path] = getter(obj) or ""
        self.fields = fields

    def decoded(self) -> Obj:
        """A new dict of the object (the caller may change it)."""
        obj: Obj = loads(self.json)
        return obj


_NO_LABELS: dict[str, str] = {}


class CacheEvent:
    """One change of one object, kept compact (``CompactObject``): serialised once when it
    arrives, its frames made at most once per event type while it is recent."""

    __slots__ = (
        "_chunks",
        "_deliveries",
        "_frames",
        "_prev_bytes",
        "_served",
        "current",
        "keeps_frames",
        "key",
        "previous",
        "revision",
        "type",
    )

    def __init__(
        self,
        *,
        type: str,
        key: str,
        current: CompactObject,
        previous: CompactObject | None,
        revision: int,
        keeps_frames: bool = True,
    ) -> None:
        self.type = type
        self.key = key
        self.current = current
        """The object at this revision (for DELETED: its last state, at the deletion's revision)."""
        self.previous = previous
        """The object before this change (None for ADDED)."""
        self.revision = revision
        self.keeps_frames = keeps_frames
        """False: frames are made anew for each watcher (an event nobody else will send)."""
        self._prev_bytes: bytes | None = None
        self._frames: dict[tuple[str, bool], bytes] | None = None
        self._chunks: dict[tuple[str, bool], bytes] | None = None
        self._deliveries: dict[tuple[str, bool], Delivery] | None = None
        self._served: dict[tuple[str, str, bool], tuple[ResourceType, bytes, bytes]] | None = None

    @classmethod
    def from_store(
        cls, rt: ResourceType, event: Event, *, known: CacheEvent | None = None
    ) -> CacheEvent:
        """The cache's form of a store event. ``known``: the latest event of the same key the
        cache holds; when it is the state this event changed, its compact form is the previous
        state as it is (no second decode of the previous value)."""
        obj = decode(event.kv)
        previous: CompactObject | None = None
        if event.prev is not None:
            if known is not None and known.revision == event.prev.mod_revision:
                previous = known.current
            else:
                previous = CompactObject(rt, decode(event.prev))
        return cls(
            type=event.type.value,
            key=event.kv.key,
            current=CompactObject(rt, obj),
            previous=previous,
            revision=event.revision,
        )

    @classmethod
    def synthetic(cls, rt: ResourceType, obj: Obj, *, key: str) -> CacheEvent:
        """An ADDED for an object that already exists (the start of a watch, the loaded
        state); its frames are not kept: each watch from the state sends them once."""
        rv = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
        return cls(
            type="ADDED",
            key=key,
            current=CompactObject(rt, obj),
            previous=None,
            revision=rv,
            keeps_frames=False,
        )

    @property
    def obj(self) -> Obj:
        """The object at this revision, decoded anew (the caller may change it)."""
        return self.current.decoded()

    def object_bytes(self, *, from_prev: bool = False) -> bytes:
        """The object's JSON; ``from_prev``: the previous state stamped with this revision."""
        if from_prev and self.previous is not None and self.type != "DELETED":
            if self._prev_bytes is None:
                prev = self.previous.decoded()
                prev.setdefault("metadata", {})["resourceVersion"] = str(self.revision)
                self._prev_bytes = dumps_kept(prev)
            return self._prev_bytes
        return self.current.json

    def object_for(self, *, from_prev: bool) -> Obj:
        """The object a delivery carries, as a new dict (for Tables and served versions)."""
        obj: Obj = loads(self.object_bytes(from_prev=from_prev))
        return obj

    def delivery(self, etype: str, from_prev: bool) -> Delivery:
        """The ``Delivery`` of this event as ``etype``, one shared by every watcher sending it
        (kept like the frames)."""
        if self._deliveries is not None and (found := self._deliveries.get((etype, from_prev))):
            return found
        delivery = Delivery(etype, self, from_prev)
        if self.keeps_frames:
            if self._deliveries is None:
                self._deliveries = {}
            self._deliveries[(etype, from_prev)] = delivery
        return delivery

    def frame(self, etype: str, *, from_prev: bool = False) -> bytes:
        """``{"type": etype, "object": ...}`` plus newline, made once per (type, source) while
        the event keeps frames."""
        if self._frames is not None and (frame := self._frames.get((etype, from_prev))):
            return frame
        frame = _frame(etype, self.object_bytes(from_prev=from_prev))
        if self.keeps_frames:
            if self._frames is None:
                self._frames = {}
            self._frames[(etype, from_prev)] = frame
        return frame

    def chunk(self, etype: str, *, from_prev: bool = False) -> bytes:
        """``frame`` as one HTTP/1.1 chunk (size line, data, CRLF), kept like the frame."""
        if self._chunks is not None and (chunk := self._chunks.get((etype, from_prev))):
            return chunk
        chunk = _chunk(self.frame(etype, from_prev=from_prev))
        if self.keeps_frames:
            if self._chunks is None:
                self._chunks = {}
            self._chunks[(etype, from_prev)] = chunk
        return chunk

    def served(self, rt: ResourceType, etype: str, *, from_prev: bool) -> tuple[bytes, bytes]:
        """``frame`` and ``chunk`` of the object as ``rt``'s version serves it (``served_as``:
        a custom resource's defaults and apiVersion, a built-in version's conversion), made
        once per event and version however many watch it; the shared ones when serving changes
        nothing. Kept for ``rt`` itself: a CRD update registers new versions, served anew."""
        key = (rt.api_version, etype, from_prev)
        kept = self._served.get(key) if self._served is not None else None
        if kept is not None and kept[0] is rt:
            return kept[1], kept[2]
        obj = self.object_for(from_prev=from_prev)
        served = served_as(rt, obj)
        if served is obj:
            frame = self.frame(etype, from_prev=from_prev)
            chunk = self.chunk(etype, from_prev=from_prev)
        else:
            frame = _frame(etype, dumps(served))
            chunk = _chunk(frame)
        if self.keeps_frames:
            if self._served is None:
                self._served = {}
            self._served[key] = (rt, frame, chunk)
        return frame, chunk

    def forget_frames(self) -> None:
        """Drop the frames made for this event (it is no longer recent; a late watcher makes
        them again), keeping the cache's memory to the objects themselves."""
        self._frames = self._chunks = self._served = self._deliveries = None
        self._prev_bytes = None
        self.keeps_frames = False


def _frame(etype: str, object_bytes: bytes) -> bytes:
    return b'{"type":"%s","object":%s}\n' % (etype.encode(), object_bytes)


def _chunk(frame: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(frame), frame)


class Delivery:
    """What a watcher sends for one event: a type and which state of the object it carries.

    Shared by every watcher that sends the same (event, type, state) while the event is recent
    (``CacheEvent.delivery``), so it keeps its chunk once made."""

    __slots__ = ("_chunk", "event", "from_prev", "type")

    def __init__(self, type: str, event: CacheEvent | None, from_prev: bool = False) -> None:
        self.type = type
        self.event = event
        self.from_prev = from_prev
        self._chunk: bytes | None = None

    def __repr__(self) -> str:
        revision = self.event.revision if self.event is not None else None
        return f"Delivery({self.type!r}, revision={revision}, from_prev={self.from_prev})"

    def frame(self) -> bytes:
        assert self.event is not None
        return self.event.frame(self.type, from_prev=self.from_prev)

    def chunk(self) -> bytes:
        chunk = self._chunk
        if chunk is None:
            assert self.event is not None
            chunk = self._chunk = self.event.chunk(self.type, from_prev=self.from_prev)
        return chunk

    def served(self, rt: ResourceType) -> tuple[bytes, bytes]:
        """``frame`` and ``chunk`` as ``rt``'s version serves the object (``CacheEvent.served``)."""
        assert self.event is not None
        return self.event.served(rt, self.type, from_prev=self.from_prev)


INITIAL_EVENTS_END = Delivery("INITIAL_EVENTS_END", None)
"""Marker after the synthetic ADDED events of a ``sendInitialEvents`` watch."""


def decide(predicate: Predicate, event: CacheEvent) -> Delivery | None:
    """What a watcher with ``predicate`` sees of ``event`` (Kubernetes' cacheWatcher rules).

    Starts matching -> ADDED; keeps matching -> the event's type; stops matching -> DELETED
    carrying the previous state at this revision; never matched -> nothing. Matching reads the
    compact forms' precomputed fields; the delivery is the one the event shares.
    """
    current, previous = event.current, event.previous
    now = predicate.matches_parts(current.namespace, current.labels, current.fields)
    if event.type == "DELETED":
        return event.delivery("DELETED", False) if now else None
    before = previous is not None and predicate.matches_parts(
        previous.namespace, previous.labels, previous.fields
    )
    if now:
        return event.delivery("MODIFIED" if before else "ADDED", False)
    if before:
        return event.delivery("DELETED", True)
    return None


class WatcherClosed(Exception):
    """The watch ended on the server side; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Tally:
    """A count the watchers of one cache share: the events they were handed to send."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


class Watcher:
    """One client watch: a predicate, a backlog to send first, then a bounded live queue."""

    def __init__(
        self,
        predicate: Predicate,
        *,
        after: int,
        backlog: Iterable[Delivery | CacheEvent] = (),
        capacity: int = DEFAULT_QUEUE,
    ) -> None:
        self.predicate = predicate
        self.after = after
        """Live events at or below this revision are not for this watcher."""
        self.capacity = capacity
        self._backlog: deque[Delivery | CacheEvent] = deque(backlog)
        """Sent first: decided deliveries as they are, raw events through the predicate."""
        self._queue: deque[Delivery] = deque()
        self._wakeup = asyncio.Event()
        if self._backlog:
            self._wakeup.set()
        self._closed: str | None = None
        self._error: StatusError | None = None
        self.on_close: list[Any] = []
        self.sent = Tally()
        """Counts the events handed out to be sent (the cache gives its watchers one tally)."""
        self.direct: Callable[[Delivery], bool] | None = None
        """Set by a streaming handler: sends a delivery at once (True) or declines (False).

        Used only while nothing is queued, so the stream's order is kept; it saves a task
        switch per watcher per event, which is most of the cost of a wide fan-out."""

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def offer(self, event: CacheEvent) -> None:
        """Called by the feeder for every event this watcher may care about."""
        if self._closed is not None or event.revision <= self.after:
            return
        delivery = decide(self.predicate, event)
        if delivery is None:
            return
        if (
            self.direct is not None
            and not self._queue
            and not self._backlog
            and self.direct(delivery)
        ):
            self.sent.n += 1
            return
        if len(self._queue) >= self.capacity:
            self.close("the watcher fell behind; it may resume from its last resourceVersion")
            return
        self.sent.n += 1
        self._queue.append(delivery)
        self._wakeup.set()

    def fail(self, error: StatusError) -> None:
        """End the watch with an ERROR event carrying ``error``'s Status."""
        if self._closed is None:
            self._error = error
            self.close(error.message)

    def close(self, reason: str) -> None:
        if self._closed is None:
            self._closed = reason
            self.direct = None
            self._wakeup.set()
            for callback in self.on_close:
                callback(self)
            self.on_close.clear()

    async def next_batch(self, *, max_wait: float | None) -> list[Delivery]:
        """Everything ready to send ([] when ``max_wait`` seconds pass first; None: no limit).

        Raises ``StatusError`` when the watch ends with an error event, ``WatcherClosed`` when
        it ends without one (after the events queued before the close have been handed out).
        """
        if not self._backlog and not self._queue and self._closed is None:
            self._wakeup.clear()
            if max_wait is None:
                await self._wakeup.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), max_wait)
        if self._backlog:
            batch: list[Delivery] = []
            while self._backlog and len(batch) < 500:
                item = self._backlog.popleft()
                if isinstance(item, Delivery):
                    batch.append(item)
                elif (decided := decide(self.predicate, item)) is not None:
                    batch.append(decided)
            self.sent.n += len(batch)
            return batch
        if self._queue:
            batch = list(self._queue)
            self._queue.clear()
            return batch
        if self._error is not None:
            raise self._error
        if self._closed is not None:
            raise WatcherClosed(self._closed)
        return []


@dataclass
class _Index:
    """Watchers filed by the value of one field."""

    path: str
    by_value: dict[str, set[Watcher]] = field(default_factory=dict)


class WatchCache:
    """The cache of one resource type. ``run`` is its feeding task; see the module docstring."""

    def __init__(
        self,
        store: Store,
        rt: ResourceType,
        *,
        capacity: int = DEFAULT_CAPACITY,
        queue_size: int = DEFAULT_QUEUE,
    ) -> None:
        self.store = store
        self.rt = rt
        self.capacity = capacity
        self.queue_size = queue_size
        self.revision = 0
        """The revision of the last event applied (or the revision the state was loaded at)."""
        self.current_through = 0
        """Every event of this resource up to this revision has been applied: ``revision``, or
        a later one a progress notification of the store vouched for. Only reads use it (and
        ``wait_current_through``); ``wait_until`` and ``revision`` move with the state alone."""
        self.window_start = 0
        """The ring holds every event of this resource with revision > window_start."""
        self.ready = asyncio.Event()
        self._state: dict[str, CacheEvent] = {}
        self._order: list[str] = []
        """The keys of ``_state`` in key order as of the last ``snapshot`` (``_ordered``)."""
        self._added: set[str] = set()
        """Keys that came into ``_state`` since ``_order`` was made."""
        self._removed = 0
        """Keys that left ``_state`` since ``_order`` was made."""
        self._ring: deque[CacheEvent] = deque()
        self._unindexed: set[Watcher] = set()
        self._indexes: dict[str, _Index] = {f: _Index(f) for f in INDEX_PREFERENCE}
        self._stopped = False
        self._progress = asyncio.Event()
        self._sent = Tally()
        self.events_received = 0
        """Store events applied since start (``apiserver_watch_cache_events_received_total``)."""
        self.consistent_reads: collections.Counter[tuple[str, str]] = collections.Counter()
        """Consistent lists of this resource by ``(success, fallback)``, ``"true"``/``"false"``
        each (``apiserver_watch_cache_consistent_read_total``): served from this cache, or read
        from the store after the cache did not become current in time. ``listing`` counts."""

    # -- reads -------------------------------------------------------------------------------

    def snapshot(self, predicate: Predicate) -> tuple[list[CacheEvent], int]:
        """Current matching objects (their latest events, in key order) and the cache revision.

        Walks only the keys of the predicate's namespace when it has one, and tests none of
        them when it has no selector."""
        order = self._ordered()
        lo, hi = 0, len(order)
        in_range = predicate.namespace is None
        if predicate.namespace and self.rt.namespaced:
            start = self.rt.prefix(predicate.namespace)
            lo = bisect.bisect_left(order, start)
            hi = bisect.bisect_left(order, start[:-1] + "0", lo)  # "0" follows "/"
            in_range = True
        state = self._state
        if in_range and predicate.labels is None and predicate.fields is None:
            return [state[key] for key in order[lo:hi]], self.revision
        matches = predicate.matches_parts
        events = []
        for key in order[lo:hi]:
            event = state[key]
            current = event.current
            if matches(current.namespace, current.labels, current.fields):
                events.append(event)
        return events, self.revision

    def _ordered(self) -> list[str]:
        """The keys of ``_state`` in key order, mended from the last ones rather than sorted
        anew: status updates (most writes) change no key, and the keys that came since are
        merged in by one sort over two sorted runs (linear), not a full sort of every key —
        which took seconds per list at 150,000 pods."""
        if self._added or self._removed:
            state, added = self._state, self._added
            order = self._order
            if self._removed:  # a key removed and added again is among ``added``
                order = [key for key in order if key in state and key not in added]
            order.extend(sorted(key for key in added if key in state))
            order.sort()
            self._order = order
            self._added = set()
            self._removed = 0
        return self._order

    async def wait_until(self, revision: int) -> None:
        """Return once the cache has applied an event at or past ``revision``."""
        while self.revision < revision:
            await self._progress.wait()

    async def wait_current_through(self, revision: int) -> None:
        """Return once the cache is current through ``revision``: it applied an event at or
        past it, or a progress notification vouched for it (``current_through``). Unlike
        ``wait_until`` this is what a read needs, not a change to the state."""
        while self.current_through < revision:
            await self._progress.wait()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def lookup(self, key: str) -> CacheEvent | None:
        """The latest event of a live object (its ``obj`` is the current state), or None."""
        return self._state.get(key)

    @property
    def object_count(self) -> int:
        """Live objects of this resource (``apiserver_storage_objects``)."""
        return len(self._state)

    @property
    def events_sent(self) -> int:
        """Events handed to this cache's watchers to send (``apiserver_watch_events_total``)."""
        return self._sent.n

    @property
    def watcher_count(self) -> int:
        n = len(self._unindexed)
        for index in self._indexes.values():
            n += sum(len(s) for s in index.by_value.values())
        return n

    # -- watchers ----------------------------------------------------------------------------

    def watch_from_state(
        self, predicate: Predicate, *, initial_end_marker: bool = False
    ) -> Watcher:
        """Synthetic ADDED for the current state, then every change after it."""
        events, revision = self.snapshot(predicate)
        backlog: list[Delivery | CacheEvent] = [Delivery("ADDED", e) for e in events]
        if initial_end_marker:
            backlog.append(INITIAL_EVENTS_END)
        watcher = Watcher(predicate, after=revision, backlog=backlog, capacity=self.queue_size)
        return self._register(watcher)

    def watch_from(
        self,
        predicate: Predicate,
        *,
        after: int,
        initial: Iterable[Delivery] = (),
    ) -> Watcher | None:
        """Every change after revision ``after`` (``initial`` deliveries first).

        None if the ring no longer reaches back that far (use a ``StoreFeed``)."""
        if after < self.window_start:
            return None
        backlog: list[Delivery | CacheEvent] = list(initial)
        backlog.extend(e for e in self._ring if e.revision > after)
        watcher = Watcher(
            predicate,
            after=max(after, self.revision),
            backlog=backlog,
            capacity=self.queue_size,
        )
        return self._register(watcher)

    def _register(self, watcher: Watcher) -> Watcher:
        index = watcher.predicate.index
        if index is not None and index[0] in self._indexes:
            bucket = self._indexes[index[0]].by_value.setdefault(index[1], set())
            bucket.add(watcher)
        else:
            self._unindexed.add(watcher)
        watcher.on_close.append(self._unregister)
        watcher.sent = self._sent
        if self._stopped:
            watcher.close("the apiserver is shutting down")
        return watcher

    def _unregister(self, watcher: Watcher) -> None:
        index = watcher.predicate.index
        if index is not None and index[0] in self._indexes:
            by_value = self._indexes[index[0]].by_value
            bucket = by_value.get(index[1])
            if bucket is not None:
                bucket.discard(watcher)
                if not bucket:
                    del by_value[index[1]]
        else:
            self._unindexed.discard(watcher)

    def close_all(self, reason: str) -> None:
        watchers = list(self._unindexed)
        for index in self._indexes.values():
            for bucket in index.by_value.values():
                watchers.extend(bucket)
        for watcher in watchers:
            watcher.close(reason)

    def stop(self) -> None:
        self._stopped = True
        self.close_all("the apiserver is shutting down")

    # -- feeding -----------------------------------------------------------------------------

    def apply(self, event: CacheEvent) -> None:
        """Record one event and offer it to the watchers that may match it."""
        self.events_received += 1
        state = self._state
        if event.type == "DELETED":
            if state.pop(event.key, None) is not None:
                self._removed += 1
        else:
            if event.key not in state:
                self._added.add(event.key)
            state[event.key] = event
        self._ring.append(event)
        if len(self._ring) > self.capacity:
            self.window_start = self._ring.popleft().revision
        if len(self._ring) > RECENT_FRAMES:
            self._ring[-RECENT_FRAMES - 1].forget_frames()
        self.revision = self.current_through = event.revision
        self._wake()
        for watcher in list(self._unindexed):
            watcher.offer(event)
        for index in self._indexes.values():
            if not index.by_value:
                continue
            value = event.current.fields.get(index.path, "")
            bucket = index.by_value.get(value)
            if bucket:
                for watcher in list(bucket):
                    watcher.offer(event)
            if event.previous is not None:
                before = event.previous.fields.get(index.path, "")
                if before != value and (bucket := index.by_value.get(before)):
                    for watcher in list(bucket):
                        watcher.offer(event)

    def _progressed(self, revision: int) -> None:
        """The store vouched that every event up to ``revision`` has been applied."""
        if revision > self.current_through:
            self.current_through = revision
            self._wake()

    def _wake(self) -> None:
        """Wake the waiters of ``wait_until`` and ``wait_current_through`` (each re-checks)."""
        progress, self._progress = self._progress, asyncio.Event()
        progress.set()

    async def _load(self) -> None:
        """The current state, read at one revision; the ring starts empty from there.

        Values no encryption provider can read are left out (and logged): the rest of the
        resource is served, and a request for one of them gets its 500.
        """
        try:
            result = await self.store.list(self.rt.prefix())
        except Undecryptable as err:
            if err.readable is None:
                raise
            log.error("watch cache %s: left out a value: %s", self.rt.plural, err.message)
            result = err.readable
        rt = self.rt
        self._state = {
            kv.key: CacheEvent.synthetic(rt, decode(kv), key=kv.key) for kv in result.items
        }
        self._order = sorted(self._state)
        self._added = set()
        self._removed = 0
        self._ring.clear()
        self.revision = self.window_start = self.current_through = result.revision

    async def run(self) -> None:
        """The feeding loop (a named task owned by the app). Returns when the store closes."""
        loaded = False
        while not self._stopped:
            try:
                if not loaded:
                    await self._load()
                    loaded = True
                    self.ready.set()
                async for event in self.store.watch(
                    self.rt.prefix(), after_revision=self.revision, on_progress=self._progressed
                ):
                    known = self._state.get(event.kv.key)
                    self.apply(CacheEvent.from_store(self.rt, event, known=known))
            except WatchOverflow:
                log.warning(
                    "watch cache %s fell behind the store; re-watching from %d",
                    self.rt.plural,
                    self.revision,
                )
            except Compacted as exc:
                log.warning(
                    "watch cache %s: %s; reloading and closing its watchers (they will resume)",
                    self.rt.plural,
                    exc,
                )
                self.close_all("the watch cache was reloaded")
                loaded = False
            except StoreFailed:
                self.stop()
                raise  # the app stops the server; retrying cannot mend a damaged store
            except StoreClosed:
                log.info("watch cache %s: store closed; stopping", self.rt.plural)
                break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "watch cache %s failed; will retry in %.0f s", self.rt.plural, _RETRY_DELAY
                )
                await asyncio.sleep(_RETRY_DELAY)
        self.stop()


class StoreFeed:
    """Feeds one watcher from its own store watch (a resume from before the ring's window)."""

    def __init__(self, store: Store, rt: ResourceType, watcher: Watcher, *, after: int) -> None:
        self.store = store
        self.rt = rt
        self.watcher = watcher
        self.after = after
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        name = f"watch-store-feed-{self.rt.plural}-{self.after}"
        self.task = asyncio.create_task(self._run(), name=name)
        self.watcher.on_close.append(lambda _w: self.stop())

    def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()

    async def _run(self) -> None:
        try:
            async for event in self.store.watch(self.rt.prefix(), after_revision=self.after):
                self.watcher.offer(CacheEvent.from_store(self.rt, event))
                self.after = event.revision
                if self.watcher.closed:
                    return
        except Compacted as exc:
            self.watcher.fail(too_old(exc.requested, exc.compacted))
        except WatchOverflow:
            self.watcher.close("the watch fell behind the store; resume from its last revision")
        except StoreClosed:
            self.watcher.close("the store closed")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # pragma: no cover - logged, watcher ends
            log.exception("store-fed watch of %s failed", self.rt.plural)
            self.watcher.fail(Expired(f"watch ended: {exc}"))
