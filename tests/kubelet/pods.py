"""What the kubelet's e2e tests read of pods and do through the apiserver to them.

Pods are created and their progress awaited on the apiserver's watch (``create_and_wait``);
logs are read or followed through ``pods/{name}/log`` as ``kubectl logs`` would; a container's
pid is read from the kubelet's state dir, where it is written before Running is reported.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from tests.factories import Obj
from tests.kubelet.conftest import Cluster
from tests.kubelet.waits import pods_rt, wait_for_object


def cstatus(p: Obj | None, index: int = 0) -> Obj:
    return ((p or {}).get("status") or {}).get("containerStatuses", [{}])[index]


def phase(p: Obj | None) -> str | None:
    return ((p or {}).get("status") or {}).get("phase")


async def create_and_wait(c: Cluster, body: Obj, predicate: Any, *, within: float = 30) -> Obj:
    await c.client.create(pods_rt(), body, namespace="default")
    found = await wait_for_object(
        c.client, pods_rt(), body["metadata"]["name"], predicate, namespace="default", within=within
    )
    assert found is not None
    return found


async def pod_log(c: Cluster, name: str, **params: str) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{c.server}/api/v1/namespaces/default/pods/{name}/log", params=params) as r,
    ):
        assert r.status == 200, await r.text()
        return await r.text()


def container_pid(c: Cluster, p: Obj, index: int = 0) -> int:
    """The container's pid as the kubelet recorded it (written before Running is reported)."""
    container_id = cstatus(p, index)["containerID"].split("://", 1)[1]
    state = c.kubelet.state_dir / "pods" / p["metadata"]["uid"] / "containers"
    return int(json.loads((state / f"{container_id}.json").read_text())["pid"])


async def follow_log_until(c: Cluster, name: str, needle: str) -> None:
    """Stream ``kubectl logs -f`` through the apiserver until ``needle`` shows up."""
    url = f"{c.server}/api/v1/namespaces/default/pods/{name}/log"
    seen = b""
    async with (
        asyncio.timeout(30),
        aiohttp.ClientSession() as session,
        session.get(url, params={"follow": "true"}) as resp,
    ):
        assert resp.status == 200, await resp.text()
        async for chunk in resp.content.iter_any():
            seen += chunk
            if needle.encode() in seen:
                return
    raise AssertionError(f"{needle!r} not in the log of {name}: {seen!r}")
