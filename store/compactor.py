"""The optional background compactor: keep the last N revisions of history, drop the rest.

Why: every write appends to the history, so a store that is never compacted grows forever.
Kubernetes' apiserver compacts etcd every 5 minutes (``--etcd-compaction-interval``); kubelite
does the same for any backend with ``keep_window``. The owner of the store (the apiserver)
starts it as a named task and cancels it before closing the store::

    task = asyncio.create_task(keep_window(store), name="store-compactor")

**Several apiservers on one store** (``keep_window(..., claim_key=...)``): each would compact
every interval, so, as Kubernetes' ``compact_rev_key``, a round first claims a key by
compare-and-swap on the revision this compactor last saw it at; when another compactor wrote
it meanwhile, this one adopts that revision and skips the round. One compactor (the first to
tick after the other's last claim) thus compacts per interval; the others only read the key.

What it does not do: it never compacts past the current revision, and a watch or list that
asks for a revision older than the window afterwards fails with ``Compacted`` (410 Expired on
the wire) — the client relists, as client-go does. The claim is not a lease: a compactor that
claims and then dies leaves that round's compaction undone, and the next round's claim is
open to whoever ticks first.
"""

from __future__ import annotations

import asyncio
import logging
from typing import NoReturn

from store.base import KeyExists, RevisionMismatch, Store, StoreClosed, StoreError

__all__ = [
    "CLAIM_KEY",
    "DEFAULT_INTERVAL",
    "DEFAULT_WINDOW",
    "CompactionClaim",
    "compact_to_window",
    "keep_window",
]

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 10_000
"""Revisions kept: a watch cache or informer may resume from any of the last 10 000 writes."""

DEFAULT_INTERVAL = 300.0
"""Seconds between compactions, as Kubernetes' default etcd compaction interval (5 min)."""

CLAIM_KEY = "/registry/kubelite/compact_rev_key"
"""The key compactors sharing a store claim each round with (Kubernetes' ``compact_rev_key``)."""


class CompactionClaim:
    """One compactor's view of the claim key: ``claim()`` is True when this compactor won the
    round (its compare-and-swap on the revision it last saw stuck)."""

    def __init__(self, store: Store, key: str = CLAIM_KEY) -> None:
        self.store = store
        self.key = key
        self.seen: int | None = None
        """The key's revision when this compactor last read or wrote it (None: never)."""

    async def claim(self) -> bool:
        current = await self.store.get(self.key)
        if current is None:
            try:
                self.seen = (await self.store.create(self.key, b"claimed")).mod_revision
            except KeyExists:
                return await self._adopt()
            return True
        if current.mod_revision != self.seen:  # another compactor claimed since we looked
            self.seen = current.mod_revision
            return False
        try:
            written = await self.store.update(
                self.key, b"claimed", expected_revision=current.mod_revision
            )
        except RevisionMismatch:
            return await self._adopt()
        self.seen = written.mod_revision
        return True

    async def _adopt(self) -> bool:
        kv = await self.store.get(self.key)
        self.seen = None if kv is None else kv.mod_revision
        return False


async def compact_to_window(store: Store, *, revisions: int = DEFAULT_WINDOW) -> int | None:
    """Compact ``store`` so that it keeps the last ``revisions`` revisions.

    Returns the revision compacted to, or None when there was nothing to drop yet.
    """
    target = await store.current_revision() - revisions
    if target <= await store.compacted_revision():
        return None
    await store.compact(target)
    return target


async def keep_window(
    store: Store,
    *,
    revisions: int = DEFAULT_WINDOW,
    interval: float = DEFAULT_INTERVAL,
    claim_key: str | None = None,
) -> NoReturn:
    """Forever: every ``interval`` seconds, compact ``store`` to its last ``revisions`` revisions.

    With ``claim_key``, a round compacts only when this compactor wins its claim
    (``CompactionClaim``): one compactor per round among all those sharing the store.
    A failed compaction is logged (one line for a store error) and tried again at the next
    interval; a closed or failed store ends the task with ``StoreClosed`` / ``StoreFailed``.
    """
    if revisions < 1 or interval <= 0:
        raise ValueError(
            f"keep_window needs revisions >= 1 and interval > 0, got {revisions}, {interval}"
        )
    claim = CompactionClaim(store, claim_key) if claim_key is not None else None
    while True:
        await asyncio.sleep(interval)
        try:
            if claim is not None and not await claim.claim():
                log.debug("another compactor claimed this round; next round in %.0f s", interval)
                continue
            target = await compact_to_window(store, revisions=revisions)
        except StoreClosed:
            raise  # closed, or failed for good (StoreFailed): retrying cannot help
        except StoreError as err:
            log.error("store compaction failed: %s; will retry in %.0f s", err, interval)
        except Exception:
            log.exception("store compaction failed; will retry in %.0f s", interval)
        else:
            if target is not None:
                log.info(
                    "store compacted to revision %d; next compaction in %.0f s", target, interval
                )
