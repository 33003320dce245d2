"""The built-in web server behind ``nginx`` images says what it is: ``kubelite-webserver`` with
kubelite's version, the same for every tag, never ``nginx/<some version>``.

Started exactly as the image catalog starts it (argv and env from ``ImageCatalog.lookup``), on
a free loopback port; the test awaits its "start worker processes" line before connecting.
"""

from __future__ import annotations

import asyncio
import os
import signal
from importlib.metadata import version

import aiohttp
import pytest

from services.kubelet.runtime.images import ImageCatalog

pytestmark = pytest.mark.timeout(60)

SOFTWARE = f"kubelite-webserver/{version('kubelite')}"


async def _serve(image: str) -> tuple[asyncio.subprocess.Process, int]:
    """The built-in web server on a port of its choosing; the process and that port."""
    ref, _ = ImageCatalog().lookup(image)
    env = {**os.environ, **ref.env, "POD_IP": "127.0.0.1", "KUBELITE_PORT": "0"}
    proc = await asyncio.create_subprocess_exec(
        *ref.entrypoint, *ref.cmd, env=env, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stderr is not None
    async with asyncio.timeout(30):
        while b"start worker processes on " not in (line := await proc.stderr.readline()):
            assert line, "the web server exited before listening"
    return proc, int(line.rsplit(b":", 1)[1])


@pytest.mark.parametrize("image", ["nginx", "nginx:1.25", "nginx:1.27.3", "nginxinc/nginx:1.0"])
async def test_server_header_names_kubelite_for_every_nginx_tag(image: str) -> None:
    proc, port = await _serve(image)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/") as resp:
                assert resp.status == 200
                assert resp.headers["Server"] == SOFTWARE
                page = await resp.text()
            async with session.get(f"http://127.0.0.1:{port}/missing") as resp:
                assert resp.status == 404
                assert resp.headers["Server"] == SOFTWARE
                not_found = await resp.text()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await proc.wait() == 0, "SIGTERM is nginx's graceful stop: exit 0"
    assert "Welcome to nginx!" in page, "what tutorials look for stays on the page"
    assert "This is not nginx" in page
    assert SOFTWARE in not_found
    assert "nginx/" not in page + not_found
