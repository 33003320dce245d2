"""The real ``kubelite apiserver`` with ``--max-requests-inflight=1`` and
``--max-mutating-requests-inflight=1`` and priority and fairness off (its insecure-port admin is
exempt from it): kube-apiserver's 429 over the limit, understood by the
official Python client and retried by kubectl; watches take no slot; normal service afterwards.

A mutating slot is held deterministically by a client that sends a POST's head with
``Expect: 100-continue`` and keeps its body back: aiohttp answers ``100 Continue`` and enters the
middlewares in the same step, without yielding to the event loop in between, so once the client
has read ``100 Continue`` the request holds its slot (its handler waits for the body) until the
client sends the body.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubelite.testing import ComponentProcess
from tests.apiserver.conftest import TOO_MANY, EventReader
from tests.factories import pod
from tests.kubectl.harness import kubectl_binary

pytestmark = pytest.mark.e2e

PODS = "/api/v1/namespaces/default/pods"
LIMITS = [
    "--max-requests-inflight=1",
    "--max-mutating-requests-inflight=1",
    "--enable-priority-and-fairness=false",  # the two pools, not priority levels
]


class HeldPost:
    """A POST whose body is kept back, so that its handler stays in flight."""

    def __init__(self, port: int, body: dict[str, Any]) -> None:
        self.port = port
        self.body = json.dumps(body).encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def hold(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = (
            f"POST {PODS} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(self.body)}\r\nExpect: 100-continue\r\n\r\n"
        )
        self.writer.write(head.encode())
        await self.writer.drain()
        interim = await self.reader.readuntil(b"\r\n\r\n")
        assert interim.startswith(b"HTTP/1.1 100 Continue"), interim

    async def release(self) -> int:
        """Send the body; the final status code."""
        assert self.reader is not None and self.writer is not None
        self.writer.write(self.body)
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        return int(head.split(b" ", 2)[1])

    async def __aenter__(self) -> HeldPost:
        await self.hold()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()


async def test_over_the_limits_429_watches_exempt_then_normal_service(
    apiserver_process: Any,
) -> None:
    server: ComponentProcess = await asyncio.to_thread(
        apiserver_process, store="memory://", args=LIMITS
    )
    async with (
        HeldPost(server.port, pod("held")) as held,
        aiohttp.ClientSession(server.url) as session,
    ):
        async with session.post(PODS, json=pod("refused")) as resp:
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "1"
            assert json.loads(await resp.read()) == TOO_MANY
        await asyncio.to_thread(_official_client_sees_429, server.url)

        # three watches and then a list, with one read-only slot: watches take none
        watches = [await session.get(PODS, params={"watch": "1"}) for _ in range(3)]
        assert [w.status for w in watches] == [200, 200, 200]
        async with session.get(PODS) as resp:
            assert resp.status == 200, await resp.text()

        assert await held.release() == 201
        async with session.post(PODS, json=pod("after")) as resp:
            assert resp.status == 201, await resp.text()
        for watch in watches:
            events = await EventReader(watch).take(2)
            names = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
            assert names == [("ADDED", "held"), ("ADDED", "after")]
            watch.close()


def _official_client_sees_429(url: str) -> None:
    from kubernetes import client

    api = client.ApiClient(client.Configuration(host=url))
    try:
        with pytest.raises(client.ApiException) as err:
            client.CoreV1Api(api).create_namespaced_pod(
                "default",
                client.V1Pod(
                    metadata=client.V1ObjectMeta(name="official"),
                    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="x")]),
                ),
            )
        assert err.value.status == 429
        assert err.value.headers["Retry-After"] == "1"
        status = api.deserialize(err.value.body, "V1Status", "application/json")
        assert (status.reason, status.details.retry_after_seconds) == ("TooManyRequests", 1)
    finally:
        api.close()


@pytest.mark.kubectl
async def test_kubectl_waits_out_a_429_and_its_retry_succeeds(
    apiserver_process: Any, tmp_path: Path
) -> None:
    binary = kubectl_binary()
    if binary is None:
        pytest.skip("no kubectl on the PATH")
    server: ComponentProcess = await asyncio.to_thread(
        apiserver_process, store="memory://", args=LIMITS
    )
    async with HeldPost(server.port, pod("held")) as held:
        await _kubectl_create_retried_after_429(binary, server, held, tmp_path)
    async with aiohttp.ClientSession(server.url) as session:
        async with session.get(f"{PODS}/by-kubectl") as resp:
            assert resp.status == 200


async def _kubectl_create_retried_after_429(
    binary: str, server: ComponentProcess, held: HeldPost, tmp_path: Path
) -> None:
    proc = await asyncio.create_subprocess_exec(
        binary,
        f"--server={server.url}",
        f"--cache-dir={tmp_path / 'cache'}",
        "-v=6",
        "create",
        "-f",
        "-",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "KUBECONFIG": "/dev/null"},
    )
    assert proc.stdin is not None and proc.stderr is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(pod("by-kubectl")).encode())
    proc.stdin.close()
    seen: list[str] = []
    while True:  # kubectl logs each response at -v=6; the POST is answered 429 first
        line = (await proc.stderr.readline()).decode()
        assert line, f"kubectl ended without a 429:\n{''.join(seen)}"
        seen.append(line)
        if "POST" in line and " 429 " in line:
            break
    assert await held.release() == 201  # frees the slot; kubectl's retry (after 1 s) gets it
    stdout, stderr = await proc.communicate()
    assert proc.returncode == 0, "".join(seen) + stderr.decode()
    assert b"pod/by-kubectl created" in stdout
