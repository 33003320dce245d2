"""etcd store benchmark: creates/s through kubelite on etcd beside raw etcd writes, one run.

Why: the etcd backend's cost is only visible beside what etcd itself does on the same machine at
the same moment. One etcd member (``kubelite.testing.etcd``) serves three measurements, each
``-n`` creates of a ~1 KiB value with ``--concurrency`` in flight:

* ``raw etcd puts``: plain ``/v3/kv/put`` POSTs through aiohttp to etcd's JSON gateway — the
  same client the store uses, with no compare and no store on top (the ceiling);
* ``store.create``: ``store.etcd.EtcdStore.create`` in this process (txn on
  ``create_revision == 0``, as many in flight as ``--concurrency``, as the apiserver runs it);
* ``kubelite API creates``: ConfigMaps POSTed to a real apiserver process on ``--store etcd://``
  (validation, admission, JSON, HTTP, then the store).

Each ratio is the figure over the raw puts of the same run. Run:
``python -m bench.etcd_store [-n 1000] [--concurrency 16]``; needs the ``etcd`` binary
(``apt-get install etcd-server``). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import tempfile
from pathlib import Path

import aiohttp

from bench.store import drive
from kubelite.testing import Processes, etcd
from store import open_store

VALUE = "x" * 1024


async def raw_puts(endpoint: str, *, count: int, in_flight: int) -> float:
    value = base64.b64encode(VALUE.encode()).decode()
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(f"http://{endpoint}", connector=connector) as http:

        async def put(i: int) -> None:
            key = base64.b64encode(f"/bench-raw/{in_flight}/k{i}".encode()).decode()
            async with http.post("/v3/kv/put", json={"key": key, "value": value}) as resp:
                resp.raise_for_status()

        return await drive(put, count=count, in_flight=in_flight)


async def store_creates(endpoint: str, *, count: int, in_flight: int) -> float:
    store = open_store(f"etcd://{endpoint}?prefix=/bench-store-{in_flight}")
    try:
        return await drive(
            lambda i: store.create(f"/registry/bench/k{i}", VALUE.encode()),
            count=count,
            in_flight=in_flight,
        )
    finally:
        await store.close()


async def api_creates(server: str, *, count: int, in_flight: int) -> float:
    path = "/api/v1/namespaces/default/configmaps"
    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(server, connector=connector) as http:

        async def create(i: int) -> None:
            body = {"metadata": {"name": f"bench-{in_flight}-{i}"}, "data": {"v": VALUE}}
            async with http.post(path, json=body) as resp:
                resp.raise_for_status()

        return await drive(create, count=count, in_flight=in_flight)


async def run(*, count: int, concurrency: int) -> list[tuple[str, int, float, float]]:
    """Rows of (what, in flight, creates/s, ratio to raw etcd puts of the same run)."""
    rows: list[tuple[str, int, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="kubelite-bench-etcd-") as tmp:
        member = etcd.EtcdMember(Path(tmp) / "etcd")
        processes = Processes(Path(tmp) / "processes")
        await asyncio.to_thread(member.start)
        try:
            apiserver = await asyncio.to_thread(
                processes.apiserver, store=f"etcd://{member.endpoint}?prefix=/bench-api"
            )
            for in_flight in (1, concurrency):
                ceiling = await raw_puts(member.endpoint, count=count, in_flight=in_flight)
                rows.append(("raw etcd puts (gateway)", in_flight, ceiling, 1.0))
                for name, measure in (
                    ("store.create (EtcdStore)", store_creates(member.endpoint, count=count, in_flight=in_flight)),
                    ("kubelite API creates", api_creates(apiserver.url, count=count, in_flight=in_flight)),
                ):  # fmt: skip
                    figure = await measure
                    rows.append((name, in_flight, figure, figure / ceiling))
        finally:
            await asyncio.to_thread(processes.stop_all)
            await asyncio.to_thread(member.stop)
    return rows


def render(rows: list[tuple[str, int, float, float]]) -> str:
    lines = [f"{'what':<28} {'in flight':>9} {'creates/s':>10} {'x raw puts':>10}"]
    lines += [f"{name:<28} {n:>9} {rate:>10.0f} {ratio:>10.2f}" for name, n, rate, ratio in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.etcd_store")
    parser.add_argument("-n", type=int, default=1000, help="creates per figure")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    args = parser.parse_args(argv)
    print(render(asyncio.run(run(count=args.n, concurrency=args.concurrency))))


if __name__ == "__main__":
    main()
