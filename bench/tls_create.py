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

import asyncio
import ssl
import sys
from pathlib import Path

from bench.harness import Context, Figure, figure
from bench.writes import compare_main, configmap_creates, suite_rounds, writes_per_second
from component import pki
from kubelite.testing import Processes

SCENARIO = "tls-create"


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
            "plain http": await writes_per_second(
                api.url,
                configmap_creates("plain"),
                seconds=seconds,
                concurrency=concurrency,
                expect=201,
            ),
            "tls client cert": await writes_per_second(
                secure_url,
                configmap_creates("tls"),
                seconds=seconds,
                concurrency=concurrency,
                expect=201,
                tls=tls,
            ),
        }
    finally:
        await asyncio.to_thread(processes.stop_all)


async def run(ctx: Context) -> list[Figure]:
    """The suite's scenario: TLS creates with plain HTTP of the same round as ceiling."""
    rounds, seconds = await suite_rounds(ctx, SCENARIO, measure)
    note = f"32 ConfigMap creates in flight, keep-alive, {seconds:g} s per figure"
    return [
        figure(SCENARIO, "plain http", unit="creates/s", samples=rounds["plain http"],
               note="the insecure port of the same apiserver"),
        figure(SCENARIO, "tls client cert", unit="creates/s", samples=rounds["tls client cert"],
               ceiling=f"{SCENARIO}/plain http", note=note),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return compare_main(
        argv, prog="python -m bench.tls_create", description=__doc__, measure=measure,
        unit="creates/s",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
