"""What the apiserver does when its store fails for good (``store.base.StoreFailed``).

Why: a damaged SQLite file does not mend itself. Retrying every second only fills the log
with the same traceback, and serving on means answering every request with the same error.
So the first sign of a failed store — a request, a watch cache or the compactor meeting
``StoreFailed`` — is logged once, that request is answered ``503 ServiceUnavailable`` with a
Status, and the server stops; ``main`` then exits non-zero with one line saying what is wrong
and what to do (the same line a fresh start over the damaged file prints, found at open).

What it owns: ``StoreHealth`` (the first failure, and a way to wait for it) under the
``STORE_HEALTH`` key, and the ``store_failures`` middleware.

Limits: only failures the store declares permanent stop the server; other store errors fail
the request at hand and the server goes on — an etcd store that stays unreachable past its
timeout (``StoreUnavailable``) as 503, or 504 ``Timeout`` when etcd kept timing out, and a
write over etcd's request limit (``RequestTooLarge``) as 413 in etcd's words.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from api.errors import RequestEntityTooLarge, ServiceUnavailable, Timeout
from store.base import RequestTooLarge, StoreFailed, StoreUnavailable

__all__ = ["STORE_HEALTH", "StoreHealth", "store_failures"]

log = logging.getLogger(__name__)


class StoreHealth:
    """The store's first permanent failure, if any; ``wait`` returns it when it happens."""

    def __init__(self) -> None:
        self.failure: StoreFailed | None = None
        self._failed = asyncio.Event()

    def report(self, failure: StoreFailed) -> None:
        """Record ``failure`` (only the first is logged) and wake ``wait``."""
        if self.failure is not None:
            return
        self.failure = failure
        log.error("the store has failed: %s; stopping the apiserver", failure)
        self._failed.set()

    async def wait(self) -> StoreFailed:
        await self._failed.wait()
        assert self.failure is not None
        return self.failure


STORE_HEALTH: web.AppKey[StoreHealth] = web.AppKey("store_health", StoreHealth)


@web.middleware
async def store_failures(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A request that met a failed store: 503 with a Status, and the server is told to stop."""
    try:
        return await handler(request)
    except StoreFailed as failure:
        request.app[STORE_HEALTH].report(failure)
        raise ServiceUnavailable(
            f"the storage of this apiserver has failed: {failure.problem}"
        ) from None
    except (
        StoreUnavailable
    ) as outage:  # etcd without quorum: this request fails, the server goes on
        if outage.timed_out:
            raise Timeout(
                f"Timeout: request did not complete within requested timeout - {outage}"
            ) from None
        raise ServiceUnavailable(str(outage)) from None
    except RequestTooLarge as refused:
        raise RequestEntityTooLarge(str(refused)) from None
