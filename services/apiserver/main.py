"""``kubelite apiserver`` / ``python -m services.apiserver``: flags, event loop, serving.

Parses the flags into ``ServerOptions``, builds the app (``app.make_app``), serves it on uvloop
with an ``AppRunner`` + ``TCPSite`` until SIGINT/SIGTERM, then shuts down in order (watches end
first, then the background tasks, then the store).

With ``--insecure-port 0`` the OS picks a free port; the line
``apiserver listening on http://ADDRESS:PORT`` on stderr names it (tests and ``kubelite up``
read it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import uvloop
from aiohttp import web

from services.apiserver.app import make_app
from services.apiserver.connections import (
    HEADER_TIMEOUT,
    CappedTCPSite,
    ConnectionCap,
    default_max_connections,
)
from services.apiserver.context import ServerOptions
from services.apiserver.storehealth import STORE_HEALTH
from store.base import StoreFailed

__all__ = ["main", "parse_args", "serve"]

log = logging.getLogger("kubelite.apiserver")

READY_LINE = "apiserver listening on http://{host}:{port}"

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration (``1h``, ``30m``, ``1h30m``, ``90s``) or a plain number."""
    try:
        return float(text)
    except ValueError:
        pass
    match = _DURATION.match(text.strip())
    if not match or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (use e.g. 1h, 30m, 90s)")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range 0-65535")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative (0 means no limit)")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubelite apiserver",
        description="The kubelite apiserver: Kubernetes REST and watch over a pluggable store.",
    )
    p.add_argument(
        "--store",
        metavar="URL",
        help="store URL: sqlite:///path.db, sqlite://relative.db or memory:// "
        "(default: sqlite:///<state-dir>/kubelite.db)",
    )
    p.add_argument(
        "--state-dir",
        type=Path,
        default=Path(".kubelite"),
        help="state directory (default: ./.kubelite)",
    )
    p.add_argument(
        "--insecure-bind-address",
        default="127.0.0.1",
        help="address of the plain-HTTP port, no authentication (default: 127.0.0.1)",
    )
    p.add_argument(
        "--insecure-port",
        type=_port,
        default=8080,
        help="plain-HTTP port; 0 picks a free one (default: 8080)",
    )
    p.add_argument(
        "--secure-port",
        type=_port,
        default=0,
        help="HTTPS port with authentication; 0 turns it off. TLS and authentication arrive in "
        "a later release, so only 0 is accepted for now (default: 0)",
    )
    p.add_argument(
        "--event-ttl",
        type=parse_duration,
        default=3600.0,
        help="how long Events are kept after their last update (default: 1h)",
    )
    p.add_argument(
        "--compaction-window",
        type=int,
        default=10_000,
        help="store revisions kept for watch resumption and paging (default: 10000)",
    )
    p.add_argument(
        "--compaction-interval",
        type=parse_duration,
        default=300.0,
        help="time between store compactions (default: 5m)",
    )
    p.add_argument(
        "--watch-cache-size",
        type=int,
        default=10_000,
        help="events kept in memory per resource for resuming watches (default: 10000)",
    )
    p.add_argument(
        "--max-requests-inflight",
        type=_count,
        default=400,
        help="read-only requests served at once; more are answered 429 with Retry-After. "
        "Watches and other long-running requests are not counted. 0 = no limit (default: 400)",
    )
    p.add_argument(
        "--max-mutating-requests-inflight",
        type=_count,
        default=200,
        help="mutating requests (POST, PUT, PATCH, DELETE) served at once; more are answered "
        "429 with Retry-After. 0 = no limit (default: 200)",
    )
    p.add_argument(
        "--request-header-timeout",
        type=parse_duration,
        default=HEADER_TIMEOUT,
        help="time a connection gets to send a whole request head, and to stay idle between "
        "requests, before it is closed (default: 32s, kube-apiserver's)",
    )
    p.add_argument(
        "--max-open-connections",
        type=_count,
        default=None,
        help="open client connections; more are answered 503 with Retry-After and closed. "
        "0 = no limit (default: sized from the open-files limit, "
        f"now {default_max_connections()})",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default: INFO)",
    )
    p.add_argument("--access-log", action="store_true", help="log every request")
    return p


def parse_args(argv: Sequence[str]) -> tuple[ServerOptions, argparse.Namespace]:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.secure_port != 0:
        parser.error("--secure-port: TLS and authentication are not available yet; use 0")
    store_url = args.store or f"sqlite://{(args.state_dir / 'kubelite.db').resolve()}"
    try:
        options = ServerOptions(
            store_url=store_url,
            state_dir=args.state_dir,
            bind_address=args.insecure_bind_address,
            port=args.insecure_port,
            secure_port=args.secure_port,
            event_ttl=args.event_ttl,
            compaction_window=args.compaction_window,
            compaction_interval=args.compaction_interval,
            watch_cache_capacity=args.watch_cache_size,
            max_requests_inflight=args.max_requests_inflight,
            max_mutating_requests_inflight=args.max_mutating_requests_inflight,
            request_header_timeout=args.request_header_timeout,
            max_open_connections=args.max_open_connections,
        )
    except ValueError as exc:
        parser.error(str(exc))
    return options, args


async def serve(options: ServerOptions, *, access_log: bool = False) -> None:
    """Serve until SIGINT/SIGTERM, then shut down in order.

    Raises ``StoreFailed`` when the store cannot be used, at start-up or later (the server is
    shut down first).
    """
    app = make_app(options)
    runner = web.AppRunner(
        app,
        handler_cancellation=True,
        shutdown_timeout=5.0,
        access_log=logging.getLogger("aiohttp.access") if access_log else None,
        keepalive_timeout=options.request_header_timeout,  # see connections.HEADER_TIMEOUT
    )
    limit = options.max_open_connections
    cap = ConnectionCap(limit=default_max_connections() if limit is None else limit)
    await runner.setup()
    try:
        site = CappedTCPSite(runner, options.bind_address, options.port, cap=cap)
        await site.start()
        port = runner.addresses[0][1] if runner.addresses else options.port
        print(READY_LINE.format(host=options.bind_address, port=port), file=sys.stderr, flush=True)
        log.info("store %s; state dir %s", options.store_url, options.state_dir)
        log.info(
            "limits: %s read-only and %s mutating requests in flight, %s open connections "
            "(0 = none), %.0f s for a request head",
            options.max_requests_inflight,
            options.max_mutating_requests_inflight,
            cap.limit,
            options.request_header_timeout,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        signalled = asyncio.ensure_future(stop.wait())
        store_failed = asyncio.ensure_future(app[STORE_HEALTH].wait())
        await asyncio.wait([signalled, store_failed], return_when=asyncio.FIRST_COMPLETED)
        signalled.cancel()
        store_failed.cancel()
        log.info("shutting down: ending watches, stopping background tasks, closing the store")
    finally:
        await runner.cleanup()
    failure = app[STORE_HEALTH].failure
    if failure is not None:
        raise failure


def main(argv: Sequence[str] | None = None) -> int:
    options, args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        uvloop.run(serve(options, access_log=args.access_log))
    except StoreFailed as exc:
        print(f"kubelite apiserver: store {options.store_url}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"kubelite apiserver: {exc}", file=sys.stderr)
        return 1
    return 0
