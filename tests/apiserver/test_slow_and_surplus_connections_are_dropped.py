"""The real ``kubelite apiserver`` drops a client that never finishes its request head
(``--request-header-timeout``), and answers connections over ``--max-open-connections`` with a
503 ``Status`` instead of running into the file-descriptor limit; requests that did send their
head, watches included, are not cut; and it listens with the kernel's largest accept queue, so
a burst of new connections waits instead of losing SYNs."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

import aiohttp
import pytest

from kubelite.testing import ComponentProcess
from services.apiserver.connections import default_max_connections, listen_backlog
from tests.apiserver.conftest import EventReader
from tests.factories import pod

pytestmark = pytest.mark.e2e

PODS = "/api/v1/namespaces/default/pods"

CLOSE_BOUND = 60.0
"""Seconds a test waits for the server to close a connection: a bound for a hung test, far above
the 1 s timeout given to the server, not a claim about its speed."""


async def _closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends before it closes the connection."""
    return await asyncio.wait_for(reader.read(), CLOSE_BOUND)


async def test_half_a_request_line_is_dropped_and_a_watch_lives_on(apiserver_process: Any) -> None:
    server: ComponentProcess = await asyncio.to_thread(
        apiserver_process, store="memory://", args=["--request-header-timeout=1"]
    )
    async with aiohttp.ClientSession(server.url) as session:
        watch = await session.get(PODS, params={"watch": "1"})
        assert watch.status == 200
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"GET /api/v1/namesp")  # half a request line, then silence
            await writer.drain()
            assert await _closed_by_server(reader) == b""
        finally:
            writer.close()
        # the watch began before and outlived both: its request head was complete
        async with session.post(PODS, json=pod("still-watched")) as resp:
            assert resp.status == 201
        [event] = await EventReader(watch).take(1)
        assert event["object"]["metadata"]["name"] == "still-watched"
        watch.close()


async def test_connections_over_the_cap_get_503_and_the_server_serves_on(
    apiserver_process: Any,
) -> None:
    server: ComponentProcess = await asyncio.to_thread(
        apiserver_process,
        store="memory://",
        args=["--max-open-connections=2", "--request-header-timeout=1"],
    )
    # two kept-alive connections that have each been served: both are open and counted
    held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)]
    for reader, writer in held:
        writer.write(b"GET /version HTTP/1.1\r\nHost: a\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(
            next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(
                b":"
            )[1]
        )
        await reader.readexactly(length)

    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: a\r\n\r\n")
    answer = await _closed_by_server(reader)  # answered, then closed by the server
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 "), answer
    assert b"\r\nRetry-After: 1\r\n" in head
    status = json.loads(body)
    assert (status["kind"], status["reason"], status["code"]) == (
        "Status",
        "ServiceUnavailable",
        503,
    )
    assert status["details"] == {"retryAfterSeconds": 1}
    assert "limit of 2 open connections" in status["message"]

    # the held connections, idle past the header timeout, are closed by the server; their
    # slots free up, and a new client is served again
    for held_reader, held_writer in held:
        assert await _closed_by_server(held_reader) == b""
        held_writer.close()
    async with aiohttp.ClientSession(server.url) as session:
        async with session.get(PODS) as resp:
            assert resp.status == 200
    assert server.log_path.read_text().count("refusing new ones with 503") == 1


def test_default_cap_leaves_room_below_the_open_files_limit() -> None:
    assert default_max_connections(nofile=1024) == (1024 - 64) * 3 // 4
    assert 0 < default_max_connections() < 1 << 20


async def test_it_listens_with_the_kernels_accept_queue(apiserver_process: Any) -> None:
    ss = shutil.which("ss")
    if ss is None:
        pytest.skip("needs ss (iproute2) to read a listening socket's backlog")
    server: ComponentProcess = await asyncio.to_thread(apiserver_process, store="memory://")
    proc = await asyncio.create_subprocess_exec(
        ss, "-ltnH", f"sport = :{server.port}", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    # State Recv-Q Send-Q Local Peer: for a listening socket Send-Q is its backlog
    [line] = out.decode().splitlines()
    assert int(line.split()[2]) == listen_backlog() > 128
