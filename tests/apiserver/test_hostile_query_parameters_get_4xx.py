"""Hostile query parameters get a 4xx ``Status``, never a 500, and the server keeps serving.

A small fuzz over the shapes found in the wild (int64 overflow in ``limit``, ``1e400`` inside a
continue token) and their cousins: huge, negative, non-numeric, unicode and NUL values of every
list/watch/get/delete parameter, against several kinds. Every answer must be a ``Status`` with a
4xx code (or a success, or Kubernetes' 504 for a resourceVersion ahead of the store), no request may log an internal error, and ``/readyz`` must answer
afterwards.
"""

from __future__ import annotations

import base64
import json
import logging
from urllib.parse import quote as _quote

import pytest

from tests.apiserver.conftest import Api, MakeApi

INT64_MAX = "9223372036854775807"

HOSTILE_NUMBERS = [
    INT64_MAX,
    "9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999999999999999999999",
    "-1",
    "0",
    "1e400",
    "1.5",
    "0x10",
    "1_000",
    " 5",
    "+5",
    "٣",
    "x",
    "\x00",
    "5\x00",
    "\u202e1",
    "9" * 5000,
]


def quote(value: str) -> str:
    """Percent-encoded, lone surrogates as their (invalid) UTF-8 bytes."""
    return _quote(value, safe="", errors="surrogatepass")


def token(payload: object) -> str:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


HOSTILE_CONTINUES = [
    token(b'{"v":"meta.k8s.io/v1","rv":1e400,"start":"/registry/core/pods/default/a"}'),
    token(b'{"v":"meta.k8s.io/v1","rv":-1e400,"start":"x"}'),
    token(b'{"v":"meta.k8s.io/v1","rv":NaN,"start":"x"}'),
    token({"v": "meta.k8s.io/v1", "rv": 10**30, "start": "/registry/core/pods/default/a"}),
    token({"v": "meta.k8s.io/v1", "rv": 2**63, "start": "/registry/core/pods/default/a"}),
    token({"v": "meta.k8s.io/v1", "rv": 1.5, "start": "/registry/core/pods/default/a"}),
    token({"v": "meta.k8s.io/v1", "rv": "5", "start": "/registry/core/pods/default/a"}),
    token({"v": "meta.k8s.io/v1", "rv": True, "start": "/registry/core/pods/default/a"}),
    token({"v": "meta.k8s.io/v1", "rv": 1, "start": 5}),
    token({"v": "meta.k8s.io/v1", "rv": 1, "start": None}),
    token({"v": "meta.k8s.io/v1", "rv": 1, "start": ["a"]}),
    token({"v": "meta.k8s.io/v1", "rv": 1, "start": "\ud800"}),
    token({"v": "meta.k8s.io/v1", "rv": 1, "start": "/registry/\x00"}),
    token({"v": "meta.k8s.io/v2", "rv": 1, "start": "a"}),
    token([1, 2]),
    token("x"),
    token(b"\xff\xfe"),
    token(b"[" * 4000),  # URLs stay under aiohttp's 8 KiB request line
    token(b"1" * 5000),
    "!!!",
    "é",
    "\x00",
]

HOSTILE_SELECTORS = [
    "a in (",
    "a=\x00",
    "\x00",
    "é=é",
    "a" * 4000 + "=b",
    "a!=,",
    "==",
    "!",
    "a in (b",
    "a notin b",
    "metadata.name=\ud800",
]

COLLECTIONS = [
    "/api/v1/namespaces/default/pods",
    "/api/v1/pods",
    "/api/v1/nodes",
    "/api/v1/namespaces/default/events",
    "/apis/apps/v1/namespaces/default/deployments",
    "/apis/apps/v1/replicasets",
]


def hostile_queries() -> list[str]:
    queries = []
    for value in HOSTILE_NUMBERS:
        for param in ("limit", "timeoutSeconds", "resourceVersion"):
            queries.append(f"{param}={quote(value)}")
        queries.append(f"limit=5&resourceVersion={quote(value)}")
        queries.append(f"resourceVersion={quote(value)}&resourceVersionMatch=Exact")
    for value in HOSTILE_CONTINUES:
        queries.append(f"limit=1&continue={quote(value)}")
        queries.append(f"limit={INT64_MAX}&continue={quote(value)}")
    for value in HOSTILE_SELECTORS:
        queries.append(f"labelSelector={quote(value)}")
        queries.append(f"fieldSelector={quote(value)}")
    for value in ("\x00", "é", "maybe", "2", "tru"):
        for param in ("watch", "allowWatchBookmarks", "sendInitialEvents"):
            queries.append(f"{param}={quote(value)}")
    queries += [
        "resourceVersionMatch=%00",
        "resourceVersionMatch=NotOlderThan",
        "includeObject=%00",
        "limit=1&limit=x",
        "continue=",
        "%00=%00",
        "labelSelector=%ff%fe",
        "limit=%ff",
    ]
    return queries


def assert_status_4xx(status: int, body: object, what: str) -> None:
    if status < 400:
        return  # a hostile value may also be a harmless one (limit=-1 lists everything)
    assert isinstance(body, dict), (what, body)
    assert body["kind"] == "Status" and body["code"] == status, (what, body)
    if status == 504:  # a resourceVersion ahead of the store: Kubernetes' 504, client-go relists
        causes = body["details"]["causes"]
        assert causes[0]["reason"] == "ResourceVersionTooLarge", (what, body)
        return
    assert 400 <= status < 500, (what, status, body)


async def assert_serving(api: Api) -> None:
    status, body = await api.get("/readyz")
    assert status == 200, body


@pytest.fixture
def internal_errors(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING)
    return caplog


def logged_internal_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "internal error" in r.getMessage()]


async def test_limit_at_int64_max_lists_instead_of_overflowing(make_api: MakeApi) -> None:
    api = await make_api("sqlite")
    for i in range(3):
        await api.create_pod(f"p{i}")
    status, out = await api.get(f"/api/v1/namespaces/default/pods?limit={INT64_MAX}")
    assert status == 200, out
    assert [p["metadata"]["name"] for p in out["items"]] == ["p0", "p1", "p2"]
    assert "continue" not in out["metadata"]
    status, out = await api.get("/api/v1/namespaces/default/pods?limit=9223372036854775808")
    assert status == 400 and out["reason"] == "BadRequest", out
    assert "value out of range" in out["message"]


async def test_continue_token_holding_1e400_is_400(api: Api) -> None:
    await api.create_pod("p")
    bad = token(b'{"v":"meta.k8s.io/v1","rv":1e400,"start":"/registry/core/pods/default/a"}')
    status, out = await api.get(f"/api/v1/namespaces/default/pods?limit=1&continue={bad}")
    assert status == 400, out
    assert out["reason"] == "BadRequest"
    assert out["message"].startswith("continue key is not valid")


async def test_huge_watch_timeout_is_a_watch(api: Api) -> None:
    """``timeoutSeconds`` at int64's limit must not overflow the event loop's timers."""
    await api.create_pod("p")
    async with api.watch(
        "/api/v1/namespaces/default/pods", timeoutSeconds=INT64_MAX, resourceVersion="0"
    ) as resp:
        assert resp.status == 200
        line = await resp.content.readline()
        assert json.loads(line)["type"] == "ADDED"


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_hostile_list_and_watch_queries_get_4xx(
    make_api: MakeApi, backend: str, internal_errors: pytest.LogCaptureFixture
) -> None:
    api = await make_api(backend)
    await api.create_pod("p")
    queries = hostile_queries()
    for path in COLLECTIONS:
        for query in queries:
            status, body = await api.get(f"{path}?{query}")
            assert_status_4xx(status, body, f"GET {path}?{query}")
    # watches: each hostile value beside watch=1; a stream that starts (200) is left at once
    for query in queries:
        if query.startswith("resourceVersion=") and "timeoutSeconds" not in query:
            continue  # a resourceVersion ahead of the store waits 3 s before its ERROR event
        path = f"/api/v1/namespaces/default/pods?watch=1&{query}"
        async with api.client.get(path) as resp:
            if resp.status != 200:
                assert_status_4xx(resp.status, json.loads(await resp.read()), f"GET {path}")
    assert logged_internal_errors(internal_errors) == []
    await assert_serving(api)


async def test_hostile_get_and_delete_queries_get_4xx(
    api: Api, internal_errors: pytest.LogCaptureFixture
) -> None:
    await api.create_pod("p")
    paths = [
        "/api/v1/namespaces/default/pods/p",
        "/api/v1/namespaces/default/pods/ghost",
        "/api/v1/nodes/n",
        "/api/v1/namespaces/default/pods/p/status",
        "/apis/apps/v1/namespaces/default/deployments/d/scale",
    ]
    for path in paths:
        for value in HOSTILE_NUMBERS + HOSTILE_SELECTORS:
            for param in ("resourceVersion", "gracePeriodSeconds", "dryRun", "pretty"):
                q = f"{param}={quote(value)}"
                status, body = await api.get(f"{path}?{q}")
                assert_status_4xx(status, body, f"GET {path}?{q}")
                if param in ("gracePeriodSeconds", "dryRun"):
                    status, body = await api.delete(f"{path}?{q}")
                    assert_status_4xx(status, body, f"DELETE {path}?{q}")
                    if status < 400:
                        await api.create_pod("p")
    for value in HOSTILE_NUMBERS:
        body = {"gracePeriodSeconds": value, "propagationPolicy": value}
        status, out = await api.delete("/api/v1/namespaces/default/pods/p", body)
        assert_status_4xx(status, out, f"DELETE body {value!r}")
        status, out = await api.delete(
            "/api/v1/namespaces/default/pods/p",
            raw=b'{"gracePeriodSeconds": %s}' % value.encode(errors="replace")[:5000],
        )
        assert_status_4xx(status, out, f"DELETE raw {value!r}")
        if status < 400:
            await api.create_pod("p")
    assert logged_internal_errors(internal_errors) == []
    await assert_serving(api)


async def test_hostile_write_queries_get_4xx(
    api: Api, internal_errors: pytest.LogCaptureFixture
) -> None:
    pods = "/api/v1/namespaces/default/pods"
    await api.create_pod("p")
    values = HOSTILE_NUMBERS + HOSTILE_SELECTORS + ["Strict", "All", ""]
    for value in values:
        for param in ("fieldValidation", "dryRun", "fieldManager", "pretty", "force"):
            q = f"{param}={quote(value)}"
            status, body = await api.post(f"{pods}?{q}", {"metadata": {"generateName": "g-"}})
            assert_status_4xx(status, body, f"POST {pods}?{q}")
            status, body = await api.patch(f"{pods}/p?{q}", {"metadata": {"labels": {"a": "b"}}})
            assert_status_4xx(status, body, f"PATCH {pods}/p?{q}")
            status, body = await api.patch(f"{pods}/p/status?{q}", {"status": {}})
            assert_status_4xx(status, body, f"PATCH {pods}/p/status?{q}")
    assert logged_internal_errors(internal_errors) == []
    await assert_serving(api)
