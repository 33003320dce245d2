"""In-process apiserver fixtures: the real app on a loopback port, over memory and SQLite stores.

``api`` is an ``Api`` (a thin JSON helper over pytest-aiohttp's test client) talking to
``make_app`` over a real socket; it is parametrised over ``memory://`` and a SQLite file in the
test's tmp dir, so every test using it runs against both backends. ``make_api`` builds one with
custom ``ServerOptions`` or a given store (for compaction and restart tests).

``read_events(resp, n)`` reads watch events off a chunked response, splitting on newlines
itself (aiohttp's line reader refuses lines over 128 KiB). ``audit_event(log, audit_id)`` awaits
one request's ``ResponseComplete`` line in an audit log file.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from kubelite.testing.waiting import apoll_until
from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions
from store import open_store
from store.base import Store
from tests.factories import pod

Obj = dict[str, Any]


class Api:
    """JSON over the test client: ``await api.post(path, body)`` -> (status, body)."""

    def __init__(self, client: TestClient, store: Store) -> None:
        self.client = client
        self.store = store

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        data: Any = (
            raw if raw is not None else (None if body is None else json.dumps(body).encode())
        )
        if isinstance(data, bytes) and len(data) > 1024 * 1024:
            data = io.BytesIO(data)  # aiohttp warns about large raw bodies
        hdrs = dict(headers or {})
        if data is not None:
            hdrs.setdefault("Content-Type", content_type)
        async with self.client.request(method, path, data=data, headers=hdrs) as resp:
            text = await resp.read()
            try:
                return resp.status, json.loads(text) if text else None
            except ValueError:
                return resp.status, text.decode(errors="replace")

    async def get(self, path: str, **kw: Any) -> tuple[int, Any]:
        return await self.request("GET", path, **kw)

    async def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        return await self.request("POST", path, body, **kw)

    async def put(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        return await self.request("PUT", path, body, **kw)

    async def patch(
        self, path: str, body: Any, *, kind: str = "merge", **kw: Any
    ) -> tuple[int, Any]:
        ct = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[kind]
        return await self.request("PATCH", path, body, content_type=ct, **kw)

    async def delete(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        return await self.request("DELETE", path, body, **kw)

    async def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Obj:
        status, out = await self.request(method, path, body, **kw)
        assert 200 <= status < 300, (status, out)
        return out

    async def create_pod(
        self, name: str, *, ns: str = "default", labels: dict[str, str] | None = None, **spec: Any
    ) -> Obj:
        return await self.ok(
            "POST", f"/api/v1/namespaces/{ns}/pods", pod(name, labels=labels, **spec)
        )

    async def raw_exchange(self, request: bytes) -> bytes:
        """Send ``request`` bytes on a fresh connection; all the server sends until it closes."""
        server = self.client.server
        reader, writer = await asyncio.open_connection(server.host, server.port)
        try:
            writer.write(request)
            await writer.drain()
            return await asyncio.wait_for(reader.read(), timeout=30)
        finally:
            writer.close()

    def watch(self, path: str, **params: Any) -> Any:
        """``async with api.watch(path, resourceVersion=...) as resp`` — a watch request."""
        query = {"watch": "1", **{k: str(v) for k, v in params.items()}}
        return self.client.get(path, params=query)


TOO_MANY: Obj = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Too many requests, please try again later.",
    "reason": "TooManyRequests",
    "details": {"retryAfterSeconds": 1},
    "code": 429,
}
"""The Status a request refused by the in-flight limits gets (kube-apiserver's words)."""


class EventReader:
    """Watch events from a chunked response, one JSON object per line."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp
        self.buffer = b""

    async def next(self) -> Obj | None:
        while b"\n" not in self.buffer:
            chunk = await self.resp.content.readany()
            if not chunk:
                if self.buffer.strip():
                    line, self.buffer = self.buffer, b""
                    return json.loads(line)
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    async def take(self, n: int, *, skip_bookmarks: bool = True) -> list[Obj]:
        out: list[Obj] = []
        while len(out) < n:
            event = await self.next()
            assert event is not None, f"stream ended after {out}"
            if skip_bookmarks and event["type"] == "BOOKMARK":
                continue
            out.append(event)
        return out

    async def rest(self) -> list[Obj]:
        """Every remaining event until the server ends the stream."""
        out = []
        while (event := await self.next()) is not None:
            out.append(event)
        return out


def summary(events: list[Obj]) -> list[tuple[str, str]]:
    """``[(type, name), ...]`` for readable assertions."""
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


async def audit_event(log: Path, audit_id: str) -> Obj:
    """The ``ResponseComplete`` audit event of the request ``audit_id`` (its ``Audit-Id``
    header), once the log backend has written it: that happens after the response, so the
    file is read again until the line is there."""

    def completed() -> Obj | None:
        for line in log.read_text().splitlines() if log.exists() else ():
            event = json.loads(line)
            if event["auditID"] == audit_id and event["stage"] == "ResponseComplete":
                return dict(event)
        return None

    found = await apoll_until(
        lambda: asyncio.to_thread(completed), what=f"the audit event of request {audit_id}"
    )
    assert found is not None  # apoll_until returns a truthy value
    return found


MakeApi = Callable[..., Awaitable[Api]]


@pytest.fixture
def make_api(aiohttp_client: Any, tmp_path: Path) -> MakeApi:
    counter = iter(range(1000))

    async def make(backend: str = "memory", *, store: Store | None = None, **options: Any) -> Api:
        if store is None:
            url = (
                "memory://"
                if backend == "memory"
                else f"sqlite:///{tmp_path}/api-{next(counter)}.db"
            )
            store = open_store(url)
        opts = ServerOptions(store_url="test://", **options)
        client = await aiohttp_client(make_app(opts, store=store))
        return Api(client, store)

    return make


@pytest.fixture(params=["memory", "sqlite"])
async def api(request: pytest.FixtureRequest, make_api: MakeApi) -> Api:
    return await make_api(request.param)


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

T = TypeVar("T")


async def _created_until(api: Api, definition: Obj, found: Callable[[Obj], T | None]) -> T:
    """Create the CRD ``definition``, watch it and return the first ``found(crd)`` not None."""
    created = await api.ok("POST", CRDS, definition)
    name = created["metadata"]["name"]
    async with api.watch(CRDS, fieldSelector=f"metadata.name={name}") as resp:
        events = EventReader(resp)
        while True:
            event = await events.next()
            assert event is not None, f"the watch of CRD {name} ended first"
            result = found(event["object"])
            if result is not None:
                return result


def _conditions(crd: Obj) -> list[Obj]:
    return list((crd.get("status") or {}).get("conditions") or [])


async def established(api: Api, definition: Obj) -> Obj:
    """Create the CRD ``definition`` and await (by watching it) its ``Established=True``."""

    def ready(crd: Obj) -> Obj | None:
        done = any(c["type"] == "Established" and c["status"] == "True" for c in _conditions(crd))
        return dict(crd) if done else None

    return await _created_until(api, definition, ready)


async def crd_condition(api: Api, definition: Obj, condition: str) -> Obj:
    """Create the CRD ``definition`` and await (by watching it) its first ``condition`` (say
    ``NamesAccepted``), whatever its status; that condition."""
    return await _created_until(
        api,
        definition,
        lambda crd: next((c for c in _conditions(crd) if c["type"] == condition), None),
    )
