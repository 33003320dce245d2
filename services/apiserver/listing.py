"""Lists: resourceVersion semantics, selectors, ``limit``/``continue`` paging, cache-served reads.

Why: a list is where a client's view of the cluster starts (every reflector lists, then watches
from the list's resourceVersion), so its revision must be exact and its pages consistent. The
rules, as Kubernetes has them:

* ``resourceVersion`` unset: the most recent state (consistent). The store's current revision
  is read (a quorum read on etcd) and the list is served from the watch cache once the cache is
  current through it — by its own events, or because a progress notification of the store said
  so (``store.base``). A cache behind it asks the store for a notification and waits for it, up
  to ``CONSISTENT_READ_WAIT``; the store is read instead when that runs out or the store cannot
  ask (etcd's JSON gateway). That is Kubernetes' consistent list from cache (1.31), store read
  as its fallback; as in 1.31, a consistent list with ``limit`` is read from the store (1.33
  serves those from snapshots of the cache, which this cache does not keep). Each one is
  counted, as the cacher counts them, in ``apiserver_watch_cache_consistent_read_total{group,
  resource,success,fallback}``: from the cache (``fallback="false"``), or from the store after
  the wait ran out (``fallback="true"``; ``success="false"`` if that read failed too).
* ``resourceVersion=0``: any state — served from the watch cache, whole (``limit`` ignored).
* ``resourceVersion=N`` (``NotOlderThan``, the default): a state at least as new as N — from the
  cache once it is current through N (waited for as above), else from the store; N beyond the
  store's revision is a 504.
* ``resourceVersionMatch=Exact`` (or ``limit`` with a non-zero N and no match): the state at
  exactly N, from the store's history; 410 if that was compacted.
* ``limit`` + ``continue``: every page is read at the first page's revision, so paging is
  consistent; the token is opaque (``query.ContinueToken``) and 410s once compacted away.

Selectors filter while paging: a page holds up to ``limit`` *matching* items.

Limits: no ``remainingItemCount``; a continue token may lead to a last, empty page; a list that
waits for its cache keeps its request's seat (in-flight or priority level) meanwhile.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web
from multidict import MultiDict

from api.errors import Expired, Timeout
from api.registry import ResourceType
from services.apiserver.codec import JSON_CONTENT_TYPE, dumps, json_response, loads
from services.apiserver.context import ApiContext
from services.apiserver.custom_objects import served_as
from services.apiserver.predicate import Predicate
from services.apiserver.query import EXACT, ContinueToken, ListOptions, parse_revision
from services.apiserver.tables import TABLE_CONTENT_TYPE, to_table, wants_table
from services.apiserver.watchcache import WatchCache

__all__ = ["ListResult", "joined", "list_objects", "parse_options", "serve", "too_large"]

Obj = dict[str, Any]

_PAGE_FLOOR = 100
"""Store rows read per round trip while filling a selector-filtered page."""

CONSISTENT_READ_WAIT = 3.0
"""Seconds a list waits for the watch cache to become current through the revision it needs
before reading the store instead: Kubernetes' cacher blocks as long (``blockTimeout``). On
memory and SQLite the store answers a progress request at once, so the wait is the cache
draining the events already on their way to it."""


@dataclass(frozen=True, slots=True)
class ListResult:
    decoded: list[Obj] | None
    """The objects as dicts; None when only their JSON is at hand (``encoded``)."""
    revision: int
    continue_token: str | None = None
    encoded: list[bytes] | None = None
    """Each object's JSON when it was already serialised (cache-served lists)."""

    @property
    def objects(self) -> list[Obj]:
        """The objects as dicts (decoded from ``encoded`` on each call when not at hand)."""
        if self.decoded is not None:
            return self.decoded
        assert self.encoded is not None
        return [loads(json) for json in self.encoded]


def too_large(wanted: int, current: int) -> Timeout:
    """504 for a resourceVersion the store has not reached (client-go relists on it)."""
    return Timeout(
        f"Too large resource version: {wanted}, current: {current}",
        causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        retry_after_seconds=1,
    )


def parse_options(request: web.Request, target: Any, *, name: str | None = None) -> ListOptions:
    """The list/watch options of a request; a ``/watch/.../{name}`` path selects that name."""
    query = request.query
    if name is not None or target.watch_path:
        q = MultiDict(query)
        if name is not None:
            selector = q.get("fieldSelector", "")
            q["fieldSelector"] = (
                f"{selector},metadata.name={name}" if selector else f"metadata.name={name}"
            )
        q["watch"] = "true"
        return ListOptions.parse(q, target.rt, namespace=target.namespace)
    return ListOptions.parse(query, target.rt, namespace=target.namespace)


async def _current_revision(ctx: ApiContext) -> int:
    return await ctx.store.current_revision()


async def list_objects(ctx: ApiContext, rt: ResourceType, opts: ListOptions) -> ListResult:
    rv = opts.resource_version
    predicate = opts.predicate
    cache = ctx.cache(rt)
    if opts.continue_token is None and rv:
        wanted = parse_revision(rv)
        exact = opts.resource_version_match == EXACT or (
            opts.limit and wanted and not opts.resource_version_match
        )
        if (wanted and not exact) or rv == "0":
            if wanted:
                current = await _current_revision(ctx)
                if wanted > current:
                    raise too_large(wanted, current)
            if cache is not None:
                await cache.ready.wait()
                if await _freshness(ctx, cache, wanted) == "current":
                    return _cached(cache, predicate)
            return await _page(ctx, rt, opts, revision=0, start_after=None)
        current = await _current_revision(ctx)
        if wanted > current:
            raise too_large(wanted, current)
        return await _page(ctx, rt, opts, revision=wanted, start_after=None)
    if opts.continue_token is not None:
        token = opts.continue_token
        try:
            return await _page(
                ctx, rt, opts, revision=token.revision, start_after=token.start_after
            )
        except Expired:
            raise Expired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            ) from None
    if cache is not None and not opts.limit and cache.ready.is_set():
        return await _consistent(ctx, rt, cache, opts)
    return await _page(ctx, rt, opts, revision=0, start_after=None)


async def _consistent(
    ctx: ApiContext, rt: ResourceType, cache: WatchCache, opts: ListOptions
) -> ListResult:
    """A consistent list of a cached resource: from the cache once it is current through the
    store's revision, else from the store, counted as Kubernetes' cacher counts them (a store
    that cannot ask is read without counting: its lists never try the cache)."""
    freshness = await _freshness(ctx, cache, await _current_revision(ctx))
    if freshness == "current":
        cache.consistent_reads["true", "false"] += 1
        return _cached(cache, opts.predicate)
    if freshness == "cannot ask":
        return await _page(ctx, rt, opts, revision=0, start_after=None)
    try:
        result = await _page(ctx, rt, opts, revision=0, start_after=None)
    except Exception:  # a failed read, not a client that went away
        cache.consistent_reads["false", "true"] += 1
        raise
    cache.consistent_reads["true", "true"] += 1
    return result


Freshness = Literal["current", "cannot ask", "timed out"]


async def _freshness(ctx: ApiContext, cache: WatchCache, revision: int) -> Freshness:
    """``current`` once ``cache`` is current through ``revision`` (asking the store for a
    progress notification and waiting up to ``CONSISTENT_READ_WAIT`` when it is behind);
    ``cannot ask`` when it is behind and the store cannot ask; ``timed out`` when the wait ran
    out."""
    if cache.current_through >= revision:
        return "current"
    if not await ctx.store.request_progress():
        return "cannot ask"
    try:
        await asyncio.wait_for(cache.wait_current_through(revision), CONSISTENT_READ_WAIT)
    except TimeoutError:
        return "timed out"
    return "current"


def _cached(cache: WatchCache, predicate: Predicate) -> ListResult:
    """The cache's matching objects, as of every event it has applied or been vouched for."""
    events, _ = cache.snapshot(predicate)
    return ListResult(
        decoded=None,
        revision=cache.current_through,
        encoded=[e.current.json for e in events],
    )


async def _page(
    ctx: ApiContext,
    rt: ResourceType,
    opts: ListOptions,
    *,
    revision: int,
    start_after: str | None,
) -> ListResult:
    """One page of matching objects read at ``revision`` (0: now)."""
    storage = ctx.storage(rt)
    predicate = opts.predicate
    namespace = predicate.namespace
    limit = opts.limit
    if not limit:
        whole = await storage.list(namespace, revision=revision)
        matching = [o for o in whole.items if predicate.matches(o)]
        return ListResult(decoded=matching, revision=whole.revision)
    items: list[Obj] = []
    start = start_after
    read_at = revision
    unfiltered = predicate.labels is None and predicate.fields is None
    while True:
        want = limit - len(items)
        page = await storage.list(
            namespace,
            revision=read_at,
            start_after=start,
            limit=want if unfiltered else max(want, _PAGE_FLOOR),
        )
        read_at = page.revision
        for i, obj in enumerate(page.items):
            if not predicate.matches(obj):
                continue
            items.append(obj)
            if len(items) == limit:
                more = page.more or i + 1 < len(page.items)
                token = None
                if more:
                    meta = obj["metadata"]
                    key = rt.key(meta.get("namespace"), meta["name"])
                    token = ContinueToken(revision=read_at, start_after=key).encode()
                return ListResult(decoded=items, revision=read_at, continue_token=token)
        if not page.more:
            return ListResult(decoded=items, revision=read_at)
        start = page.last_key


def _list_body(rt: ResourceType, result: ListResult) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(result.revision)}
    if result.continue_token:
        meta["continue"] = result.continue_token
    encoded = result.encoded if result.encoded is not None else [dumps(o) for o in result.objects]
    head = b'{"kind":%s,"apiVersion":%s,"metadata":%s,"items":[' % (
        dumps(rt.list_kind),
        dumps(rt.api_version),
        dumps(meta),
    )
    return joined(head, encoded, b"]}\n")


def joined(head: bytes, items: list[bytes], tail: bytes) -> bytes:
    """``head + b",".join(items) + tail``, copying every byte once: a list of 150,000 pods is
    half a gigabyte, and each of the two extra copies the concatenations made (each into freshly
    mapped pages) took about as long as the join."""
    if not items:
        return head + tail
    parts = [b","] * (2 * len(items) + 1)
    parts[0], parts[-1] = head, tail
    parts[1:-1:2] = items
    return b"".join(parts)


def _served(rt: ResourceType, result: ListResult) -> ListResult:
    """``result`` as ``rt``'s version serves its objects (``served_as``), keeping the cache's
    JSON of every object that serving leaves as it is."""
    stored_objects = result.objects
    objects = [served_as(rt, o) for o in stored_objects]
    encoded = None
    if result.encoded is not None:
        encoded = [
            json if served is stored else dumps(served)
            for served, stored, json in zip(objects, stored_objects, result.encoded, strict=True)
        ]
    return ListResult(
        decoded=objects,
        revision=result.revision,
        continue_token=result.continue_token,
        encoded=encoded,
    )


async def serve(
    request: web.Request, ctx: ApiContext, rt: ResourceType, opts: ListOptions
) -> web.Response:
    result = await list_objects(ctx, rt, opts)
    if rt.custom is not None or rt.conversion is not None:
        result = _served(rt, result)
    if wants_table(request.headers.get("Accept")):
        table = to_table(
            rt,
            result.objects,
            include_object=opts.include_object,
            resource_version=str(result.revision),
            continue_token=result.continue_token,
        )
        return json_response(table, content_type=TABLE_CONTENT_TYPE)
    return web.Response(body=_list_body(rt, result), headers={"Content-Type": JSON_CONTENT_TYPE})
