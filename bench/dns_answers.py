"""DNS answers per second from ``kubelite dns`` beside a UDP echo ceiling, in the same run.

Why: every name a pod looks up goes through the cluster DNS — several queries per lookup with
``ndots:5`` — so its answer rate bounds how fast pods can find Services. A figure alone says
little on a shared machine, so the same load is also sent to a ceiling measured in the same
run: a UDP echo server (a process of its own, on uvloop, sending back each query's bytes), the
fastest any Python UDP server here could answer.

* ``cluster name``: ``web.default.svc.cluster.local`` A, asked again and again (after the first
  miss, the server's answer cache serves it — what a pod asking for the same Service sees);
* ``distinct names``: a different, nonexistent name each query (NXDOMAIN built by records.py
  and dnspython each time: the cost of a cache miss);
* ``echo ceiling``: the same queries to the echo server; the ratios are printed.

Load: ``--concurrency`` (64) queries in flight from this process, each on its own connected
UDP socket, for ``--seconds`` (3) per figure. Everything runs on loopback against a real
apiserver (memory store) and a real ``kubelite dns`` (port 0).

Limits: the load generator shares the machine's cores with the servers, so the figures are
relative; forwarding is not measured (it would measure the upstream).

``python -m bench.dns_answers [--seconds S] [--concurrency C]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import dns.message
import uvloop

from api.registry import REGISTRY
from bench.harness import Context, Figure, collect_rounds, figure
from client.rest import ApiClient
from kubelite.testing import Processes
from kubelite.testing.waiting import apoll_until

__all__ = ["SCENARIO", "main", "measure", "run"]

SCENARIO = "dns-answers"

DNS_IP = "127.128.0.10"
QUERY_TIMEOUT = 2.0


class _Client(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.reply: asyncio.Future[bytes] | None = None

    def datagram_received(self, data: bytes, addr: object) -> None:
        if self.reply is not None and not self.reply.done():
            self.reply.set_result(data)


async def _load(
    address: tuple[str, int], queries: Callable[[], bytes], *, seconds: float, concurrency: int
) -> float:
    """Answers per second with ``concurrency`` queries in flight for ``seconds``."""
    loop = asyncio.get_running_loop()
    answered = 0
    deadline = loop.time() + seconds

    async def worker() -> None:
        nonlocal answered
        transport, client = await loop.create_datagram_endpoint(_Client, remote_addr=address)
        try:
            while loop.time() < deadline:
                client.reply = loop.create_future()
                transport.sendto(queries())
                try:
                    await asyncio.wait_for(client.reply, QUERY_TIMEOUT)
                except TimeoutError:
                    continue
                answered += 1
        finally:
            transport.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return answered / (time.perf_counter() - started)


ECHO_SERVER = """
import asyncio, sys, uvloop
class Echo(asyncio.DatagramProtocol):
    def connection_made(self, t): self.t = t
    def datagram_received(self, data, addr): self.t.sendto(data, addr)
async def main():
    t, _ = await asyncio.get_running_loop().create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
    print(t.get_extra_info("sockname")[1], flush=True)
    await asyncio.Event().wait()
uvloop.run(main())
"""


async def measure(*, seconds: float, concurrency: int, workdir: Path) -> dict[str, float]:
    """Answers/s for the cluster name, for distinct names, and from the echo ceiling."""
    processes = Processes(workdir)
    echo = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ECHO_SERVER, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert echo.stdout is not None
        echo_port = int(await echo.stdout.readline())
        api = await asyncio.to_thread(processes.apiserver, store="memory://")
        server = await asyncio.to_thread(
            processes.dns, api.url, address=DNS_IP, args=["--upstream=127.0.0.1:9"]
        )
        async with ApiClient(server=api.url) as client:
            body = {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
            await client.create(REGISTRY.require("", "Service"), body, namespace="default")
        dns_address = (DNS_IP, server.port_of("dns"))
        same = dns.message.make_query("web.default.svc.cluster.local", "A").to_wire()

        async def known() -> bool:  # the server's informer may lag the create
            return bool(dns.message.from_wire(await _ask(dns_address, same)).answer)

        await apoll_until(known, what="the server to know web", every=0.1)
        counter = itertools.count()

        def distinct() -> bytes:
            name = f"n{next(counter)}.default.svc.cluster.local"
            return dns.message.make_query(name, "A").to_wire()

        figures = {
            "cluster name": await _load(
                dns_address, lambda: same, seconds=seconds, concurrency=concurrency
            ),
            "distinct names": await _load(
                dns_address, distinct, seconds=seconds, concurrency=concurrency
            ),
            "echo ceiling": await _load(
                ("127.0.0.1", echo_port), lambda: same, seconds=seconds, concurrency=concurrency
            ),
        }
    finally:
        echo.kill()
        await echo.wait()
        await asyncio.to_thread(processes.stop_all)
    return figures


async def run(ctx: Context) -> list[Figure]:
    """The suite's scenario: both answer rates with the echo server of the same round as ceiling."""
    seconds = 1.0 if ctx.quick else 3.0

    async def once(index: int) -> dict[str, float]:
        workdir = ctx.workdir / f"{SCENARIO}-{index}"
        workdir.mkdir(parents=True, exist_ok=True)
        return await measure(seconds=seconds, concurrency=64, workdir=workdir)

    rounds = await collect_rounds(once, rounds=ctx.rounds)
    ceiling = f"{SCENARIO}/echo ceiling"
    note = f"64 queries in flight over UDP on loopback, {seconds:g} s per figure"
    return [
        figure(SCENARIO, "echo ceiling", unit="answers/s", samples=rounds["echo ceiling"],
               note="a uvloop UDP echo server, same queries"),
        figure(SCENARIO, "cluster name", unit="answers/s", samples=rounds["cluster name"],
               ceiling=ceiling, note=note),
        figure(SCENARIO, "distinct names", unit="answers/s", samples=rounds["distinct names"],
               ceiling=ceiling, note="a new nonexistent name per query: the cache-miss cost"),
    ]  # fmt: skip


async def _ask(address: tuple[str, int], query: bytes) -> bytes:
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_datagram_endpoint(_Client, remote_addr=address)
    try:
        client.reply = loop.create_future()
        transport.sendto(query)
        return await asyncio.wait_for(client.reply, QUERY_TIMEOUT)
    finally:
        transport.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.dns_answers", description=__doc__)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--concurrency", type=int, default=64)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kubelite-dns-bench-") as tmp:
        figures = uvloop.run(
            measure(seconds=args.seconds, concurrency=args.concurrency, workdir=Path(tmp))
        )
    ceiling = figures["echo ceiling"]
    print(f"dns answers/s ({args.concurrency} in flight, {args.seconds:g}s each, UDP on loopback)")
    for name, rate in figures.items():
        print(f"  {name:15} {rate:10.0f}/s   {rate / ceiling:6.1%} of the echo ceiling")
    return 0


if __name__ == "__main__":
    sys.exit(main())
