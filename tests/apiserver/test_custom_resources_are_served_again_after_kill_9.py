"""After an apiserver kill -9, a CRD and its objects are served again as soon as the new apiserver
answers: every stored CRD's kind is served before startup ends, so there is nothing to wait for."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from kubelite.testing import ComponentProcess
from tests.conftest import StartApiServer
from tests.factories import crd, widget

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


async def _await_established(session: aiohttp.ClientSession) -> None:
    params = {"watch": "1", "fieldSelector": "metadata.name=widgets.example.com"}
    async with session.get(CRDS, params=params) as resp:
        async for line in resp.content:
            obj = json.loads(line)["object"]
            conditions = (obj.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return
    raise AssertionError("the CRD watch ended before Established")


async def _fill(server: ComponentProcess) -> None:
    async with aiohttp.ClientSession(server.url) as session:
        async with session.post(CRDS, json=crd()) as resp:
            assert resp.status == 201, await resp.text()
        await _await_established(session)
        for name in ("a", "b"):
            async with session.post(WIDGETS, json=widget(name, replicas=2)) as resp:
                assert resp.status == 201, await resp.text()


async def test_crd_and_objects_are_served_at_once_after_kill_9(
    apiserver_process: StartApiServer, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'crds.db'}"
    first = await asyncio.to_thread(apiserver_process, store=store)
    await _fill(first)
    await asyncio.to_thread(first.kill)

    second = await asyncio.to_thread(apiserver_process, store=store)
    async with aiohttp.ClientSession(second.url) as session:
        async with session.get(WIDGETS) as resp:
            assert resp.status == 200, await resp.text()
            items = (await resp.json())["items"]
        async with session.get(f"{CRDS}/widgets.example.com") as resp:
            definition = await resp.json()
        async with session.get("/apis/example.com/v1") as resp:
            assert resp.status == 200
    assert [(i["metadata"]["name"], i["spec"]["replicas"]) for i in items] == [("a", 2), ("b", 2)]
    conditions = {c["type"]: c["status"] for c in definition["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
