"""An in-process apiserver serving both ports, with identities and a gate on some creates.

Priority and fairness classifies by *who* asks, and the insecure port's superuser is
``system:masters`` — exempt, never limited — so these tests talk to the TLS port with
``--token-auth-file`` users (``TOKENS``) and use the plain port as the admin. ``Cluster`` runs
``make_app`` under one ``AppRunner`` with two sites, so the test can also read the app's
``FlowControl`` (its metrics and levels) directly.

``HeldCreates`` is the real store with creates under one key prefix held until ``release`` is
set once ``armed``: a request held there keeps its seat, deterministically, for as long as the
test wants; ``held(n)`` awaits the moment ``n`` requests have reached it.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from component import pki
from services.apiserver.app import make_app
from services.apiserver.context import CONTEXT, ServerOptions
from services.apiserver.flowcontrol import FLOW_CONTROL, FlowControl
from store import open_store
from store.base import KeyValue, Store

Obj = dict[str, Any]

TOKENS = {
    "node1": ("system:node:node1", "system:nodes"),
    "bulk": ("system:serviceaccount:default:bulk", "system:serviceaccounts"),
    "alice": ("alice", "developers"),
}
"""token -> (user, group): a kubelet's identity, a service account's, a person's."""


class HeldCreates:
    """The real store; creates of keys under ``prefix`` wait for ``release`` once ``armed``."""

    def __init__(self, inner: Store, *, prefix: str) -> None:
        self.inner = inner
        self.prefix = prefix
        self.armed = False
        self.release = asyncio.Event()
        self.waiting = 0
        self._arrived = asyncio.Condition()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def held(self, n: int) -> None:
        """Return once ``n`` creates are waiting at the gate."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: self.waiting >= n)

    async def create(self, key: str, value: bytes, **kw: Any) -> KeyValue:
        if self.armed and key.startswith(self.prefix):
            async with self._arrived:
                self.waiting += 1
                self._arrived.notify_all()
            await self.release.wait()
        return await self.inner.create(key, value, **kw)


@dataclass
class Answer:
    code: int
    headers: dict[str, str]
    body: Any


class Cluster:
    """The app on a plain and a TLS site; ``call`` as a token's user or as the admin."""

    def __init__(self, app: web.Application, session: aiohttp.ClientSession) -> None:
        self.app = app
        self.session = session
        self.plain = ""
        self.secure = ""
        self.client_tls: ssl.SSLContext | None = None

    @property
    def control(self) -> FlowControl:
        return self.app[FLOW_CONTROL]

    async def call(
        self, method: str, path: str, body: Any = None, *, token: str | None = None
    ) -> Answer:
        """``method path`` with ``token``'s bearer over TLS, or as the admin without one."""
        headers = {"Accept": "application/json"}
        if body is not None:
            patch = "application/merge-patch+json"
            headers["Content-Type"] = patch if method == "PATCH" else "application/json"
        url, tls = self.plain + path, None
        if token is not None:
            url, tls = self.secure + path, self.client_tls
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        async with self.session.request(method, url, data=data, headers=headers, ssl=tls) as r:
            raw = await r.read()
            json_body = raw and r.content_type == "application/json"
            return Answer(r.status, dict(r.headers), json.loads(raw) if json_body else raw)

    async def cache_holds(self, obj: Obj) -> None:
        """Return once the watch cache of ``obj``'s kind has applied its write (RBAC reads
        roles and bindings from the caches)."""
        ctx = self.app[CONTEXT]
        group, _, _ = obj["apiVersion"].rpartition("/")
        cache = ctx.cache(ctx.registry.require(group, obj["kind"]))
        assert cache is not None
        await cache.wait_until(int(obj["metadata"]["resourceVersion"]))

    async def watch_until(self, path: str, *, since: str, done: Callable[[Obj], bool]) -> None:
        """Read the admin's watch of ``path`` from revision ``since`` until ``done(event)``
        has held for one event (a watch from a revision misses no later write)."""
        params = {"watch": "1", "resourceVersion": since}
        async with self.session.get(self.plain + path, params=params) as events:
            buffer = b""
            while True:
                chunk = await events.content.readany()
                assert chunk, f"the watch of {path} ended first"
                *lines, buffer = (buffer + chunk).split(b"\n")
                if any(done(json.loads(line)) for line in lines):
                    return

    async def admin(self, method: str, path: str, body: Any = None) -> Obj:
        answer = await self.call(method, path, body)
        assert 200 <= answer.code < 300, answer
        body_out: Obj = answer.body
        return body_out


def _tokens_file(directory: Path) -> Path:
    lines = [f'{token},{user},uid-{token},"{group}"' for token, (user, group) in TOKENS.items()]
    path = directory / "tokens.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _port(site: web.TCPSite) -> int:
    server = site._server  # aiohttp keeps the bound socket here; port 0 was asked for
    assert server is not None
    port: int = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return port


@pytest.fixture
async def start_cluster(tmp_path: Path) -> AsyncIterator[Any]:
    """``await start_cluster(store=..., **options)``: a ``Cluster``; stopped at teardown."""
    runners: list[web.AppRunner] = []
    sessions: list[aiohttp.ClientSession] = []
    ca = pki.ensure_ca(tmp_path / "pki")
    serving = pki.ensure_serving_cert(ca, tmp_path / "pki", name="apiserver", hosts=["127.0.0.1"])

    async def start(store: Store | None = None, **options: Any) -> Cluster:
        opts = ServerOptions(store_url="test://", token_auth_file=_tokens_file(tmp_path), **options)
        app = make_app(opts, store=store if store is not None else open_store("memory://"))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        plain = web.TCPSite(runner, "127.0.0.1", 0)
        server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_tls.load_cert_chain(serving.cert, serving.key)
        secure = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls)
        await plain.start()
        await secure.start()
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        sessions.append(session)
        cluster = Cluster(app, session)
        cluster.plain = f"http://127.0.0.1:{_port(plain)}"
        cluster.secure = f"https://127.0.0.1:{_port(secure)}"
        cluster.client_tls = ssl.create_default_context(cafile=ca.files.cert)
        return cluster

    yield start
    for session in sessions:
        await session.close()
    for runner in reversed(runners):
        await runner.cleanup()
