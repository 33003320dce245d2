"""Request concurrency limits, as kube-apiserver's ``--max-requests-inflight`` and
``--max-mutating-requests-inflight``.

Why: without a limit, every request that arrives is started at once. Five hundred concurrent
LISTs of 3,000 pods each hold their own copy of the result, so memory grows past a GiB and every
client waits 30 s, while none is told to back off. With a limit, the requests over it are answered
at once with ``429 TooManyRequests``, ``Retry-After: 1`` and a ``Status`` whose message is
kube-apiserver's ("Too many requests, please try again later.") and whose
``details.retryAfterSeconds`` is 1. client-go and kubectl wait that long and try again.

What counts, as in kube-apiserver's max-in-flight filter:

* two separate pools: **mutating** requests (POST, PUT, PATCH, DELETE: every verb but get, list
  and watch) and **read-only** ones (GET, HEAD, OPTIONS);
* **long-running** requests take no slot: watches (``?watch=1`` / ``true`` or a ``/watch/``
  path) and the subresources ``log``, ``exec``, ``attach``, ``portforward`` and ``proxy``, on the
  list kube-apiserver gives its ``BasicLongRunningRequestCheck`` (so ``pods/log`` is exempt with or
  without ``follow``);
* the probes ``/healthz``, ``/livez`` and ``/readyz`` take no slot either: Kubernetes' priority
  and fairness (on by default) exempts them, so an overloaded server still says it is alive;
* a limit of 0 means no limit for that pool.

A slot is held from the moment the request has been routed until its response body has been
handed to the connection (the middleware writes a ready ``web.Response`` itself, so a client
that reads slowly keeps its slot, as in Go, where the handler writes the body); a request turned
away was never started. Middlewares outside this one must therefore not change successful
responses (the Status-rendering one only renders exceptions).

Limits: no queuing and no fairness between clients; a request over the limit is refused at
once, never held back. This filter runs only with ``--enable-priority-and-fairness=false``:
by default API Priority and Fairness (``flowcontrol``) takes its place, with the same
long-running rule, the same 429 and ``served``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from api.errors import BadRequest, TooManyRequests
from services.apiserver.query import parse_bool

__all__ = [
    "LONG_RUNNING_SUBRESOURCES",
    "RETRY_AFTER_SECONDS",
    "TOO_MANY_REQUESTS",
    "InflightLimits",
    "is_long_running",
    "is_mutating",
    "is_probe",
    "limit_inflight",
    "served",
]

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS: Final = 1
"""kube-apiserver's fixed ``Retry-After`` for a request turned away by the limit."""

TOO_MANY_REQUESTS: Final = "Too many requests, please try again later."

LONG_RUNNING_SUBRESOURCES: Final = frozenset({"log", "exec", "attach", "portforward", "proxy"})

_READ_ONLY_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_PROBES: Final = frozenset({"/healthz", "/livez", "/readyz"})
_NAMESPACE_SUBRESOURCES: Final = frozenset({"status", "finalize"})


def is_mutating(method: str) -> bool:
    """Whether a request of ``method`` draws on the mutating pool."""
    return method.upper() not in _READ_ONLY_METHODS


def _resource_parts(path: str) -> list[str] | None:
    """The parts after ``/api/{version}`` or ``/apis/{group}/{version}``; None if not a resource."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        return parts[2:]
    if len(parts) >= 4 and parts[0] == "apis":
        return parts[3:]
    return None


def is_probe(path: str) -> bool:
    """``/healthz``, ``/livez``, ``/readyz`` or one of their checks."""
    return path.rstrip("/") in _PROBES or path.startswith(("/healthz/", "/livez/", "/readyz/"))


def is_long_running(request: web.BaseRequest) -> bool:
    """A watch, a long-running subresource, or a probe: takes no in-flight slot."""
    path = request.path
    if is_probe(path):
        return True
    parts = _resource_parts(path)
    if parts is None:
        return False
    if parts[0] == "watch":
        return True
    if parts[0] == "proxy":
        return True  # the deprecated /api/v1/proxy/... paths
    try:
        if request.method == "GET" and parse_bool(request.query.get("watch"), name="watch"):
            return True
    except BadRequest:
        pass  # the handler answers 400 for it, as a short request
    # /namespaces/{ns}/{resource}/{name}/{subresource}, as kube-apiserver's RequestInfo parses it
    if parts[0] == "namespaces" and len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
        parts = parts[2:]
    return len(parts) >= 3 and parts[2] in LONG_RUNNING_SUBRESOURCES


@dataclass(slots=True)
class Pool:
    """One pool of slots: its limit (0 = none) and how many are taken right now."""

    limit: int
    taken: int = 0

    def __post_init__(self) -> None:
        if self.limit < 0:
            raise ValueError("in-flight limits must be >= 0 (0 means no limit)")

    def slot(self) -> Pool:
        """Hold one slot for the ``with`` block; ``TooManyRequests`` when none is free. (The
        pool is its own context manager: every request takes a slot, and a generator-based
        one costs several times more.)"""
        return self

    def __enter__(self) -> None:
        if self.limit and self.taken >= self.limit:
            raise TooManyRequests(TOO_MANY_REQUESTS, retry_after_seconds=RETRY_AFTER_SECONDS)
        self.taken += 1

    def __exit__(self, *exc_info: object) -> None:
        self.taken -= 1


class InflightLimits:
    """The two pools, read-only and mutating."""

    def __init__(self, *, max_read_only: int, max_mutating: int) -> None:
        self.read_only = Pool(max_read_only)
        self.mutating = Pool(max_mutating)


async def served(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The handler's response, its body already written when it is a plain ``web.Response``."""
    response = await handler(request)
    if isinstance(response, web.Response) and not response.prepared:
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError:
            pass  # the client left; aiohttp's own finishing step notes it quietly
    return response


def limit_inflight(limits: InflightLimits) -> Middleware:
    """The middleware enforcing ``limits``; place it inside the Status-rendering middleware."""

    @web.middleware
    async def inflight(request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_long_running(request):
            return await handler(request)
        pool = limits.mutating if is_mutating(request.method) else limits.read_only
        with pool.slot():
            return await served(request, handler)

    return inflight
