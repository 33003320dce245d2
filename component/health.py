"""One health/metrics/readiness HTTP server for every component.

Why: the scheduler (``/healthz``, ``/livez``, ``/readyz``, ``/metrics`` on 10259), the
controller-manager (``/healthz``, ``/healthz/leaderElection`` on 10257) and the kubelet
(``/healthz`` on 10248) each serve a few probe endpoints on a port of their own. They differ in
*what* they check, never in *how* they serve: so one ``HealthServer`` binds (``component.listen``:
port 0 = any free port, -1 = off, a port in use ends the component with exit code 3), announces
its ``health`` endpoint on the ready line, and serves whatever routes the component adds.

Responses, as Kubernetes' components answer them:

* ``add_ok(paths)``: ``200 ok`` while the process serves HTTP (liveness);
* ``add_check(path, check)``: ``check()`` returns ``(healthy, text)``; the text is the body,
  with 200, or ``failure_status`` when unhealthy;
* ``add_metrics(path, render)``: Prometheus text format (``render()`` is the body, usually a
  ``component.metrics.Metrics``' page);
* ``checks_response``: kube-apiserver's multi-check format (``[+]ping ok`` ... ``readyz check
  passed``), for servers whose health endpoints list named checks (``?verbose``).

Not here: TLS, authentication (bind it to loopback), per-check sub-paths.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType

from aiohttp import web

from component.flags import BindAddress
from component.listen import listen
from component.metrics import CONTENT_TYPE

__all__ = [
    "Check",
    "Handler",
    "HealthServer",
    "check_handler",
    "checks_response",
    "metrics_handler",
    "ok_handler",
    "text_response",
]

log = logging.getLogger("kubelite.component")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Check = Callable[[], tuple[bool, str]]
"""A health check: ``(healthy, text)``."""


def text_response(body: str, *, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/plain")


async def ok_handler(request: web.Request) -> web.Response:
    return text_response("ok")


def check_handler(check: Check, *, failure_status: int = 500) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        healthy, text = check()
        return text_response(text, status=200 if healthy else failure_status)

    return handle


def metrics_handler(render: Callable[[], str]) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        return web.Response(
            body=render().encode(),
            headers={"Content-Type": CONTENT_TYPE, "X-Content-Type-Options": "nosniff"},
        )

    return handle


def checks_response(
    kind: str,
    checks: Sequence[tuple[str, str | None]],
    *,
    verbose: bool,
    failure_status: int = 500,
) -> web.Response:
    """kube-apiserver's answer for ``/livez`` or ``/readyz`` (``kind``) over named checks.

    ``checks`` are ``(name, failure)`` with ``failure`` None when the check passed. A pass is
    ``ok`` (or, ``verbose``, one ``[+]name ok`` line per check then ``<kind> check passed``); a
    failure always lists the checks (``[-]name failed: reason``) and answers
    ``failure_status``.
    """
    failed = any(failure is not None for _, failure in checks)
    if not failed and not verbose:
        return text_response("ok")
    lines = [
        f"[+]{name} ok" if failure is None else f"[-]{name} failed: {failure}"
        for name, failure in checks
    ]
    lines.append(f"{kind} check {'failed' if failed else 'passed'}")
    return text_response("\n".join(lines) + "\n", status=failure_status if failed else 200)


class HealthServer:
    """``HealthServer(component=..., address=...)``; add routes; ``await start()``; ``stop()``.

    Also an async context manager (start on enter, stop on exit). ``port`` is the port bound
    (None before start or when the address's port is -1: then nothing listens).
    """

    def __init__(
        self, *, component: str, address: BindAddress, flag: str = "--healthz-port"
    ) -> None:
        self.component = component
        self.address = address
        self.flag = flag
        self.app = web.Application()
        self.port: int | None = None
        self._paths: list[str] = []
        self._runner: web.AppRunner | None = None

    def add(self, path: str, handler: Handler) -> None:
        self.app.router.add_get(path, handler)
        self._paths.append(path)

    def add_ok(self, *paths: str) -> None:
        for path in paths:
            self.add(path, ok_handler)

    def add_check(self, path: str, check: Check, *, failure_status: int = 500) -> None:
        self.add(path, check_handler(check, failure_status=failure_status))

    def add_metrics(self, path: str, render: Callable[[], str]) -> None:
        self.add(path, metrics_handler(render))

    async def start(self) -> int | None:
        """Bind and serve; the port bound, or None when the server is off."""
        host, port = self.address.host, self.address.port
        if not self.address.enabled:
            log.info("health server off (%s=-1)", self.flag)
            return None
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        try:
            self.port = await listen(
                runner,
                component=self.component,
                endpoint="health",
                host=host,
                port=port,
                flag=self.flag,
            )
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("health server on port %d serves %s", self.port, ", ".join(self._paths))
        return self.port

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
