"""A loopback TCP proxy that can partition a client from the apiserver on demand.

Why: to prove how a reflector behaves when it loses the apiserver while the cluster keeps
changing, the test needs the server *up* (so it can be changed and compacted) but unreachable
*for this one client*. ``cut()`` drops every open connection (watches die mid-stream) and stops
listening (new connections are refused); ``heal()`` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["PartitionProxy"]


class PartitionProxy:
    def __init__(self, *, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> PartitionProxy:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    heal = start

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._pumps):
            task.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)

    close = cut

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        pumps = [
            asyncio.create_task(self._pump(reader, up_writer), name="proxy client->server"),
            asyncio.create_task(self._pump(up_reader, writer), name="proxy server->client"),
        ]
        self._pumps.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()
            self._pumps.difference_update(pumps)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
