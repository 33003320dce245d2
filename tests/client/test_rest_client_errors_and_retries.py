"""The REST client maps Status bodies to the typed errors, retries only what is safe to retry,
and paces requests when a QPS is set — against a scripted aiohttp server on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from api.errors import AlreadyExists, Conflict, Expired, Invalid, NotFound, ServiceUnavailable
from api.registry import REGISTRY
from client.kubeconfig import ClientConfig
from client.rest import ApiClient, ApiUnreachable, resource_path

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]
PODS = REGISTRY.by_kind("", "Pod")
NODES = REGISTRY.by_kind("", "Node")
DEPLOYMENTS = REGISTRY.by_kind("apps", "Deployment")
assert PODS and NODES and DEPLOYMENTS


def status(code: int, reason: str, message: str, **details: Any) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return web.json_response(body, status=code)


class Script:
    """Answers each request with the next scripted response; records what it was asked."""

    def __init__(self, *responses: Callable[[], web.StreamResponse]) -> None:
        self.responses = list(responses)
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        self.requests.append((request.method, request.path_qs, dict(request.headers), body))
        make = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        return make()


async def start(aiohttp_server: ServerFactory, script: Script) -> str:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", script.handle)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def test_paths_follow_the_kubernetes_layout() -> None:
    assert PODS and NODES and DEPLOYMENTS
    assert resource_path(PODS, namespace="ns") == "/api/v1/namespaces/ns/pods"
    assert resource_path(PODS) == "/api/v1/pods"
    assert (
        resource_path(PODS, namespace="ns", name="p", subresource="status")
        == "/api/v1/namespaces/ns/pods/p/status"
    )
    assert resource_path(NODES, namespace="ignored", name="n1") == "/api/v1/nodes/n1"
    assert resource_path(DEPLOYMENTS, namespace="x") == "/apis/apps/v1/namespaces/x/deployments"


@pytest.mark.parametrize(
    ("code", "reason", "exc"),
    [
        (404, "NotFound", NotFound),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (410, "Expired", Expired),
        (422, "Invalid", Invalid),
    ],
)
async def test_status_bodies_become_typed_errors(
    aiohttp_server: ServerFactory, code: int, reason: str, exc: type[Exception]
) -> None:
    script = Script(lambda: status(code, reason, f'pods "p" {reason}', name="p", kind="pods"))
    async with ApiClient(server=await start(aiohttp_server, script)) as client:
        assert PODS
        with pytest.raises(exc) as info:
            await client.create(PODS, {"metadata": {"name": "p", "namespace": "ns"}})
    assert getattr(info.value, "name", None) == "p"
    assert len(script.requests) == 1, "writes are not retried on errors"


async def test_a_non_status_error_body_still_maps_by_code(aiohttp_server: ServerFactory) -> None:
    script = Script(lambda: web.Response(status=404, text="404: Not Found"))
    async with ApiClient(server=await start(aiohttp_server, script)) as client:
        assert PODS
        with pytest.raises(NotFound, match="Not Found"):
            await client.get(PODS, "p", namespace="ns")


@pytest.mark.looptime
async def test_reads_are_retried_on_503_and_writes_are_not(aiohttp_server: ServerFactory) -> None:
    ok = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "ns"}}
    script = Script(
        lambda: status(503, "ServiceUnavailable", "starting"),
        lambda: status(503, "ServiceUnavailable", "starting"),
        lambda: web.json_response(ok),
    )
    async with ApiClient(server=await start(aiohttp_server, script)) as client:
        assert PODS
        assert await client.get(PODS, "p", namespace="ns") == ok
        assert [r[0] for r in script.requests] == ["GET", "GET", "GET"]
        script.responses = [lambda: status(503, "ServiceUnavailable", "starting")]
        with pytest.raises(ServiceUnavailable):
            await client.create(PODS, ok)
        assert [r[0] for r in script.requests][3:] == ["POST"]


@pytest.mark.looptime
async def test_429_is_retried_even_for_writes_honouring_retry_after(
    aiohttp_server: ServerFactory,
) -> None:
    loop = asyncio.get_running_loop()
    created = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}
    script = Script(
        lambda: web.json_response(
            {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "slow down"},
            status=429,
            headers={"Retry-After": "3"},
        ),
        lambda: web.json_response(created, status=201),
    )
    async with ApiClient(server=await start(aiohttp_server, script)) as client:
        assert PODS
        t0 = loop.time()
        assert await client.create(PODS, {"metadata": {"name": "p", "namespace": "ns"}}) == created
        assert loop.time() - t0 == pytest.approx(3.0)
    assert [r[0] for r in script.requests] == ["POST", "POST"]
    assert script.requests[0][3]["kind"] == "Pod" and script.requests[0][3]["apiVersion"] == "v1"


@pytest.mark.looptime
async def test_refused_connections_end_in_api_unreachable_after_the_read_retries(
    refusing_url: str,
) -> None:
    config = ClientConfig(server=refusing_url, read_retries=3)
    async with ApiClient(config) as client:
        assert PODS
        with pytest.raises(ApiUnreachable):
            await client.list(PODS)
        with pytest.raises(ApiUnreachable):
            await client.create(PODS, {"metadata": {"name": "p", "namespace": "ns"}})


async def test_verbs_send_kubernetes_requests(aiohttp_server: ServerFactory) -> None:
    script = Script(lambda: web.json_response({"kind": "Status", "status": "Success"}))
    config = ClientConfig(server=await start(aiohttp_server, script), token="s3cret")
    async with ApiClient(config) as client:
        assert PODS and NODES
        await client.list(PODS, namespace="ns", label_selector="app=web", resource_version="0")
        await client.update_status(PODS, {"metadata": {"name": "p", "namespace": "ns"}})
        await client.patch(NODES, "n1", {"metadata": {"labels": {"zz": "cxk"}}})
        await client.patch(
            PODS, "p", [{"op": "remove", "path": "/x"}], namespace="ns", patch_type="json"
        )
        await client.delete(PODS, "p", namespace="ns", grace_period_seconds=0)
        await client.bind(namespace="ns", pod="p", node="node1", uid="u1")
    got = [(m, p, h.get("Content-Type"), h.get("Authorization")) for m, p, h, _ in script.requests]
    assert got == [
        (
            "GET",
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb&resourceVersion=0",
            None,
            "Bearer s3cret",
        ),
        ("PUT", "/api/v1/namespaces/ns/pods/p/status", "application/json", "Bearer s3cret"),
        ("PATCH", "/api/v1/nodes/n1", "application/merge-patch+json", "Bearer s3cret"),
        ("PATCH", "/api/v1/namespaces/ns/pods/p", "application/json-patch+json", "Bearer s3cret"),
        ("DELETE", "/api/v1/namespaces/ns/pods/p", "application/json", "Bearer s3cret"),
        ("POST", "/api/v1/namespaces/ns/pods/p/binding", "application/json", "Bearer s3cret"),
    ]
    assert script.requests[4][3]["gracePeriodSeconds"] == 0
    assert script.requests[5][3]["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node1"}


async def test_namespaced_single_object_calls_need_a_namespace() -> None:
    async with ApiClient(server="http://127.0.0.1:1") as client:
        assert PODS
        with pytest.raises(ValueError, match="namespaced"):
            await client.get(PODS, "p")


@pytest.mark.looptime
async def test_client_side_qps_paces_requests(aiohttp_server: ServerFactory) -> None:
    loop = asyncio.get_running_loop()
    script = Script(lambda: web.json_response({"items": [], "metadata": {"resourceVersion": "1"}}))
    config = ClientConfig(server=await start(aiohttp_server, script), qps=5, burst=2)
    async with ApiClient(config) as client:
        assert PODS
        t0 = loop.time()
        for _ in range(12):
            await client.list(PODS)
        assert loop.time() - t0 == pytest.approx(2.0)  # burst 2, then 10 more at 5/s


@pytest.mark.looptime
async def test_a_write_that_times_out_says_so(aiohttp_server: ServerFactory) -> None:
    never = asyncio.Event()

    async def silent(request: web.Request) -> web.StreamResponse:
        await never.wait()  # never answers: the client's request timeout ends it
        raise AssertionError("unreachable")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", silent)
    server = await aiohttp_server(app)
    config = ClientConfig(server=str(server.make_url("")).rstrip("/"), request_timeout=5.0)
    async with ApiClient(config) as client:
        assert NODES
        with pytest.raises(ApiUnreachable) as refused:
            await client.update_status(NODES, {"metadata": {"name": "n1"}})
    # a TimeoutError's text is empty: the message names the exception instead
    assert str(refused.value) == "PUT /api/v1/nodes/n1/status: TimeoutError"
