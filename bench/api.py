"""apiserver benchmark: creates/s, gets/s and latency through the real apiserver, beside a plain
aiohttp handler doing the same JSON work in the same run; and watch fan-out events/s.

Why a baseline: requests/s alone says as much about the machine as about the apiserver. The
baseline is an aiohttp server (same process layout, same uvloop, same client) whose handlers do
the JSON work any server must do — decode the body, stamp uid/timestamp/resourceVersion,
encode, keep it in a dict, answer — and nothing else. ``ratio`` = apiserver / baseline, so the
cost of kubelite's layers (routing, validation, defaulting, admission, the store, the watch
cache) is what it shows. The baseline does its JSON work with the apiserver's own codec functions
(``services.apiserver.codec``: ``decode_document`` for request bodies, ``loads`` for stored
bytes, ``dumps`` — compact orjson — for every response), so the ratio is not a comparison of
two JSON libraries.

CPU per request: when ``measure_requests`` is given the server's pid it also reports the
server's CPU (user + system, ``/proc/<pid>/stat``) per create and per get — a figure a shared,
loaded machine changes far less than requests/s, so before/after comparisons use it.

Layout: each server runs as its own process (``python -m services.apiserver --store URL
--insecure-port 0``; the baseline is this module with ``--serve-baseline``), the client is this
process: two processes, two cores. Creates and gets are driven with ``--concurrency`` requests
in flight over keep-alive connections; latency percentiles are per request, client-measured.

Watch fan-out: W watchers (10, 100, 1000) stream ``/api/v1/namespaces/default/pods?watch=1``;
then E pods are created (``--concurrency`` in flight); the figure is the ``ADDED`` events the
watchers really received, all together, divided by the time from the first create to the last
event received — shown beside the create rate (``keeping up`` = delivered/s over W x creates/s:
1.0 when every watcher got every event as fast as they were written). A watcher the server
closes early (the apiserver closes one that falls behind) stops counting where it was closed,
so it lowers both figures; how many were closed is reported too.

Run: ``python -m bench.api [--quick] [-n N] [--concurrency C] [--watchers 10,100,1000]``.
Prints tables; not a test (nothing is asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from kubelite import commands

ROOT = Path(__file__).resolve().parent.parent
READY = re.compile(rb"listening on (http://[0-9.]+:\d+)")
"""The apiserver's ready line (``kubelite: apiserver api listening on ...``) and the baseline's."""


def pod_body(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{i:06d}", "labels": {"app": "bench", "shard": str(i % 8)}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "nginx:1.27",
                    "ports": [{"containerPort": 80}],
                    "env": [{"name": "INDEX", "value": str(i)}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ]
        },
    }


# -- the baseline server ---------------------------------------------------------------------


def serve_baseline() -> None:
    """A plain aiohttp app doing the same JSON work per request; prints its URL like ours."""
    import uvloop
    from aiohttp import web

    from services.apiserver.codec import decode_document, dumps, loads

    objects: dict[str, bytes] = {}
    revision = 0

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
        objects[f"{meta['namespace']}/{meta['name']}"] = data
        return web.Response(body=data, status=201, content_type="application/json")

    async def get(request: web.Request) -> web.Response:
        data = objects.get(f"{request.match_info['ns']}/{request.match_info['name']}")
        if data is None:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        obj = loads(data)  # decoded and encoded again, as the apiserver does
        return web.Response(body=dumps(obj), content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods", create)
        app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}", get)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        print(f"baseline listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()

    uvloop.run(main())


# -- processes -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def server_process(argv: list[str], *, pids: list[int] | None = None) -> AsyncIterator[str]:
    """Start a server process; yield its URL (read from its 'listening on' line). ``pids``, if
    given, gets the process's pid (for a profiler to attach to)."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    if pids is not None:
        pids.append(proc.pid)
    assert proc.stderr is not None
    try:
        url = None
        while url is None:
            line = await asyncio.wait_for(proc.stderr.readline(), 30)
            if not line:
                raise RuntimeError(f"server {argv} exited before listening")
            match = READY.search(line)
            if match:
                url = match.group(1).decode()
        drain = asyncio.create_task(_drain(proc.stderr))
        async with aiohttp.ClientSession() as session:
            for _ in range(300):
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"{url}/readyz") as resp:
                        if resp.status in (200, 404):
                            break
                await asyncio.sleep(0.02)
        yield url
        drain.cancel()
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


def apiserver_argv(store: str) -> list[str]:
    return commands.apiserver(store=store, port=0, secure_port=-1, log_level="WARNING").python()


def baseline_argv() -> list[str]:
    return [sys.executable, "-m", "bench.api", "--serve-baseline"]


# -- request load ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figure:
    target: str
    op: str
    per_s: float
    p50_ms: float
    p99_ms: float
    cpu_ms: float | None = None
    """The server's CPU per request (when its pid was known)."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process ``pid`` has used so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _drive(
    call: Callable[[int], Awaitable[None]], *, count: int, in_flight: int
) -> tuple[float, list[float]]:
    indices = iter(range(count))
    latencies: list[float] = []

    async def worker() -> None:
        for i in indices:
            start = time.perf_counter()
            await call(i)
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return count / (time.perf_counter() - start), latencies


async def create_default_account(session: aiohttp.ClientSession) -> None:
    """The ``default`` namespace's ``default`` ServiceAccount, as the controller-manager makes
    it in every cluster — without it each pod create takes ServiceAccount admission's miss path
    (a store read; Kubernetes reads too, then refuses the pod), which no pod create in a running
    cluster takes. Only for an apiserver: the baselines serve pods alone."""
    async with session.post(
        "/api/v1/namespaces/default/serviceaccounts", json={"metadata": {"name": "default"}}
    ) as resp:
        if resp.status not in (201, 409):
            raise RuntimeError(f"default ServiceAccount create answered {resp.status}")


async def measure_requests(
    url: str,
    target: str,
    *,
    count: int,
    in_flight: int,
    default_account: bool = True,
    pid: int | None = None,
) -> list[Figure]:
    """Creates, then gets, of ``count`` pods; ``default_account``: ``create_default_account``
    first (an apiserver; not the baseline); ``pid``: the server's, for its CPU per request."""
    bodies = [json.dumps(pod_body(i)).encode() for i in range(count)]
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(url, connector=connector) as session:
        if default_account:
            await create_default_account(session)

        async def create(i: int) -> None:
            async with session.post(
                "/api/v1/namespaces/default/pods",
                data=bodies[i],
                headers={"Content-Type": "application/json"},
            ) as resp:
                await resp.read()
                if resp.status != 201:
                    raise RuntimeError(f"create answered {resp.status}")

        async def get(i: int) -> None:
            async with session.get(f"/api/v1/namespaces/default/pods/bench-{i:06d}") as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"get answered {resp.status}")

        figures = []
        for op, call in (("create", create), ("get", get)):
            cpu = cpu_seconds(pid) if pid is not None else 0.0
            rate, latencies = await _drive(call, count=count, in_flight=in_flight)
            figures.append(
                Figure(
                    target,
                    op,
                    rate,
                    _percentile(latencies, 0.5) * 1e3,
                    _percentile(latencies, 0.99) * 1e3,
                    cpu_ms=(cpu_seconds(pid) - cpu) * 1e3 / count if pid is not None else None,
                )
            )
    return figures


# -- watch fan-out ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FanOut:
    watchers: int
    events: int
    """Events written (pod creates): what each watcher would receive if none were closed."""
    creates_per_s: float
    """How fast the events were produced (the creates, ``in_flight`` at a time)."""
    delivered: int
    """``ADDED`` events the watchers really received, all together (<= watchers x events)."""
    seconds: float
    """First create to the last event any watcher received."""
    closed: int = 0
    """Watchers whose stream ended before they had every event (closed by the server)."""

    @property
    def deliveries_per_s(self) -> float:
        """Events received by all watchers together, per second, first create to last receipt."""
        return self.delivered / self.seconds if self.seconds > 0 else 0.0

    @property
    def keeping_up(self) -> float:
        """1.0: every watcher received every event as fast as they were created."""
        return self.deliveries_per_s / (self.watchers * self.creates_per_s)


class EventCounter:
    """Counts the ``ADDED`` lines of one watch stream, whatever the chunk boundaries.

    A line split over two chunks is counted once, when its end arrives; ``ERROR`` lines (the
    Status a server sends as it closes a watch) and ``BOOKMARK`` lines are not events."""

    ADDED = b'{"type":"ADDED"'

    def __init__(self) -> None:
        self.count = 0
        self.last_at = 0.0
        """``time.perf_counter()`` when the last counted event's line was complete."""
        self._partial = b""

    def feed(self, chunk: bytes, *, now: float) -> int:
        """Count the complete lines ``chunk`` ends; returns the running count."""
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        added = sum(1 for line in lines if line.startswith(self.ADDED))
        if added:
            self.count += added
            self.last_at = now
        return self.count


async def measure_fanout(
    url: str, *, watchers: int, events: int, in_flight: int, default_account: bool = True
) -> FanOut:
    """``events`` pod creates (``in_flight`` at a time) delivered to ``watchers`` watchers;
    ``default_account``: ``create_default_account`` first (an apiserver; not the ceiling).

    Each watcher counts the events it really received (``EventCounter``) until it has them all
    or the server ends its stream; the figure is the sum, over the time to the last receipt."""
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:
        if default_account:
            await create_default_account(session)
        async with session.get("/api/v1/namespaces/default/pods") as resp:
            rv = (await resp.json())["metadata"]["resourceVersion"]
        streams = []
        for _ in range(watchers):
            streams.append(
                await session.get(
                    "/api/v1/namespaces/default/pods",
                    params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "600"},
                )
            )
        counters = [EventCounter() for _ in streams]

        async def consume(resp: aiohttp.ClientResponse, counter: EventCounter) -> None:
            async for chunk in resp.content.iter_any():
                if counter.feed(chunk, now=time.perf_counter()) >= events:
                    return

        consumers = [
            asyncio.create_task(consume(r, c), name=f"fan-out watcher {i}")
            for i, (r, c) in enumerate(zip(streams, counters, strict=True))
        ]
        bodies = [json.dumps(pod_body(1_000_000 + i)).encode() for i in range(events)]

        async def create(i: int) -> None:
            async with session.post(
                "/api/v1/namespaces/default/pods",
                data=bodies[i],
                headers={"Content-Type": "application/json"},
            ) as resp:
                await resp.read()

        start = time.perf_counter()
        creates_per_s, _ = await _drive(create, count=events, in_flight=in_flight)
        await asyncio.gather(*consumers)
        for resp in streams:
            resp.close()
    last = max((c.last_at for c in counters if c.count), default=start)
    return FanOut(
        watchers, events, creates_per_s,
        delivered=sum(c.count for c in counters), seconds=last - start,
        closed=sum(1 for c in counters if c.count < events),
    )  # fmt: skip


# -- the run ---------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> str:
    count = args.n or (300 if args.quick else 3000)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kubelite-bench-api-") as tmp:
        stores = [("memory", "memory://"), ("sqlite", f"sqlite:///{tmp}/api.db")]
        results: list[tuple[Figure, Figure]] = []
        for name, store in stores:
            pids: list[int] = []
            async with server_process(baseline_argv(), pids=pids) as url:
                base = await measure_requests(
                    url, "baseline", count=count, in_flight=args.concurrency,
                    default_account=False, pid=pids[-1],
                )  # fmt: skip
            async with server_process(apiserver_argv(store), pids=pids) as url:
                ours = await measure_requests(
                    url, f"apiserver {name}", count=count, in_flight=args.concurrency, pid=pids[-1]
                )
            results += list(zip(ours, base, strict=True))
        header = (
            f"{'target':<18} {'op':<7} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'cpu ms':>7}  "
            f"{'baseline/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'cpu ms':>7} {'ratio':>6}"
        )
        lines += [
            f"apiserver bench: {count} pods per op, {args.concurrency} requests in flight, "
            "client and server in separate processes",
            header,
            "-" * len(header),
        ]
        for ours_fig, base_fig in results:
            lines.append(
                f"{ours_fig.target:<18} {ours_fig.op:<7} {ours_fig.per_s:>9,.0f} {ours_fig.p50_ms:>8.2f} "
                f"{ours_fig.p99_ms:>8.2f} {ours_fig.cpu_ms or 0:>7.3f}  {base_fig.per_s:>10,.0f} "
                f"{base_fig.p50_ms:>8.2f} {base_fig.p99_ms:>8.2f} {base_fig.cpu_ms or 0:>7.3f} "
                f"{ours_fig.per_s / base_fig.per_s:>6.2f}"
            )
        lines.append(
            "baseline: plain aiohttp handlers doing the same JSON decode/stamp/encode into a dict; "
            "cpu ms: the server process's CPU per request"
        )
        lines.append("")
        lines.append(
            "watch fan-out (memory store): pod creates, "
            f"{args.concurrency} in flight, delivered to every watcher"
        )
        header = (
            f"{'watchers':>8} {'events':>7} {'creates/s':>10} {'deliveries':>10} "
            f"{'delivered/s':>12} {'keeping up':>10} {'closed':>7}"
        )
        lines += [header, "-" * len(header)]
        for watchers in args.watchers:
            events = 50 if args.quick else 500
            async with server_process(apiserver_argv("memory://")) as url:
                fan = await measure_fanout(
                    url, watchers=watchers, events=events, in_flight=args.concurrency
                )
            lines.append(
                f"{watchers:>8} {events:>7} {fan.creates_per_s:>10,.0f} {fan.delivered:>10,} "
                f"{fan.deliveries_per_s:>12,.0f} {fan.keeping_up:>10.2f} {fan.closed:>7}"
            )
        lines.append(
            "deliveries: events the watchers really received; keeping up: delivered/s over "
            "watchers x creates/s (1.00 = no watcher lagged or was closed)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.api", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N for a fast look")
    parser.add_argument("-n", type=int, default=None, help="pods per op (default 3000)")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="requests in flight (default 32)"
    )
    parser.add_argument(
        "--watchers",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[10, 100, 1000],
        help="watcher counts for the fan-out test (default 10,100,1000)",
    )
    parser.add_argument("--serve-baseline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_baseline:
        serve_baseline()
        return 0
    import uvloop

    print(uvloop.run(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
