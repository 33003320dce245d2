"""Read, change, compare-and-swap write; on Conflict read again: client-go's ``RetryOnConflict``.

Why: every write in kubelite is a compare-and-swap on ``metadata.resourceVersion``. A controller
that edits an object someone else also writes (a pod the kubelet reports on, a node whose status
the kubelet posts, an owner the user edits) must not blindly PUT a copy from its cache: it reads
the newest state, applies its change, writes with that state's resourceVersion, and on a 409
does it again. That loop lives here once, for every controller in this process.

* ``await update_with_retry(client, rt, namespace=..., name=..., mutate=fn)``: ``fn(obj)``
  edits the fresh object in place and returns True to write it, False when nothing needs to
  change (then nothing is written and the fresh object is returned);
  ``subresource="status"`` PUTs to ``/status`` (or ``finalize`` for namespaces).
* ``NotFound`` propagates (the object is gone: the caller decides what that means); so does any
  other error. After ``attempts`` conflicts in a row the last ``Conflict`` propagates and the
  caller's work queue retries later with backoff.

Limits: the mutate function must be idempotent and cheap; it runs once per attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from api.errors import Conflict
from api.registry import ResourceType
from client.rest import ApiClient

__all__ = ["update_with_retry"]

log = logging.getLogger(__name__)

DEFAULT_ATTEMPTS = 5
"""client-go's retry.DefaultRetry allows 5 steps; a sixth conflict means real contention."""


async def update_with_retry(
    client: ApiClient,
    rt: ResourceType,
    *,
    namespace: str | None,
    name: str,
    mutate: Callable[[dict[str, Any]], bool],
    subresource: str | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
) -> dict[str, Any]:
    """The written object (or the fresh one, when ``mutate`` said there was nothing to do)."""
    for attempt in range(1, attempts + 1):
        obj = await client.get(rt, name, namespace=namespace)
        if not mutate(obj):
            return obj
        try:
            return await client.update(rt, obj, namespace=namespace, subresource=subresource)
        except Conflict:
            if attempt == attempts:
                raise
            log.debug(
                "update %s %s/%s conflicted; will re-read and retry (attempt %d/%d)",
                rt.kind, namespace or "", name, attempt + 1, attempts,
            )  # fmt: skip
    raise AssertionError("unreachable")  # pragma: no cover
