"""The apiserver's middleware chain alone: its CPU per request, around a handler that does nothing.

Why: every request passes the same middlewares (metrics, Status errors, authentication,
authorization, store failures, priority and fairness) before its handler runs. Over real
sockets their cost hides among the handler's, aiohttp's I/O and the load of a shared machine;
here the chain of ``make_app``'s middlewares, composed as aiohttp composes them, runs in
this process around a handler answering an unprepared ``StreamResponse`` (nothing written),
so the CPU per request is the chain's own. The app is started (bootstrap objects, watch caches
filled), as a served request sees it; requests come from the insecure port (the superuser),
built beforehand by aiohttp's ``make_mocked_request`` over a transport without TLS.

Figures: process CPU per request, min and median over rounds of ``--count`` requests, for a
pod GET, a pod create and a status PUT. Run the same command on two trees back to back to
compare them.

Run: ``python -m bench.middleware [--count N] [--rounds R]``. Not a test (nothing is asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import statistics
import sys
import time
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer, make_mocked_request
from aiohttp.typedefs import Handler

from services.apiserver.app import make_app
from store.memory import MemoryStore

REQUESTS = (
    ("GET", "/api/v1/namespaces/default/pods/bench-000001"),
    ("POST", "/api/v1/namespaces/default/pods"),
    ("PUT", "/api/v1/namespaces/default/pods/bench-000001/status"),
)


class _PlainTransport:
    """A loopback connection without TLS: what the insecure port's requests arrive on."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(
            name, default
        )

    def is_closing(self) -> bool:
        return False


async def _nothing(request: web.Request) -> web.StreamResponse:
    return web.StreamResponse()


def _chain(app: web.Application) -> Handler:
    """``app``'s middlewares around ``_nothing``, outermost first, as aiohttp composes them."""
    handler: Handler = _nothing
    for middleware in reversed(app.middlewares):
        handler = functools.partial(middleware, handler=handler)
    return handler


async def _per_request(
    app: web.Application, chain: Handler, method: str, path: str, *, count: int
) -> float:
    """CPU µs per request over ``count`` requests (garbage collection held off meanwhile)."""
    transport = _PlainTransport()
    requests = [
        make_mocked_request(method, path, app=app, transport=transport) for _ in range(count)
    ]
    gc.collect()
    gc.disable()
    try:
        started = time.process_time()
        for request in requests:
            response = await chain(request)
            if response.status != 200:
                raise RuntimeError(f"{method} {path} answered {response.status}")
        return (time.process_time() - started) / count * 1e6
    finally:
        gc.enable()


async def run(*, count: int, rounds: int) -> str:
    app = make_app(store=MemoryStore())
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()  # bootstrap, watch caches: the state a served request sees
    try:
        chain = _chain(app)
        lines = [
            f"middleware chain CPU per request (µs), {rounds} rounds of {count}, insecure port",
            f"{'request':<60} {'min':>7} {'median':>7}",
        ]
        for method, path in REQUESTS:
            samples = [
                await _per_request(app, chain, method, path, count=count) for _ in range(rounds)
            ]
            lines.append(
                f"{method + ' ' + path:<60} {min(samples):>7.1f} {statistics.median(samples):>7.1f}"
            )
        return "\n".join(lines)
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.middleware", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--count", type=int, default=2000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per request")
    args = parser.parse_args(argv)
    print(asyncio.run(run(count=args.count, rounds=args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
