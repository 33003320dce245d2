"""The HTTP transport under ``ApiClient``: one session, the rate limit, retries where safe.

Why a module of its own: what may be retried, how long to wait and what a lost connection means
are decisions about HTTP, independent of which verb or resource is asked for. They are taken
here once, for plain requests and for watch openings alike.

What it owns:

* one ``aiohttp.ClientSession`` (created on first use, closed by ``close()``), no connection
  limit in aiohttp, since every watch holds a connection for minutes; default headers (Accept,
  User-Agent, a bearer token);
* ``ClientConfig.max_connections``: at most that many requests other than watches in flight,
  so at most that many connections for them (a finished request's connection goes back to the
  pool and the next request takes it). A request beyond waits for a slot in FIFO order *before*
  its timeout starts and before anything is sent, so a write that waited is still one that
  was never sent; a request waiting out a retry back-off holds no slot. Watches take no slot.
  Off by default (Go's ``MaxConnsPerHost`` 0); a sim kubelet hosting thousands of nodes sets
  it, where a real kubelet would send everything over one HTTP/2 connection;
* ``ClientConfig.qps``: a token bucket every request (watches included) passes; off by default;
* **retries**: an idempotent request (GET by default) that fails to connect, or gets 429/503,
  is retried (``read_retries`` times, jittered backoff, honouring ``Retry-After``). A write that
  got 429 is retried too (the server did not act on it); a write that lost its connection is
  *not* — its outcome is unknown, so ``ApiUnreachable`` is raised and the caller re-reads;
* ``watch_opener``: opening a watch response, whose errors become the same typed errors;
* **failover** (``ClientConfig.other_servers``, ``--server a,b``): a request that cannot reach
  the current apiserver turns to the next one, and so does every later request. A connection
  that was never made carried nothing, so any request — a write too — is tried again at once
  on the next apiserver; a lost connection still follows the rules above (a read is retried
  there, a write raises ``ApiUnreachable``); a watch that cannot be opened raises, and the
  reflector's next attempt goes to the next apiserver.

What it does not guarantee: no retry on Conflict (every write is a compare-and-swap: callers
re-read); a watch opening is never retried here (the reflector backs off).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp

from api.errors import StatusError
from client import codec
from client.backoff import Backoff, BackoffPolicy
from client.kubeconfig import ClientConfig
from client.ratelimit import TokenBucket
from client.responses import ApiUnreachable, decode_body, error_from, retry_after

__all__ = ["Transport"]

READ_RETRY = BackoffPolicy(initial=0.2, factor=2.0, cap=5.0, jitter=0.5, reset_after=60.0)
"""Back-off between retries of one request."""
WATCH_GRACE = 60.0
"""The server ends a watch after timeoutSeconds; the client gives up this much later, so a
half-open connection cannot hang a reflector forever."""

log = logging.getLogger("client.rest")


class Transport:
    """Sends requests to one apiserver at a time (``config.server``, then
    ``config.other_servers`` in turn when it cannot be reached)."""

    def __init__(
        self, config: ClientConfig, *, session: aiohttp.ClientSession | None = None
    ) -> None:
        self.config = config
        self.servers = [url.rstrip("/") for url in (config.server, *config.other_servers)]
        self._current = 0
        self._session = session
        self._owns_session = session is None
        self._limiter = (
            TokenBucket(qps=config.qps, burst=config.burst) if config.qps is not None else None
        )
        self._slots: AbstractAsyncContextManager[None] = (
            contextlib.nullcontext()
            if config.max_connections is None
            else asyncio.Semaphore(config.max_connections)
        )
        """One slot per request in flight under ``max_connections``."""
        headers = {"Accept": "application/json", "User-Agent": config.user_agent}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        self._headers = headers
        self._timeout = aiohttp.ClientTimeout(total=config.request_timeout)
        """Every request's timeout, built once (the config is frozen)."""

    @property
    def server(self) -> str:
        """The apiserver requests go to now."""
        return self.servers[self._current]

    def _fail_over(self, failed: str, exc: BaseException) -> bool:
        """Turn to the next apiserver after ``failed`` could not be reached (unless another
        request already turned); False when there is no other."""
        if len(self.servers) == 1:
            return False
        if self.server == failed:
            self._current = (self._current + 1) % len(self.servers)
            log.warning(
                "apiserver %s cannot be reached (%s); turning to %s",
                failed,
                str(exc) or type(exc).__name__,
                self.server,
            )
        return True

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, ssl=self.config.ssl_context() or True)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers)
            self._owns_session = True
        return self._session

    async def close(self) -> None:
        if self._session is not None and self._owns_session:
            await self._session.close()
        self._session = None

    async def _send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str] | None,
        data: bytes | None,
        headers: Mapping[str, str] | None,
    ) -> tuple[Any, StatusError | None, float | None]:
        """One attempt: (decoded answer, None, None) or (None, its error, its retry hint)."""
        async with self.session.request(
            method, url, params=params, data=data, headers=headers, timeout=self._timeout
        ) as resp:
            payload = await resp.read()
            if resp.status < 400:
                return decode_body(payload, resp.content_type), None, None
            error = error_from(resp.status, payload, resp.content_type)
            return None, error, retry_after(resp, error)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        idempotent: bool | None = None,
    ) -> Any:
        """Send one request; the decoded JSON (or text) answer, or a raised ``StatusError``."""
        idempotent = method == "GET" if idempotent is None else idempotent
        data = None if body is None else codec.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else None
        attempts = 1 + max(0, self.config.read_retries, len(self.servers) - 1)
        backoff = Backoff(READ_RETRY)
        for attempt in range(1, attempts + 1):
            if self._limiter is not None:
                await self._limiter.acquire()
            async with self._slots:  # the apiserver is chosen once a connection may be taken
                server = self.server
                try:
                    answer, error, hint = await self._send(
                        method, server + path, params=params, data=data, headers=headers
                    )
                except (TimeoutError, aiohttp.ClientConnectionError) as exc:
                    never_sent = isinstance(exc, aiohttp.ClientConnectorError)
                    turned = self._fail_over(server, exc)
                    if (not idempotent and not never_sent) or attempt == attempts:
                        raise ApiUnreachable(
                            f"{method} {path}: {str(exc) or type(exc).__name__}"
                        ) from exc
                    if turned and never_sent:
                        continue  # nothing reached the failed one: try the next one at once
                    what = f"failed ({str(exc) or type(exc).__name__})"
                    hint = None
                else:
                    if error is None:
                        return answer
                    retryable = error.code == 429 or (error.code == 503 and idempotent)
                    if not retryable or attempt == attempts:
                        raise error
                    what = f"answered {error.code} {error.reason}"
            delay = hint if hint is not None else backoff.next_delay()
            log.info(
                "%s %s %s; will retry in %.1fs (attempt %d/%d)",
                method,
                path,
                what,
                delay,
                attempt + 1,
                attempts,
            )
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def watch_opener(
        self, path: str, *, params: Mapping[str, str], timeout_seconds: int | None
    ) -> Callable[[], Awaitable[aiohttp.ClientResponse]]:
        """A function that opens the watch response (raising typed errors); called by the
        ``WatchStream`` on ``async with`` / first iteration."""
        total = None if timeout_seconds is None else timeout_seconds + WATCH_GRACE
        timeout = aiohttp.ClientTimeout(total=total, sock_connect=self.config.request_timeout)

        async def opener() -> aiohttp.ClientResponse:
            if self._limiter is not None:
                await self._limiter.acquire()
            server = self.server
            try:
                resp = await self.session.get(server + path, params=params, timeout=timeout)
            except (TimeoutError, aiohttp.ClientConnectionError) as exc:
                self._fail_over(server, exc)
                raise ApiUnreachable(f"watch {path}: {str(exc) or type(exc).__name__}") from exc
            if resp.status >= 400:
                try:
                    payload = await resp.read()
                except (TimeoutError, aiohttp.ClientError) as exc:
                    raise ApiUnreachable(f"watch {path}: {exc}") from exc
                finally:
                    resp.release()
                raise error_from(resp.status, payload, resp.content_type)
            return resp

        return opener
