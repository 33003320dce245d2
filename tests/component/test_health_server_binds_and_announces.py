"""``component.health.HealthServer``: port 0 binds any free port and prints it on the ready
line; a port in use ends the component (``CannotListen``, exit code 3); -1 serves nothing."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from component.errors import EXIT_CANNOT_LISTEN, CannotListen
from component.flags import BindAddress
from component.health import HealthServer
from component.ready import Listening, parse_line


async def test_port_0_is_any_free_port_announced_on_the_ready_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = HealthServer(component="scheduler", address=BindAddress("127.0.0.1", 0))
    server.add_ok("/healthz", "/livez")
    server.add_check("/readyz", lambda: (False, "informers not synced"), failure_status=503)
    server.add_metrics("/metrics", lambda: "up 1\n")
    async with server:
        assert server.port
        [line] = capsys.readouterr().err.splitlines()
        assert parse_line(line) == Listening("scheduler", "health", "127.0.0.1", server.port)
        async with aiohttp.ClientSession(f"http://127.0.0.1:{server.port}") as session:
            async with session.get("/healthz") as r:
                assert (r.status, await r.text(), r.content_type) == (200, "ok", "text/plain")
            async with session.get("/readyz") as r:
                assert (r.status, await r.text()) == (503, "informers not synced")
            async with session.get("/metrics") as r:
                assert await r.text() == "up 1\n"
                assert r.headers["X-Content-Type-Options"] == "nosniff"


async def test_a_port_in_use_is_one_clear_error_with_its_own_exit_code() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = HealthServer(
            component="controller-manager", address=BindAddress("127.0.0.1", port)
        )
        with pytest.raises(CannotListen) as raised:
            await server.start()
    assert raised.value.exit_code == EXIT_CANNOT_LISTEN == 3
    assert str(raised.value) == (
        f"cannot listen on 127.0.0.1:{port} (--healthz-port): the port is in use by another "
        "process; stop that process, or pass --healthz-port=0 to take any free port"
    )
    assert server.port is None


async def test_port_minus_1_serves_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    server = HealthServer(component="kubelet", address=BindAddress("127.0.0.1", -1))
    server.add_ok("/healthz")
    assert await server.start() is None
    await server.stop()
    assert capsys.readouterr().err == ""
