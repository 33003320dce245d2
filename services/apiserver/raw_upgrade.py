"""A raw byte stream out of an HTTP request answered ``101 Switching Protocols``.

Why it exists: kubectl 1.30 (and any client with WebSockets off) asks for port-forward with
``Connection: Upgrade`` / ``Upgrade: SPDY/3.1`` and then speaks SPDY on the bare connection.
aiohttp only switches to an upgraded protocol for WebSocket; for anything else the bytes after
the request would be parsed as further HTTP requests. ``RawUpgrade`` answers 101 with the given
headers and installs itself as the connection's payload parser — the hook aiohttp's own
``WebSocketResponse`` uses (``RequestHandler.set_parser``) — so every byte the client sends from
then on arrives here, and ``write`` sends bytes back unframed.

Flow control: reading from the socket pauses while more than ``HIGH_WATER`` bytes wait to be
read and resumes once they are taken; writes wait for the transport to drain.

Not guaranteed: relies on aiohttp's ``set_parser`` hook, which aiohttp does not document for
third parties (it is what its WebSocket support is built on); HTTP/1.1 only.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiohttp import web

__all__ = ["RawUpgrade"]

HIGH_WATER = 1024 * 1024


class RawUpgrade:
    """The connection of ``request``, after a 101, as bytes in and bytes out."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._buffer = bytearray()
        self._eof = False
        self._ready = asyncio.Event()
        self._paused = False
        self._response: web.StreamResponse | None = None

    async def accept(self, headers: dict[str, str]) -> None:
        """Answer ``101 Switching Protocols`` with ``headers``; bytes flow from then on."""
        protocol = cast(Any, self._request.protocol)
        # before the 101 goes out: the client may send its first frames as soon as it reads it
        protocol.set_parser(self)
        protocol.keep_alive(False)
        response = web.StreamResponse(status=101, headers=headers)
        response.force_close()
        await response.prepare(self._request)
        self._response = response

    # -- aiohttp's payload-parser interface ----------------------------------------------------

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self._buffer += data
        self._ready.set()
        transport = self._request.transport
        if len(self._buffer) > HIGH_WATER and transport is not None and not self._paused:
            transport.pause_reading()
            self._paused = True
        return False, b""

    def feed_eof(self) -> None:
        self._eof = True
        self._ready.set()

    # -- the byte stream -----------------------------------------------------------------------

    async def read(self) -> bytes:
        """What the client has sent since the last read; ``b""`` once it has closed."""
        while not self._buffer and not self._eof:
            self._ready.clear()
            await self._ready.wait()
        data = bytes(self._buffer)
        self._buffer.clear()
        transport = self._request.transport
        if self._paused and transport is not None:
            transport.resume_reading()
            self._paused = False
        return data

    async def write(self, data: bytes) -> None:
        assert self._response is not None, "accept() first"
        await self._response.write(data)

    @property
    def response(self) -> web.StreamResponse:
        assert self._response is not None, "accept() first"
        return self._response

    def close(self) -> None:
        transport = self._request.transport
        if transport is not None:
            transport.close()
