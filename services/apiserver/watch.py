"""Watch over HTTP: a chunked stream of ``{"type", "object"}`` lines, as Kubernetes sends them.

Why: components stay in sync by watching (list, then watch from the list's resourceVersion), so
the stream must start at exactly the right revision, resume without gaps, end when asked, and
tell the client when its resourceVersion is too old (an ``ERROR`` event with a 410 ``Expired``
Status, after which client-go relists).

Where a watch starts (``resourceVersion``):
* unset: synthetic ADDED events for the current state, read from the store, then changes;
* ``0``: the same, from the watch cache's state;
* ``N``: only changes after N — from the cache's ring, or from the store's history
  (``StoreFeed``) when N is older than the ring; 410 once the store compacted N away; an
  ``ERROR`` with a 504 (``ResourceVersionTooLarge``) after a 3 s wait when N is ahead of the
  store (a store that lost its history: the client relists).
``sendInitialEvents=true`` (with ``resourceVersionMatch=NotOlderThan``) sends the state first and
then a BOOKMARK annotated ``k8s.io/initial-events-end: "true"``. ``allowWatchBookmarks`` adds a
BOOKMARK every ``bookmark_interval`` seconds of quiet. ``timeoutSeconds`` (default: 1-2x
``min_request_timeout``, as Kubernetes) ends the stream cleanly.

Each batch of ready events is written (and flushed) with one write; the serialised frames come
from the watch cache, so a thousand watchers of one event cost one ``json.dumps``. While a
watcher has nothing queued, the cache's feeding task writes its events straight onto the
connection as ready-made HTTP chunks (``DirectWriter``), one send per watcher per burst, saving
a task switch and a syscall per watcher per event; a connection with unsent bytes piling up
falls back to the queue and its backpressure. Clients that asked for Tables (kubectl
``get -w``) get each object as a one-row Table instead.

An HTTP/1.0 client (``curl -0``) cannot take chunked encoding; it gets the same lines unframed,
and the connection closes at the end of the watch, as Go's net/http serves kube-apiserver's
watches to HTTP/1.0 clients.

Limits: a closed client is noticed on the next write or within ``bookmark_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Any

from aiohttp import web

from api.errors import StatusError
from api.registry import ResourceType
from services.apiserver.codec import JSON_CONTENT_TYPE, dumps
from services.apiserver.context import ApiContext
from services.apiserver.custom_objects import served_as
from services.apiserver.listing import too_large
from services.apiserver.query import ListOptions, parse_revision
from services.apiserver.tables import TABLE_CONTENT_TYPE, to_table, wants_table
from services.apiserver.watchcache import (
    INITIAL_EVENTS_END,
    CacheEvent,
    Delivery,
    StoreFeed,
    Watcher,
    WatcherClosed,
)

__all__ = ["DirectWriter", "bookmark_frame", "open_watch", "serve"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

INITIAL_EVENTS_ANNOTATION = "k8s.io/initial-events-end"

TOO_LARGE_WAIT = 3.0
"""Seconds a watch from a resourceVersion ahead of the store waits before its 504 (as Kubernetes)."""


def bookmark_frame(rt: ResourceType, revision: int, *, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_ANNOTATION: "true"}
    obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
    return b'{"type":"BOOKMARK","object":%s}\n' % dumps(obj)


def error_frame(error: StatusError) -> bytes:
    return b'{"type":"ERROR","object":%s}\n' % dumps(error.to_status())


class _Source:
    """A watcher plus, when it is fed from the store rather than the cache, its feed."""

    def __init__(self, watcher: Watcher, *, feed: StoreFeed | None, start: int) -> None:
        self.watcher = watcher
        self.feed = feed
        self.start = start

    def progress(self, cache_revision: int) -> int:
        """A revision every event up to which has been handed to this watcher."""
        if self.feed is not None:
            return self.feed.after
        return max(cache_revision, self.watcher.after)

    def close(self) -> None:
        self.watcher.close("the watch ended")
        if self.feed is not None:
            self.feed.stop()


async def open_watch(ctx: ApiContext, rt: ResourceType, opts: ListOptions) -> _Source:
    """Register a watcher that starts where ``opts`` says (see the module docstring)."""
    cache = ctx.cache(rt)
    assert cache is not None, f"no watch cache for {rt.plural}"
    await cache.ready.wait()
    predicate = opts.predicate
    rv = opts.resource_version
    send_initial = opts.send_initial_events
    if send_initial is None:
        send_initial = rv in ("", "0")
    marker = bool(opts.send_initial_events)
    if send_initial:
        wanted = parse_revision(rv) if rv else 0
        if rv and cache.revision >= wanted:
            watcher = cache.watch_from_state(predicate, initial_end_marker=marker)
            return _Source(watcher, feed=None, start=watcher.after)
        page = await ctx.storage(rt).list(predicate.namespace)
        initial: list[Delivery] = [
            Delivery("ADDED", CacheEvent.synthetic(rt, obj, key=_key(rt, obj)))
            for obj in page.items
            if predicate.matches(obj)
        ]
        if marker:
            initial.append(INITIAL_EVENTS_END)
        return _start_after(ctx, rt, opts, after=page.revision, initial=initial)
    if not rv:
        return _start_after(ctx, rt, opts, after=await ctx.store.current_revision(), initial=[])
    after = parse_revision(rv)
    current = await ctx.store.current_revision()
    if after > current:
        # Kubernetes waits a moment for its cache to catch up, then refuses with a 504 the
        # client relists on (a restarted store may never reach that revision).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(cache.wait_until(after), TOO_LARGE_WAIT)
        current = await ctx.store.current_revision()
        if after > current:
            watcher = Watcher(predicate, after=after, capacity=1)
            watcher.fail(too_large(after, current))
            return _Source(watcher, feed=None, start=after)
    return _start_after(ctx, rt, opts, after=after, initial=[])


def _key(rt: ResourceType, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return rt.key(meta.get("namespace"), str(meta.get("name")))


def _start_after(
    ctx: ApiContext,
    rt: ResourceType,
    opts: ListOptions,
    *,
    after: int,
    initial: list[Delivery],
) -> _Source:
    cache = ctx.cache(rt)
    assert cache is not None
    watcher = cache.watch_from(opts.predicate, after=after, initial=initial)
    if watcher is not None:
        return _Source(watcher, feed=None, start=after)
    watcher = Watcher(opts.predicate, after=after, backlog=initial, capacity=cache.queue_size)
    feed = StoreFeed(ctx.store, rt, watcher, after=after)
    feed.start()
    return _Source(watcher, feed=feed, start=after)


class _Renderer:
    """Deliveries to bytes: the cache's shared frames, or one-row Tables for kubectl. A custom
    object, or one of a version served from another's storage, goes out as the watched version
    serves it (``served_as``), in frames the event makes once for that version
    (``CacheEvent.served``)."""

    def __init__(self, rt: ResourceType, opts: ListOptions, *, table: bool) -> None:
        self.rt = rt
        self.opts = opts
        self.table = table
        self.headers_sent = False
        self.shared = rt.custom is None and rt.conversion is None
        """Every object goes out as the cache holds it."""
        self.chunk: Callable[[Delivery], bytes] = Delivery.chunk if self.shared else self._served
        """``frame`` as one HTTP/1.1 chunk (not for Tables)."""

    def _served(self, delivery: Delivery) -> bytes:
        return delivery.served(self.rt)[1]

    def frame(self, delivery: Delivery) -> bytes:
        if not self.table:
            return delivery.frame() if self.shared else delivery.served(self.rt)[0]
        assert delivery.event is not None
        obj = served_as(self.rt, delivery.event.object_for(from_prev=delivery.from_prev))
        table = to_table(
            self.rt,
            [obj],
            include_object=self.opts.include_object,
            resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or ""),
            with_headers=not self.headers_sent,
        )
        self.headers_sent = True
        return _event_frame(delivery.type, table)


def _event_frame(etype: str, obj: Obj) -> bytes:
    return b'{"type":"%s","object":%s}\n' % (etype.encode(), dumps(obj))


DIRECT_WRITE_LIMIT = 256 * 1024
"""Bytes a connection may have unsent before events for it queue up instead (backpressure)."""


class DirectWriter:
    """Writes deliveries straight onto the connection, from the feeding task, in batches.

    Chunks offered within one turn of the event loop are joined into one ``transport.write``
    (one send per watcher per burst of events, not per event) scheduled with ``call_soon``.
    It declines (the delivery is queued for the handler, which awaits the socket draining) only
    when nothing of its own is pending and the connection holds ``DIRECT_WRITE_LIMIT`` unsent
    bytes, so the stream's order is kept; the handler calls ``flush`` before writing anything
    itself.
    """

    def __init__(
        self,
        transport: asyncio.Transport,
        watcher: Watcher,
        chunk: Callable[[Delivery], bytes] = Delivery.chunk,
    ) -> None:
        self.transport = transport
        """The connection's transport, taken once: it is the same for the whole watch, and
        a closed connection says so by ``is_closing``."""
        self.watcher = watcher
        self.chunk = chunk
        """A delivery as one HTTP/1.1 chunk (``_Renderer.chunk``)."""
        self.pending: list[bytes] = []
        self.call_soon = asyncio.get_running_loop().call_soon

    def __call__(self, delivery: Delivery) -> bool:
        if self.pending:
            self.pending.append(self.chunk(delivery))
            return True
        transport = self.transport
        if transport.is_closing():
            self.watcher.close("the client went away")
            return True
        if transport.get_write_buffer_size() > DIRECT_WRITE_LIMIT:
            return False
        self.pending.append(self.chunk(delivery))
        self.call_soon(self.flush)
        return True

    def flush(self) -> None:
        if not self.pending:
            return
        data = self.pending[0] if len(self.pending) == 1 else b"".join(self.pending)
        self.pending.clear()
        if self.transport.is_closing():
            self.watcher.close("the client went away")
            return
        self.transport.write(data)


async def serve(
    request: web.Request, ctx: ApiContext, rt: ResourceType, opts: ListOptions
) -> web.StreamResponse:
    options = ctx.options
    table = wants_table(request.headers.get("Accept"))
    source = await open_watch(ctx, rt, opts)
    cache = ctx.cache(rt)
    assert cache is not None
    loop = asyncio.get_running_loop()
    if opts.timeout_seconds is not None and opts.timeout_seconds > 0:
        lifetime = float(opts.timeout_seconds)
    else:
        lifetime = options.min_request_timeout * (1 + random.random())
    deadline = loop.time() + lifetime
    renderer = _Renderer(rt, opts, table=table)
    response = web.StreamResponse(
        status=200,
        headers={"Content-Type": TABLE_CONTENT_TYPE if table else JSON_CONTENT_TYPE},
    )
    chunked = request.version >= (1, 1)
    if chunked:
        response.enable_chunked_encoding()
    # else aiohttp sends the body unframed and closes the connection after it
    direct: DirectWriter | None = None
    try:
        await response.prepare(request)  # a StreamResponse sends its headers here
        transport = request.transport
        if not table and options.direct_watch_writes and chunked and transport is not None:
            # it writes HTTP chunks
            direct = DirectWriter(transport, source.watcher, renderer.chunk)
            source.watcher.direct = direct
        next_bookmark = loop.time() + options.bookmark_interval
        while True:
            now = loop.time()
            if now >= deadline:
                break
            wait = min(deadline - now, max(0.0, next_bookmark - now))
            try:
                batch = await source.watcher.next_batch(max_wait=wait)
            except StatusError as err:
                if direct is not None:
                    direct.flush()
                await response.write(error_frame(err))
                break
            except WatcherClosed:
                break
            if direct is not None:
                direct.flush()  # what the feeding task wrote goes out before our own frames
            if batch:
                frames = []
                for delivery in batch:
                    if delivery is INITIAL_EVENTS_END:
                        frames.append(bookmark_frame(rt, source.start, initial_end=True))
                    else:
                        frames.append(renderer.frame(delivery))
                await response.write(b"".join(frames))
                continue
            if loop.time() >= next_bookmark:
                transport = request.transport
                if transport is None or transport.is_closing():
                    break  # the client went away while the watch was quiet
                if opts.allow_watch_bookmarks:
                    await response.write(bookmark_frame(rt, source.progress(cache.current_through)))
                next_bookmark = loop.time() + options.bookmark_interval
    except (ConnectionResetError, ConnectionError):
        log.debug("watch of %s: client disconnected", rt.plural)
        return response
    finally:
        source.close()
    with contextlib.suppress(ConnectionResetError, ConnectionError):
        if direct is not None:
            direct.flush()
        await response.write_eof()
    return response
