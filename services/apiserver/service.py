"""The apiserver as a component: its app served on the plain-HTTP port until told to stop.

What it owns (``ApiServer``, a ``component.Service``):

* ``start``: builds the app (``app.make_app``: opens the store), sets up its runner — which
  loads every watch cache before returning — and listens, behind one connection cap
  (``connections.CappedTCPSite``), on ``--insecure-bind-address:--insecure-port`` (plain HTTP;
  ``kubelite: apiserver api listening on http://HOST:PORT``) and on ``--bind-address:
  --secure-port`` (TLS from ``serving``; ``... secure listening on https://HOST:PORT``) —
  the same app on both; 0 picks a port, -1 leaves that port closed. A non-loopback insecure
  address is logged as a warning at every start;
* ``wait``: until the store fails for good (``storehealth``) or a background task ends
  (``app.BACKGROUND``), either of which stops the server with exit code 1 — the store's with
  one line saying what is wrong and what to do; SIGINT/SIGTERM cancel it (exit 0);
* ``stop``: ends every watch, stops the background tasks and closes the store, in that order
  (the app's ``on_shutdown`` and ``cleanup_ctx``).

A store that cannot be used at start-up (a damaged or unwritable file) is the same one line,
exit code 1.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from component.errors import Fatal
from component.listen import listen
from component.tasks import ended_error
from services.apiserver.app import BACKGROUND, make_app, start_background
from services.apiserver.connections import (
    CappedTCPSite,
    ConnectionCap,
    default_max_connections,
)
from services.apiserver.context import CONTEXT, ServerOptions
from services.apiserver.kubernetes_endpoints import advertised_address, keep_kubernetes_endpoints
from services.apiserver.serving import is_loopback, server_ssl_context, with_self_made_pki
from services.apiserver.storehealth import STORE_HEALTH
from store.base import StoreFailed

__all__ = ["ApiServer"]

log = logging.getLogger("kubelite.apiserver")


class ApiServer:
    def __init__(self, options: ServerOptions, *, access_log: bool = False) -> None:
        self.options = options
        self.access_log = access_log
        self.port: int | None = None
        self.secure_port: int | None = None
        self.app: web.Application | None = None
        self._runner: web.AppRunner | None = None

    def _store_failed(self, failure: StoreFailed) -> Fatal:
        return Fatal(f"store {self.options.store_url}: {failure}")

    async def start(self) -> None:
        pki_failure: OSError | None = None
        if self.options.secure_port != -1:
            try:
                self.options = with_self_made_pki(self.options)
            except OSError as exc:  # reported once the store had its say (below)
                pki_failure = exc
        options = self.options
        limit = options.max_open_connections
        cap = ConnectionCap(limit=default_max_connections() if limit is None else limit)
        try:
            self.app = app = make_app(options)
            runner = web.AppRunner(
                app,
                handler_cancellation=True,
                shutdown_timeout=5.0,
                access_log=logging.getLogger("aiohttp.access") if self.access_log else None,
                keepalive_timeout=options.request_header_timeout,  # connections.HEADER_TIMEOUT
            )
            await runner.setup()  # opens the store's users: every watch cache loads first
        except StoreFailed as failure:
            raise self._store_failed(failure) from None
        self._runner = runner
        if pki_failure is not None:  # an unusable state dir: the store's message came first
            raise Fatal(
                f"cannot make the secure port's certificates: {pki_failure} (pass --cert-dir, "
                "--tls-cert-file and --tls-private-key-file, or --secure-port=-1)"
            )

        def site(r: web.BaseRunner, host: str, port: int) -> web.BaseSite:
            return CappedTCPSite(r, host, port, cap=cap)

        if options.port != -1:
            if not is_loopback(options.bind_address):
                log.warning(
                    "the insecure port %s:%d serves everyone who reaches it as a superuser, "
                    "without authentication (--insecure-allow-remote)",
                    options.bind_address,
                    options.port,
                )
            self.port = await listen(
                runner,
                component="apiserver",
                endpoint="api",
                host=options.bind_address,
                port=options.port,
                flag="--insecure-port",
                site=site,
            )
        if options.secure_port != -1:
            tls = server_ssl_context(options)

            def secure_site(r: web.BaseRunner, host: str, port: int) -> web.BaseSite:
                return CappedTCPSite(r, host, port, cap=cap, ssl_context=tls)

            self.secure_port = await listen(
                runner,
                component="apiserver",
                endpoint="secure",
                host=options.secure_bind_address,
                port=options.secure_port,
                flag="--secure-port",
                site=secure_site,
                scheme="https",
            )
        served = self.secure_port if self.secure_port is not None else self.port
        bind = options.secure_bind_address if self.secure_port is not None else options.bind_address
        if served is not None:
            start_background(
                app,
                "kubernetes-endpoints",
                keep_kubernetes_endpoints(
                    app[CONTEXT], address=advertised_address(bind), port=served
                ),
            )
        log.info("store %s; state dir %s", options.store_url, options.state_dir)
        log.info(
            "limits: %s read-only and %s mutating requests in flight, %s open connections "
            "(0 = none), %.0f s for a request head",
            options.max_requests_inflight,
            options.max_mutating_requests_inflight,
            cap.limit,
            options.request_header_timeout,
        )

    async def wait(self) -> None:
        assert self.app is not None
        health = self.app[STORE_HEALTH]
        store_failed = asyncio.ensure_future(health.wait())
        ended = asyncio.ensure_future(self.app[BACKGROUND].first_ended())
        try:
            await asyncio.wait([store_failed, ended], return_when=asyncio.FIRST_COMPLETED)
        finally:
            store_failed.cancel()
            ended.cancel()
        if health.failure is not None:
            raise self._store_failed(health.failure)
        raise ended_error(ended.result(), owner="apiserver")

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            log.info("shutting down: ending watches, stopping background tasks, closing the store")
            await runner.cleanup()
