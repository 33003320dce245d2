"""The Event sweeper: Events live ``--event-ttl`` (default 1 h) after their last update.

Why: components record an Event for every scheduling failure, image pull and restart; nothing
ever deletes them, so without a time-to-live they would fill the store. Kubernetes gives Event
writes an etcd lease, and so does kubelite on etcd (the Events' ``ObjectStorage`` passes the TTL
with every write; ``store.etcd`` attaches a lease). SQLite and memory have no leases, so on every
backend a background task (owned by the app's cleanup context) deletes Events whose newest
timestamp (``lastTimestamp``, ``eventTime``, ``series.lastObservedTime`` or
``creationTimestamp``) is older than the TTL; on etcd it finds little left to do.

Each delete is guarded by the resourceVersion the sweeper saw, so an Event updated meanwhile
(its count bumped) survives to the next sweep.

Limits: expiry is checked every ``interval`` seconds (at most a minute), so an Event may outlive
its TTL by that much; timestamps come from the writers' clocks.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, NoReturn

from api.errors import Conflict, NotFound
from api.meta import parse_time
from services.apiserver.context import ApiContext
from store.base import StoreClosed

__all__ = ["expired_events", "sweep_events", "sweep_once"]

log = logging.getLogger(__name__)


def _last_seen(event: dict[str, Any]) -> datetime | None:
    candidates = [
        event.get("lastTimestamp"),
        event.get("eventTime"),
        (event.get("series") or {}).get("lastObservedTime")
        if isinstance(event.get("series"), dict)
        else None,
        (event.get("metadata") or {}).get("creationTimestamp"),
    ]
    moments = []
    for value in candidates:
        if isinstance(value, str) and value:
            try:
                moments.append(parse_time(value))
            except ValueError:
                continue
    return max(moments) if moments else None


def expired_events(
    events: list[dict[str, Any]], *, ttl: float, now: datetime
) -> list[dict[str, Any]]:
    out = []
    for event in events:
        seen = _last_seen(event)
        if seen is not None and (now - seen).total_seconds() > ttl:
            out.append(event)
    return out


async def sweep_once(ctx: ApiContext, *, ttl: float, now: datetime | None = None) -> int:
    """Delete every expired Event now; returns how many were deleted."""
    rt = ctx.resource("", "events")
    storage = ctx.storage(rt)
    page = await storage.list(None)
    deleted = 0
    for event in expired_events(page.items, ttl=ttl, now=now or datetime.now(UTC)):
        meta = event["metadata"]
        try:
            await storage.delete(
                meta.get("namespace"), meta["name"], expected_rv=int(meta["resourceVersion"])
            )
        except (NotFound, Conflict):
            continue
        deleted += 1
    return deleted


async def sweep_events(ctx: ApiContext, *, ttl: float, interval: float) -> NoReturn:
    """Forever: every ``interval`` seconds, delete the Events older than ``ttl``."""
    while True:
        await asyncio.sleep(interval)
        try:
            deleted = await sweep_once(ctx, ttl=ttl)
        except StoreClosed:
            raise
        except Exception:
            log.exception("event sweep failed; will retry in %.0f s", interval)
        else:
            if deleted:
                log.info("deleted %d expired events; next sweep in %.0f s", deleted, interval)
