"""Which etcd v3 client the etcd store uses: gRPC (``aetcd``) or the JSON gateway (aiohttp).

Why this exists: issue 20 asks the etcd backend to measure both before picking one. This script
is that measurement, kept so that the choice can be checked again on another machine or a newer
client. It times, against one etcd member, the two operations the store does most:

* ``create``: a transaction ``create_revision(key) == 0 → put`` (what ``Store.create`` sends);
* ``get``: a single-key range.

Each runs ``-n`` times with ``--concurrency`` requests in flight, for each client, in one run.
``aetcd`` is not a kubelite dependency: install it beside the project to measure it
(``pip install --target DIR aetcd`` and put ``DIR`` on ``PYTHONPATH``); without it only the
gateway is measured.

Run: ``python -m bench.etcd_clients --endpoint 127.0.0.1:2379 [-n 2000] [--concurrency 16]``.
Prints a table; asserts nothing. It writes keys under ``/kubelite-bench-clients/`` and deletes
them afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

PREFIX = "/kubelite-bench-clients/"
VALUE = b"x" * 1024
"""About the size of a small pod's JSON, as in ``bench.store``."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


async def _timed(op: Callable[[int], Awaitable[object]], *, count: int, concurrency: int) -> float:
    """Operations per second running ``op(0..count-1)`` with ``concurrency`` in flight."""
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await op(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - started)


async def gateway(endpoint: str, *, count: int, concurrency: int) -> tuple[float, float]:
    run = uuid.uuid4().hex[:8]
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(f"http://{endpoint}", connector=connector) as http:

        async def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
            async with http.post(path, json=body) as resp:
                resp.raise_for_status()
                answer: dict[str, Any] = await resp.json()
                return answer

        def key(i: int) -> str:
            return _b64(f"{PREFIX}gw-{run}/{i}".encode())

        async def create(i: int) -> object:
            return await call(
                "/v3/kv/txn",
                {
                    "compare": [
                        {"key": key(i), "target": "CREATE", "result": "EQUAL", "create_revision": 0}
                    ],
                    "success": [{"request_put": {"key": key(i), "value": _b64(VALUE)}}],
                },
            )

        async def get(i: int) -> object:
            return await call("/v3/kv/range", {"key": key(i)})

        creates = await _timed(create, count=count, concurrency=concurrency)
        gets = await _timed(get, count=count, concurrency=concurrency)
        await call(
            "/v3/kv/deleterange",
            {"key": _b64(PREFIX.encode()), "range_end": _b64(PREFIX[:-1].encode() + b"0")},
        )
    return creates, gets


async def grpc(endpoint: str, *, count: int, concurrency: int) -> tuple[float, float] | None:
    try:
        aetcd: Any = importlib.import_module("aetcd")
    except ImportError:
        return None
    host, port = endpoint.rsplit(":", 1)
    run = uuid.uuid4().hex[:8]
    async with aetcd.Client(host=host, port=int(port)) as client:

        def key(i: int) -> bytes:
            return f"{PREFIX}grpc-{run}/{i}".encode()

        async def create(i: int) -> object:
            return await client.transaction(
                compare=[client.transactions.create(key(i)) == 0],
                success=[client.transactions.put(key(i), VALUE)],
                failure=[],
            )

        async def get(i: int) -> object:
            return await client.get(key(i))

        creates = await _timed(create, count=count, concurrency=concurrency)
        gets = await _timed(get, count=count, concurrency=concurrency)
        await client.delete_prefix(PREFIX.encode())
    return creates, gets


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.etcd_clients")
    parser.add_argument("--endpoint", default="127.0.0.1:2379", help="one etcd client address")
    parser.add_argument("-n", type=int, default=2000, help="operations per figure")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    args = parser.parse_args(argv)
    rows: list[tuple[str, tuple[float, float] | None]] = []
    for in_flight in (1, args.concurrency):
        rows.append(
            (f"gateway (aiohttp), {in_flight} in flight",
             await gateway(args.endpoint, count=args.n, concurrency=in_flight))
        )  # fmt: skip
        rows.append(
            (f"gRPC (aetcd), {in_flight} in flight",
             await grpc(args.endpoint, count=args.n, concurrency=in_flight))
        )  # fmt: skip
    print(f"{'client':<36} {'creates/s':>10} {'gets/s':>10}")
    for name, figures in rows:
        if figures is None:
            print(f"{name:<36} {'(aetcd not installed)':>21}")
        else:
            print(f"{name:<36} {figures[0]:>10.0f} {figures[1]:>10.0f}")


if __name__ == "__main__":
    asyncio.run(main())
