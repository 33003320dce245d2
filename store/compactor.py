"""The optional background compactor: keep the last N revisions of history, drop the rest.

Why: every write appends to the history, so a store that is never compacted grows forever.
Kubernetes' apiserver compacts etcd every 5 minutes (``--etcd-compaction-interval``); kubelite
does the same for any backend with ``keep_window``. The owner of the store (the apiserver)
starts it as a named task and cancels it before closing the store::

    task = asyncio.create_task(keep_window(store), name="store-compactor")

What it does not do: it never compacts past the current revision, and a watch or list that
asks for a revision older than the window afterwards fails with ``Compacted`` (410 Expired on
the wire) — the client relists, as client-go does.
"""

from __future__ import annotations

import asyncio
import logging
from typing import NoReturn

from store.base import Store, StoreClosed, StoreError

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_WINDOW", "compact_to_window", "keep_window"]

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 10_000
"""Revisions kept: a watch cache or informer may resume from any of the last 10 000 writes."""

DEFAULT_INTERVAL = 300.0
"""Seconds between compactions, as Kubernetes' default etcd compaction interval (5 min)."""


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
    store: Store, *, revisions: int = DEFAULT_WINDOW, interval: float = DEFAULT_INTERVAL
) -> NoReturn:
    """Forever: every ``interval`` seconds, compact ``store`` to its last ``revisions`` revisions.

    A failed compaction is logged (one line for a store error) and tried again at the next
    interval; a closed or failed store ends the task with ``StoreClosed`` / ``StoreFailed``.
    """
    if revisions < 1 or interval <= 0:
        raise ValueError(
            f"keep_window needs revisions >= 1 and interval > 0, got {revisions}, {interval}"
        )
    while True:
        await asyncio.sleep(interval)
        try:
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
