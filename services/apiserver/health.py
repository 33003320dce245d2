"""Health endpoints: ``/healthz``, ``/livez`` and ``/readyz``, as Kubernetes serves them.

``/livez`` and ``/healthz`` answer ``ok`` while the process serves HTTP. ``/readyz`` answers
``ok`` once every watch cache has loaded (lists with ``resourceVersion=0`` and watches can be
served) and 503 before that or while shutting down. ``?verbose`` lists the checks. The bodies
are kube-apiserver's multi-check format (``component.health.checks_response``).

Limits: no per-check paths (``/readyz/etcd``); the store is not probed on each request.
"""

from __future__ import annotations

from aiohttp import web

from component.health import checks_response
from services.apiserver.context import CONTEXT

__all__ = ["setup_health"]


async def _live(request: web.Request) -> web.Response:
    return checks_response("livez", [("ping", None)], verbose="verbose" in request.query)


async def _ready(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    pending = sorted(cache.rt.plural for cache in ctx.caches.values() if not cache.ready.is_set())
    checks: list[tuple[str, str | None]] = [("ping", None)]
    if pending:
        checks += [(f"watch-cache-{plural}", "not loaded yet") for plural in pending]
    else:
        checks.append(("watch-caches", None))
    return checks_response("readyz", checks, verbose="verbose" in request.query, failure_status=503)


def setup_health(app: web.Application) -> None:
    app.router.add_get("/healthz", _live)
    app.router.add_get("/livez", _live)
    app.router.add_get("/readyz", _ready)
