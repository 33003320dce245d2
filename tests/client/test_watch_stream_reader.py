"""The watch reader splits lines itself (no 128 KiB limit), types events, raises ERROR events,
and tells a clean end from a stream cut mid-event — against a real aiohttp server on loopback
that streams chunked NDJSON in awkward chunk boundaries."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from api.errors import Expired
from api.registry import REGISTRY
from client.rest import ApiClient
from client.watch import StreamTruncated, split_lines

PODS = REGISTRY.by_kind("", "Pod")
assert PODS is not None

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


def pod(name: str, rv: int, *, note: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "resourceVersion": str(rv)}
    if note:
        meta["annotations"] = {"note": note}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


async def serve(aiohttp_server: ServerFactory, chunks: list[bytes], *, cut: bool = False) -> str:
    async def watch(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for chunk in chunks:
            await resp.write(chunk)
        if cut:
            assert request.transport is not None
            request.transport.close()  # no terminating chunk: the connection just dies
            return resp
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/pods", watch)
    app.router.add_get("/api/v1/namespaces/{ns}/pods", watch)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def collect(client: ApiClient, **kwargs: Any) -> list[tuple[str, str]]:
    out = []
    assert PODS is not None
    async with client.watch(PODS, **kwargs) as stream:
        async for event in stream:
            out.append((event.type, event.resource_version))
    return out


async def test_lines_longer_than_128_kib_split_across_many_chunks(
    aiohttp_server: ServerFactory,
) -> None:
    big = pod("big", 2, note="x" * 300_000)  # one event line of ~300 KiB
    stream = line("ADDED", pod("a", 1)) + line("MODIFIED", big) + line("DELETED", pod("a", 3))
    chunks = [stream[i : i + 7001] for i in range(0, len(stream), 7001)]
    url = await serve(aiohttp_server, chunks)
    async with ApiClient(server=url) as client:
        events = await collect(client)
    assert events == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "3")]


async def test_several_events_in_one_chunk_and_bookmarks(aiohttp_server: ServerFactory) -> None:
    bookmark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}}
    url = await serve(
        aiohttp_server,
        [
            line("ADDED", pod("a", 1))
            + line("ADDED", pod("b", 2))
            + b"\n"
            + line("BOOKMARK", bookmark)
        ],
    )
    async with ApiClient(server=url) as client:
        assert await collect(client) == [("ADDED", "1"), ("ADDED", "2"), ("BOOKMARK", "9")]


async def test_an_error_event_is_raised_as_its_status(aiohttp_server: ServerFactory) -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": "too old resource version: 5 (20)",
        "reason": "Expired",
        "code": 410,
    }
    url = await serve(aiohttp_server, [line("ADDED", pod("a", 21)), line("ERROR", status)])
    seen = []
    async with ApiClient(server=url) as client:
        assert PODS is not None
        with pytest.raises(Expired, match="too old resource version"):
            async with client.watch(PODS, resource_version="5") as stream:
                async for event in stream:
                    seen.append(event.type)
    assert seen == ["ADDED"]


async def test_a_final_event_without_newline_still_counts(aiohttp_server: ServerFactory) -> None:
    url = await serve(
        aiohttp_server, [line("ADDED", pod("a", 1)) + line("ADDED", pod("b", 2))[:-1]]
    )
    async with ApiClient(server=url) as client:
        assert await collect(client) == [("ADDED", "1"), ("ADDED", "2")]


async def test_a_stream_ending_mid_event_is_truncated(aiohttp_server: ServerFactory) -> None:
    half = line("ADDED", pod("b", 2))[:25]
    url = await serve(aiohttp_server, [line("ADDED", pod("a", 1)), half])
    async with ApiClient(server=url) as client:
        with pytest.raises(StreamTruncated):
            await collect(client)


async def test_a_dropped_connection_is_truncated_not_a_clean_end(
    aiohttp_server: ServerFactory,
) -> None:
    url = await serve(aiohttp_server, [line("ADDED", pod("a", 1))], cut=True)
    async with ApiClient(server=url) as client:
        with pytest.raises(StreamTruncated):
            await collect(client)


async def test_watch_sends_kubernetes_query_parameters(aiohttp_server: ServerFactory) -> None:
    captured: list[dict[str, str]] = []

    async def watch(request: web.Request) -> web.StreamResponse:
        captured.append({"path": request.path, **request.query})
        return web.Response(body=b"", content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/pods", watch)
    server = await aiohttp_server(app)
    async with ApiClient(server=str(server.make_url("")).rstrip("/")) as client:
        await collect(
            client,
            namespace="ns1",
            field_selector="spec.nodeName=node1",
            label_selector="app=web",
            resource_version="42",
            timeout_seconds=300,
        )
    assert captured == [
        {
            "path": "/api/v1/namespaces/ns1/pods",
            "watch": "true",
            "allowWatchBookmarks": "true",
            "fieldSelector": "spec.nodeName=node1",
            "labelSelector": "app=web",
            "resourceVersion": "42",
            "timeoutSeconds": "300",
        }
    ]


async def test_split_lines_joins_and_splits_any_chunking() -> None:
    async def chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
        for p in parts:
            yield p

    data = b'{"a":1}\n{"b":2}\n\n{"c":3}\n'
    for size in (1, 2, 3, 5, 100):
        parts = [data[i : i + size] for i in range(0, len(data), size)]
        got = [x async for x in split_lines(chunks(parts))]
        assert got == [b'{"a":1}', b'{"b":2}', b'{"c":3}'], size
    with pytest.raises(StreamTruncated):
        [x async for x in split_lines(chunks([b"x" * 100]), max_line_bytes=10)]
