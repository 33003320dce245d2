"""``ClientConfig.max_connections``: at most that many requests other than watches in flight, so
at most that many connections for them; the rest wait for a free one and all complete. A watch
takes none of them. Without it (the default) every request in flight has its own connection.

Against an aiohttp app on loopback that holds every request until the test lets them go and
records from which client connection (peer address) each came.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from client.kubeconfig import ClientConfig, KubeconfigError
from client.rest import ApiClient
from kubelite.testing.waiting import WITHIN

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]

CAP = 4


class HeldRequests:
    """An app whose ``/held`` answers once ``release`` is set, counting what is in flight."""

    def __init__(self, *, arrived_at: int) -> None:
        self.in_flight = 0
        self.most_in_flight = 0
        self.peers: set[tuple[str, int]] = set()
        """The client connections requests came over."""
        self.watch_peers: set[tuple[str, int]] = set()
        self.arrived = asyncio.Event()
        """Set once ``arrived_at`` requests are in flight together."""
        self.release = asyncio.Event()
        self.end_watch = asyncio.Event()
        self._arrived_at = arrived_at

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/held", self._held)
        app.router.add_get("/watch", self._watch)
        return app

    async def _held(self, request: web.Request) -> web.StreamResponse:
        self.peers.add(_peer(request))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if self.in_flight == self._arrived_at:
            self.arrived.set()
        try:
            await self.release.wait()
        finally:
            self.in_flight -= 1
        return web.json_response({"ok": True})

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        self.watch_peers.add(_peer(request))
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        await resp.write(b'{"type":"BOOKMARK","object":{}}\n')
        await self.end_watch.wait()
        return resp


def _peer(request: web.Request) -> tuple[str, int]:
    assert request.transport is not None
    host, port = request.transport.get_extra_info("peername")[:2]
    return host, port


def url_of(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")


async def send_all(client: ApiClient, held: HeldRequests, *, count: int) -> None:
    """``count`` GETs at once; they are let go once ``held.arrived``; all must answer."""
    requests = [asyncio.create_task(client.request("GET", "/held")) for _ in range(count)]
    async with asyncio.timeout(WITHIN):
        await held.arrived.wait()
        held.release.set()
        answers = await asyncio.gather(*requests)
    assert answers == [{"ok": True}] * count


async def test_no_more_than_the_cap_are_in_flight_and_all_complete(
    aiohttp_server: ServerFactory,
) -> None:
    held = HeldRequests(arrived_at=CAP)
    server = await aiohttp_server(held.app())
    async with ApiClient(ClientConfig(server=url_of(server), max_connections=CAP)) as client:
        await send_all(client, held, count=5 * CAP)
    assert held.most_in_flight == CAP
    assert len(held.peers) <= CAP, "the waiting requests reuse the cap's connections"


async def test_without_a_cap_every_request_in_flight_has_a_connection(
    aiohttp_server: ServerFactory,
) -> None:
    held = HeldRequests(arrived_at=5 * CAP)  # let go only once all are in flight at once
    server = await aiohttp_server(held.app())
    async with ApiClient(ClientConfig(server=url_of(server))) as client:
        await send_all(client, held, count=5 * CAP)
    assert held.most_in_flight == 5 * CAP
    assert len(held.peers) == 5 * CAP


async def test_a_watch_takes_none_of_the_capped_connections(
    aiohttp_server: ServerFactory,
) -> None:
    held = HeldRequests(arrived_at=CAP)  # all CAP while the watch is open
    server = await aiohttp_server(held.app())
    async with ApiClient(ClientConfig(server=url_of(server), max_connections=CAP)) as client:
        opener = client.watch_opener("/watch", params={}, timeout_seconds=None)
        watch = await opener()
        try:
            assert await watch.content.readline() == b'{"type":"BOOKMARK","object":{}}\n'
            await send_all(client, held, count=5 * CAP)
        finally:
            held.end_watch.set()
            watch.close()
    assert held.most_in_flight == CAP
    assert len(held.peers) <= CAP
    assert held.watch_peers.isdisjoint(held.peers)


@pytest.mark.parametrize("cap", [0, -1])
def test_a_cap_below_one_is_refused(cap: int) -> None:
    with pytest.raises(KubeconfigError, match="max_connections"):
        ClientConfig(max_connections=cap)
