"""An HTTP proxy in front of the real apiserver that can refuse chosen requests.

Why: some failures cannot be provoked through the API honestly — a pod template the apiserver
accepts on the ReplicationController but refuses on every pod (a quota, an admission webhook)
is the classic. The proxy forwards everything (watches stream through chunk by chunk) except
requests matching a rule, which it answers with the rule's ``Status`` after ``latency``
seconds, counting them and the most that were in flight at once.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

_HOP = {"transfer-encoding", "content-length", "connection", "content-encoding", "keep-alive"}


@dataclass
class Rule:
    method: str
    path: re.Pattern[str]
    status: dict[str, Any]
    latency: float = 0.05
    seen: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    times: list[float] = field(default_factory=list)


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.rules: list[Rule] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    def refuse(
        self, method: str, path: str, status: dict[str, Any], *, latency: float = 0.05
    ) -> Rule:
        rule = Rule(method, re.compile(path), status, latency)
        self.rules.append(rule)
        return rule

    def lift(self, rule: Rule) -> None:
        self.rules.remove(rule)

    async def __aenter__(self) -> FaultProxy:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        for rule in self.rules:
            if rule.method == request.method and rule.path.fullmatch(request.path):
                return await self._refuse(rule)
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP | {"host"}}
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=body or None,
            timeout=aiohttp.ClientTimeout(total=None),
        ) as upstream:
            response = web.StreamResponse(status=upstream.status)
            for k, v in upstream.headers.items():
                if k.lower() not in _HOP:
                    response.headers[k] = v
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except (ConnectionError, aiohttp.ClientError):
                pass  # the client went away mid-stream (a watch it closed): nothing to tell it
            return response

    async def _refuse(self, rule: Rule) -> web.Response:
        rule.seen += 1
        rule.times.append(asyncio.get_running_loop().time())
        rule.in_flight += 1
        rule.max_in_flight = max(rule.max_in_flight, rule.in_flight)
        try:
            await asyncio.sleep(rule.latency)  # the refusing server's own latency
        finally:
            rule.in_flight -= 1
        return web.Response(
            status=int(rule.status.get("code", 500)),
            text=json.dumps(rule.status),
            content_type="application/json",
        )
