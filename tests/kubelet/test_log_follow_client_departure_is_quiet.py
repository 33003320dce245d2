"""A ``follow=true`` log client that leaves is no error, at the kubelet or at the apiserver's proxy.

The defect: the client of ``kubectl logs -f`` goes away while the container is quiet; when the
container stops, the follow ends and writing the end of the chunked body to the departed client
raised ``ClientConnectionResetError``, which aiohttp logged as an ERROR with a traceback.

Both servers run here as they do in their processes — ``web.AppRunner`` without handler
cancellation, so a handler outlives its client — over a real process runtime and a real
container process. ``runner.cleanup()`` waits for in-flight handlers, so once it returns every
record the follow could log is in ``caplog``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions
from services.kubelet.runtime.base import ContainerRecord, Runtime
from services.kubelet.runtime.process import ProcessRuntime
from services.kubelet.server import make_server_app
from store import open_store
from tests.kubelet.conftest import run

Obj = dict[str, Any]
POD: Obj = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "demo", "namespace": "default", "uid": "uid-demo"},
    "spec": {"containers": [{"name": "main", "image": "busybox"}]},
}


class OnePod:
    """The kubelet server's view of one pod whose containers ``runtime`` runs."""

    def __init__(self, runtime: ProcessRuntime) -> None:
        self.runtime = runtime
        self.pod = POD

    def find_pod(self, *, namespace: str, name: str) -> tuple[OnePod, Runtime] | None:
        return (self, self.runtime) if (namespace, name) == ("default", "demo") else None

    def served_pods(self) -> Iterable[Obj]:
        return [self.pod]

    def find_instance(self, container: str, *, previous: bool) -> ContainerRecord | None:
        mine = [r for r in self.runtime.list_containers("uid-demo") if r.name == container]
        return mine[-1] if mine else None

    def waiting_reason(self, container: str) -> str | None:
        return None


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, runner.addresses[0][1]


async def _apiserver(kubelet_port: int) -> tuple[web.AppRunner, int]:
    runner, port = await serve(
        make_app(ServerOptions(store_url="test://"), store=open_store("memory://"))
    )
    base = f"http://127.0.0.1:{port}"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        },
    }
    pod = {**POD, "metadata": {"name": "demo"}, "spec": {**POD["spec"], "nodeName": "n1"}}
    async with aiohttp.ClientSession() as session:
        for path, body in (("/api/v1/nodes", node), ("/api/v1/namespaces/default/pods", pod)):
            async with session.post(base + path, json=body) as resp:
                assert resp.status == 201, await resp.text()
    return runner, port


@pytest.mark.parametrize("via", ["kubelet", "apiserver"])
async def test_a_departed_follower_is_no_error_when_the_container_stops(
    via: str, process_runtime: ProcessRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # a TERM handler: as PID 1 of its sandbox the container would otherwise ignore SIGTERM
    record = await run(
        process_runtime, "sh", "-c", "trap 'exit 0' TERM; echo first; sleep 3600 & wait"
    )
    runners = [await serve(make_server_app(OnePod(process_runtime)))]
    if via == "apiserver":
        runners.append(await _apiserver(runners[0][1]))
        path = "/api/v1/namespaces/default/pods/demo/log"
    else:
        path = "/containerLogs/default/demo/main"
    server = f"http://127.0.0.1:{runners[-1][1]}"
    try:
        async with aiohttp.ClientSession() as session:
            resp = await session.get(server + path, params={"follow": "true"})
            assert resp.status == 200
            seen = b""
            while b"first\n" not in seen:
                chunk = await resp.content.readany()
                assert chunk, f"the stream ended early: {seen!r}"
                seen += chunk
            resp.close()  # the client leaves; the server keeps following the quiet container
            # a full round trip after the close: that server has read the client's FIN by now
            async with session.get(server + "/healthz") as ok:
                assert ok.status == 200
        await process_runtime.stop_container(record.container_id, grace_period=5)
    finally:
        for runner, _ in reversed(runners):
            await runner.cleanup()  # waits for the in-flight log handler to finish
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]
