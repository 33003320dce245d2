"""A watch asked for over HTTP/1.0 (``curl -0``) streams without chunked encoding, then closes.

HTTP/1.0 has no chunked transfer encoding; Go's net/http (kube-apiserver) answers such a client
with the body unframed and ends the connection when the watch ends. Before, kubelite tried to
chunk anyway and answered 500.
"""

from __future__ import annotations

import json

from tests.apiserver.conftest import MakeApi


async def test_http10_watch_is_unchunked_and_ends_with_the_connection(make_api: MakeApi) -> None:
    api = await make_api("memory")
    await api.create_pod("p")
    answer = await api.raw_exchange(
        b"GET /api/v1/namespaces/default/pods?watch=1&resourceVersion=0&timeoutSeconds=1 "
        b"HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
    )
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    assert status_line.split(" ")[1] == "200", answer[:500]
    headers = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
    assert "transfer-encoding" not in headers, headers
    assert headers["content-type"] == "application/json"
    events = [json.loads(line) for line in body.splitlines() if line.strip()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "p")]


async def test_http11_watch_is_still_chunked(make_api: MakeApi) -> None:
    api = await make_api("memory")
    await api.create_pod("p")
    answer = await api.raw_exchange(
        b"GET /api/v1/namespaces/default/pods?watch=1&resourceVersion=0&timeoutSeconds=1 "
        b"HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"200" in head.split(b"\r\n")[0]
    assert b"transfer-encoding: chunked" in head.lower()
    assert body.endswith(b"0\r\n\r\n")
