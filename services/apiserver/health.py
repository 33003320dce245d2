"""Health endpoints: ``/healthz``, ``/livez`` and ``/readyz``, as Kubernetes serves them.

``/livez`` and ``/healthz`` answer ``ok`` while the process serves HTTP. ``/readyz`` answers
``ok`` once every watch cache has loaded (lists with ``resourceVersion=0`` and watches can be
served) and 503 before that or while shutting down. ``?verbose`` lists the checks.

Limits: no per-check paths (``/readyz/etcd``); the store is not probed on each request.
"""

from __future__ import annotations

from aiohttp import web

from services.apiserver.context import CONTEXT

__all__ = ["setup_health"]


def _text(body: str, *, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/plain")


async def _live(request: web.Request) -> web.Response:
    if "verbose" in request.query:
        return _text("[+]ping ok\nlivez check passed\n")
    return _text("ok")


async def _ready(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    pending = sorted(cache.rt.plural for cache in ctx.caches.values() if not cache.ready.is_set())
    lines = ["[+]ping ok"]
    lines += [f"[-]watch-cache-{plural} failed: not loaded yet" for plural in pending]
    if pending:
        return _text("\n".join(lines) + "\nreadyz check failed\n", status=503)
    if "verbose" in request.query:
        return _text("\n".join([*lines, "[+]watch-caches ok"]) + "\nreadyz check passed\n")
    return _text("ok")


def setup_health(app: web.Application) -> None:
    app.router.add_get("/healthz", _live)
    app.router.add_get("/livez", _live)
    app.router.add_get("/readyz", _ready)
