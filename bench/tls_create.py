"""ConfigMap creates per second over TLS with a client certificate, beside plain HTTP.

Why: with the secure port every request of every component pays for TLS and for
authentication (the client certificate's subject read on each request, the middleware in
front of every handler). The absolute figure depends on the machine; the ratio to plain HTTP
against the same apiserver process, in the same run, is what this measures.

* ``plain http``: creates on the insecure port (no TLS, no authentication);
* ``tls client cert``: the same creates on the secure port, authenticated by the admin
  certificate (``system:masters``), over keep-alive connections (the handshake is paid once
  per connection, as a component's long-lived session pays it).

Load: ``--concurrency`` (32) creates in flight, one ``aiohttp`` session per transport, for
``--seconds`` (3) each, against one real apiserver (memory store) on loopback.

Limits: the load generator shares the cores with the server; new-connection cost (a TLS
handshake per request) is not measured.

``python -m bench.tls_create [--seconds S] [--concurrency C]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import ssl
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import uvloop

from bench.harness import Context, Figure, collect_rounds, figure
from component import pki
from kubelite.testing import Processes

SCENARIO = "tls-create"


async def creates_per_second(
    url: str, *, tls: ssl.SSLContext | None, seconds: float, concurrency: int, prefix: str
) -> float:
    """Creates/s of small ConfigMaps at ``url`` with ``concurrency`` in flight for ``seconds``
    (``tls``: the client context for https; the audit-cost bench uses it too)."""
    names = itertools.count()
    done = 0
    connector = aiohttp.TCPConnector(limit=0, ssl=tls if tls is not None else False)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.monotonic() + seconds

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                body = {"metadata": {"name": f"{prefix}-{next(names)}"}, "data": {"k": "v"}}
                async with session.post(
                    f"{url}/api/v1/namespaces/default/configmaps", json=body
                ) as resp:
                    await resp.read()
                    if resp.status != 201:
                        raise RuntimeError(f"create answered {resp.status}")
                done += 1

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.monotonic() - started)


async def measure(*, seconds: float, concurrency: int, workdir: Path) -> dict[str, float]:
    """Creates/s over plain HTTP and over TLS with the admin's client certificate."""
    processes = Processes(workdir)
    try:
        api = await asyncio.to_thread(processes.apiserver, store="memory://", secure=True)
        assert api.state_dir is not None
        directory = api.state_dir / "pki"
        ca = pki.ensure_ca(directory)
        admin = pki.ensure_client_cert(
            ca, directory, name="admin", user="kubernetes-admin", groups=["system:masters"]
        )
        tls = ssl.create_default_context(cafile=ca.files.cert)
        tls.load_cert_chain(admin.cert, admin.key)
        secure_url = f"https://127.0.0.1:{api.port_of('secure')}"
        return {
            "plain http": await creates_per_second(
                api.url, tls=None, seconds=seconds, concurrency=concurrency, prefix="plain"
            ),
            "tls client cert": await creates_per_second(
                secure_url, tls=tls, seconds=seconds, concurrency=concurrency, prefix="tls"
            ),
        }
    finally:
        await asyncio.to_thread(processes.stop_all)


async def run(ctx: Context) -> list[Figure]:
    """The suite's scenario: TLS creates with plain HTTP of the same round as ceiling."""
    seconds = 1.0 if ctx.quick else 3.0

    async def once(index: int) -> dict[str, float]:
        workdir = ctx.workdir / f"{SCENARIO}-{index}"
        workdir.mkdir(parents=True, exist_ok=True)
        return await measure(seconds=seconds, concurrency=32, workdir=workdir)

    rounds = await collect_rounds(once, rounds=ctx.rounds)
    note = f"32 ConfigMap creates in flight, keep-alive, {seconds:g} s per figure"
    return [
        figure(SCENARIO, "plain http", unit="creates/s", samples=rounds["plain http"],
               note="the insecure port of the same apiserver"),
        figure(SCENARIO, "tls client cert", unit="creates/s", samples=rounds["tls client cert"],
               ceiling=f"{SCENARIO}/plain http", note=note),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tls_create", description=__doc__)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--concurrency", type=int, default=32)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kubelite-tls-bench-") as tmp:
        figures = uvloop.run(
            measure(seconds=args.seconds, concurrency=args.concurrency, workdir=Path(tmp))
        )
    plain = figures["plain http"]
    print(f"creates/s ({args.concurrency} in flight, {args.seconds:g}s each, loopback)")
    for name, rate in figures.items():
        print(f"  {name:16} {rate:8.0f}/s   {rate / plain:6.1%} of plain HTTP")
    return 0


if __name__ == "__main__":
    sys.exit(main())
