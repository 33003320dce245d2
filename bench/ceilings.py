"""Ceilings: what the bare tools do on this machine, measured in the same run as kubelite.

Why: every kubelite figure is printed as a ratio to one of these, so that "1,200 creates/s"
reads as "0.4 of what a plain aiohttp handler does here" whatever the machine. The ceilings:

* ``aiohttp POST`` / ``aiohttp GET``: ``bench.api``'s baseline server (plain aiohttp handlers
  doing the JSON work any server must do: decode, stamp, encode, keep in a dict), driven by the
  same client and concurrency as the apiserver scenarios. Every ceiling server does its JSON
  work with the apiserver's own codec functions (``services.apiserver.codec``: request bodies
  through ``decode_document``, stored bytes through ``loads``, every output through ``dumps``,
  compact orjson), so a ratio measures the apiserver's layers, not two JSON libraries;
* ``sqlite3 commit``: ``bench.store``'s plain ``sqlite3`` loop, WAL, one ``INSERT`` + ``COMMIT``
  per row at the store's own ``synchronous`` setting (FULL, the default);
* ``fan-out to W watchers``: a plain aiohttp server (this module, ``--serve-fanout``) that keeps
  every ``?watch=1`` response open and, for each POSTed object, encodes one ``ADDED`` line once
  and writes it to every open response (lines that arrive while a broadcast is under way go
  out together in the next chunk) — the least any chunked-push watch server does. It is
  driven by ``bench.api.measure_fanout`` (creates ``REQUEST_CONCURRENCY`` in flight, W
  watchers counting the events they really receive), the same driver as the apiserver's
  watch figure;
* ``load generator cpu``: the share of one core this process (the client) used while driving the
  POST ceiling. Near 100% means the client, not the server, set the ceiling — then the ratios
  flatter kubelite, and the note says so.

Limits: client and server share the machine's cores (2 here), as they do for kubelite; the
fan-out ceiling skips what a real watch server must also do (filtering, per-watcher queues,
resourceVersion bookkeeping), so the apiserver's ratio to it is an upper bound on overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bench.harness import Context, Figure, collect_rounds, figure

if TYPE_CHECKING:
    from bench.api import FanOut

__all__ = [
    "FANOUT_WATCHERS",
    "REQUEST_CONCURRENCY",
    "fanout",
    "request_count",
    "run",
    "serve_fanout",
]

REQUEST_CONCURRENCY = 32
"""Requests in flight for every req/s figure (ceiling and apiserver alike)."""
FANOUT_WATCHERS = (10, 100, 1000)


def request_count(ctx: Context) -> int:
    return 1000 if ctx.quick else 5000


def fanout_events(watchers: int, *, quick: bool) -> int:
    """Events per fan-out run: about 100,000 deliveries (10,000 quick), 50 to 500 events —
    fewer and the time to the first event (connection set-up) dominates the figure."""
    deliveries = 10_000 if quick else 100_000
    return max(50, min(500, deliveries // watchers))


# -- the fan-out ceiling server --------------------------------------------------------------


def serve_fanout() -> None:
    """A plain chunked-push server: list, watch (held open), POST = one line to every watcher.

    Lines are coalesced: POST handlers append their encoded line to ``pending`` and one
    broadcaster task writes everything pending as one chunk to each watcher — the batching any
    push server gets for free from a per-watcher queue, without which this "ceiling" is slower
    than the apiserver at 1,000 watchers."""
    import uvloop
    from aiohttp import web

    from services.apiserver.codec import decode_document, dumps

    watchers: set[web.StreamResponse] = set()
    pending: list[bytes] = []
    wake = asyncio.Event()
    revision = 1

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") not in ("1", "true"):
            listing = {
                "kind": "PodList",
                "metadata": {"resourceVersion": str(revision)},
                "items": [],
            }
            return web.Response(body=dumps(listing), content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        watchers.add(resp)
        try:
            await asyncio.Event().wait()  # held until the client goes away
        finally:
            watchers.discard(resp)
        return resp

    async def create(request: web.Request) -> web.Response:
        nonlocal revision
        obj = decode_document(await request.read(), media_type="application/json")
        meta = obj["metadata"]
        meta["namespace"] = request.match_info["ns"]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        revision += 1
        meta["resourceVersion"] = str(revision)
        data = dumps(obj)
        pending.append(b'{"type":"ADDED","object":' + data + b"}\n")
        wake.set()
        return web.Response(body=data, status=201, content_type="application/json")

    async def broadcast() -> None:
        while True:
            await wake.wait()
            wake.clear()
            chunk = b"".join(pending)
            pending.clear()
            for resp in list(watchers):
                try:
                    await resp.write(chunk)
                except ConnectionError:
                    watchers.discard(resp)

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{ns}/pods", pods)
        app.router.add_post("/api/v1/namespaces/{ns}/pods", create)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        broadcaster = asyncio.create_task(broadcast(), name="fan-out broadcaster")
        print(f"fan-out ceiling listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
        await broadcaster

    uvloop.run(main())


def fanout_argv() -> list[str]:
    return [sys.executable, "-m", "bench.ceilings", "--serve-fanout"]


# -- measuring -------------------------------------------------------------------------------


async def _requests(ctx: Context) -> dict[str, float]:
    from bench.api import baseline_argv, measure_requests, server_process

    async with server_process(baseline_argv()) as url:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        figures = await measure_requests(
            url,
            "ceiling",
            count=request_count(ctx),
            in_flight=REQUEST_CONCURRENCY,
            default_account=False,
        )
        cpu = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    by_op = {f.op: f for f in figures}
    return {
        "aiohttp POST": by_op["create"].per_s,
        "aiohttp POST p50": by_op["create"].p50_ms,
        "aiohttp POST p99": by_op["create"].p99_ms,
        "aiohttp GET": by_op["get"].per_s,
        "aiohttp GET p50": by_op["get"].p50_ms,
        "aiohttp GET p99": by_op["get"].p99_ms,
        "load generator cpu": cpu * 100,
    }


def _sqlite(ctx: Context, index: int) -> dict[str, float]:
    from bench.store import _sqlite_ceiling

    creates, updates = _sqlite_ceiling(
        ctx.workdir / f"ceiling-{index}-{time.monotonic_ns()}.db",
        synchronous="FULL",
        count=500 if ctx.quick else 2000,
    )
    return {"sqlite3 commit": creates, "sqlite3 update commit": updates}


async def fanout(url: str, *, watchers: int, quick: bool, apiserver: bool = True) -> FanOut:
    """``bench.api.measure_fanout`` with this suite's sizes (events really delivered); an
    ``apiserver`` gets its default ServiceAccount first, the ceiling server does not."""
    from bench.api import measure_fanout

    return await measure_fanout(
        url, watchers=watchers, events=fanout_events(watchers, quick=quick),
        in_flight=REQUEST_CONCURRENCY, default_account=apiserver,
    )  # fmt: skip


async def _fanout(ctx: Context) -> dict[str, float]:
    from bench.api import server_process

    out = {}
    for watchers in FANOUT_WATCHERS:
        async with server_process(fanout_argv()) as url:
            fan = await fanout(url, watchers=watchers, quick=ctx.quick, apiserver=False)
        out[f"fan-out to {watchers} watchers"] = fan.deliveries_per_s
    return out


_UNITS = {
    "aiohttp POST": "req/s",
    "aiohttp GET": "req/s",
    "sqlite3 commit": "commits/s",
    "sqlite3 update commit": "commits/s",
    "load generator cpu": "% of a core",
}


def unit_of(name: str) -> str:
    if name.endswith((" p50", " p99")):
        return "ms"
    if name.startswith("fan-out"):
        return "events/s"
    return _UNITS[name]


async def run(ctx: Context) -> list[Figure]:
    async def measure(index: int) -> dict[str, float]:
        values = await _requests(ctx)
        values |= await asyncio.to_thread(_sqlite, ctx, index)
        values |= await _fanout(ctx)
        return values

    samples = await collect_rounds(measure, rounds=ctx.rounds)
    figures = []
    for name, values in samples.items():
        note = ""
        if name == "load generator cpu" and max(values) > 90:
            note = "the client was near one full core: the req/s ceilings may be the client's"
        figures.append(figure("ceilings", name, unit=unit_of(name), samples=values, note=note))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ceilings", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--serve-fanout", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.serve_fanout:
        serve_fanout()
        return 0
    import tempfile

    import uvloop

    from bench.harness import Report, render

    with tempfile.TemporaryDirectory(prefix="kubelite-bench-ceilings-") as tmp:
        ctx = Context(quick=args.quick, rounds=1, workdir=Path(tmp))
        figures = uvloop.run(run(ctx))
    report = Report(command="python -m bench.ceilings", started=datetime.now(UTC), quick=args.quick,
                    rounds=1, figures=figures)  # fmt: skip
    print(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
