"""Where the reflector lists and watches from, step by step, as client-go's reflector does:
list at "0" first; watch from the list's resourceVersion; after a dropped stream re-watch from
the last event or bookmark *without* relisting; after a 410 relist at the last resourceVersion;
after the list itself is 410, relist at "" (newest); after a 504 "Too large resource version",
relist at "". A scripted server on loopback plays each answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from client.informer import Informer
from client.reflector import ReflectorOptions
from client.rest import ApiClient
from tests.client.ledger import PODS, Ledger

pytestmark = [pytest.mark.looptime, pytest.mark.timeout(30)]
ServerFactory = Callable[..., Awaitable[TestServer]]


def obj(name: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)}}


def frame(kind: str, o: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": o}).encode() + b"\n"


def status(
    code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "code": code, "reason": reason, "message": message}  # fmt: skip
    if causes:
        body["details"] = {"causes": causes}
    return body


async def test_resume_rules(aiohttp_server: ServerFactory) -> None:
    calls: list[tuple[str, str]] = []
    params: list[dict[str, str]] = []
    enough = asyncio.Event()
    forever = asyncio.Event()
    lists = [
        web.json_response({"items": [obj("a", 5)], "metadata": {"resourceVersion": "10"}}),
        web.json_response(status(410, "Expired", "too old resource version: 15 (30)"), status=410),
        web.json_response({"items": [obj("b", 20)], "metadata": {"resourceVersion": "20"}}),
        web.json_response({"items": [obj("b", 20)], "metadata": {"resourceVersion": "21"}}),
    ]
    too_large = status(
        504, "Timeout", "Too large resource version: 20, current: 3",
        [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
    )  # fmt: skip

    async def handler(request: web.Request) -> web.StreamResponse:
        rv = request.query.get("resourceVersion", "<unset>")
        if request.query.get("watch") != "true":
            calls.append(("list", rv))
            return lists.pop(0)
        calls.append(("watch", rv))
        params.append(dict(request.query))
        n = sum(1 for c in calls if c[0] == "watch")
        if n == 3:
            return web.json_response(too_large, status=504)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if n == 1:  # an event and a bookmark, then the connection drops
            bookmark = {"metadata": {"resourceVersion": "15"}}
            await resp.write(frame("ADDED", obj("b", 11)) + frame("BOOKMARK", bookmark))
            assert request.transport is not None
            request.transport.close()
            return resp
        if n == 2:  # the history is gone
            await resp.write(
                frame("ERROR", status(410, "Expired", "too old resource version: 15 (30)"))
            )
            await resp.write_eof()
            return resp
        enough.set()
        await forever.wait()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/pods", handler)
    server = await aiohttp_server(app)
    async with ApiClient(server=str(server.make_url("")).rstrip("/")) as client:
        assert PODS is not None
        informer = Informer(client, PODS, reflector_options=ReflectorOptions(min_watch_timeout=300))
        ledger = Ledger(informer)
        task = informer.start()
        try:
            await enough.wait()
        finally:
            forever.set()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert calls == [
        ("list", "0"),  # first list: any cached state will do
        ("watch", "10"),  # from the list's resourceVersion
        ("watch", "15"),  # dropped: resume from the bookmark, no relist
        ("list", "15"),  # 410 on the watch: relist from the last resourceVersion ...
        ("list", ""),  # ... which is itself too old: the newest state
        ("watch", "20"),
        ("list", ""),  # 504 too large: the server lost its history; relist the newest
        ("watch", "21"),
    ]
    for p in params:
        assert p["allowWatchBookmarks"] == "true"
        assert 300 <= int(p["timeoutSeconds"]) < 600
    assert ledger.violations == []
    assert ledger.deleted == ["default/a"], "a vanished while the reflector was away"
    assert sorted(ledger.state.items()) == [("default/b", "20")]
