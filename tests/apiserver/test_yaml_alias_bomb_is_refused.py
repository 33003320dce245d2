"""A YAML alias bomb answers 400 at once, and no body decode stalls the event loop.

Nine levels of aliases in a few hundred bytes expand to 10^9 strings; before, the apiserver
expanded them on the event loop (``/readyz`` timed out, 4 GiB of memory). Kubernetes' decoder
refuses such a body ("document contains excessive aliasing", go-yaml's alias-ratio rule); so
does kubelite, also when the body comes without a Content-Type (JSON falls back to YAML there).

The stall checks run against a real apiserver process: a loop stalled in the server is then
visible from the test's own loop as a ``/readyz`` that does not answer within a second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from kubelite.testing import ComponentProcess
from tests.apiserver.conftest import MakeApi

PODS = "/api/v1/namespaces/default/pods"


def alias_bomb() -> bytes:
    lol = '"lol"'
    lines = [f"a: &a [{','.join([lol] * 10)}]"]
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [{','.join([f'*{previous}'] * 10)}]")
        previous = name
    return ("\n".join(lines) + "\n").encode()


def test_the_bomb_is_small_and_nine_levels_deep() -> None:
    bomb = alias_bomb()
    assert len(bomb) < 1024 and bomb.count(b"&") == 9  # 10 strings x 10^8 aliases


@pytest.mark.parametrize("content_type", ["application/yaml", ""])
async def test_alias_bomb_is_400(make_api: MakeApi, content_type: str) -> None:
    api = await make_api("memory")
    headers = {"Content-Type": content_type}  # "" : no media type, JSON then YAML is tried
    status, out = await api.post(PODS, raw=alias_bomb(), headers=headers)
    assert status == 400, out
    assert out["reason"] == "BadRequest"
    assert out["message"] == "error decoding YAML: yaml: document contains excessive aliasing"


async def test_aliases_in_moderation_still_work(make_api: MakeApi) -> None:
    api = await make_api("memory")
    body = (
        b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: &l {app: web}\n"
        b"  annotations: *l\nspec:\n  containers:\n  - name: c\n    image: nginx\n"
    )
    status, out = await api.post(PODS, raw=body, content_type="application/yaml")
    assert status == 201, out
    assert out["metadata"]["annotations"] == {"app": "web"}


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        (b"[" * (3 * 1024 * 1024 - 10), "application/json"),
        (b"[" * (3 * 1024 * 1024 - 10), ""),
        (b"a:\n" + b"- " * (1024 * 1024), "application/yaml"),
        (b'{"a":' * 500_000 + b"1" + b"}" * 500_000, "application/merge-patch+json"),
    ],
    ids=["json", "no content type", "yaml", "patch"],
)
async def test_3mib_nested_bodies_get_a_status(
    make_api: MakeApi, raw: bytes, content_type: str
) -> None:
    api = await make_api("memory")
    await api.create_pod("p")
    path = f"{PODS}/p" if "patch" in content_type else PODS
    method = "PATCH" if "patch" in content_type else "POST"
    headers = {"Content-Type": content_type}
    status, out = await api.request(method, path, raw=raw, headers=headers)
    assert 400 <= status < 500, out
    assert out["kind"] == "Status"


def big_yaml_pod() -> bytes:
    """About 400 KB of YAML: PyYAML needs seconds for it, far longer than a loop may stall."""
    notes = "".join(f"  note{i}: value {i}\n" for i in range(16_000))
    return f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n  annotations:\n{notes}".encode()


async def readyz_gaps_while_pending(
    session: aiohttp.ClientSession, request: asyncio.Future[Any]
) -> tuple[float, float]:
    """Ask /readyz back to back until ``request`` completes.

    Returns the longest wait for one /readyz answer and how long ``request`` took. Both are
    measured on the same loaded machine in the same run, so their ratio says whether the
    server's loop was blocked by the decode, whatever the machine's speed: a blocked loop
    makes one /readyz wait for (nearly) the whole decode.
    """
    started = time.monotonic()
    longest = 0.0
    while not request.done():
        asked = time.monotonic()
        async with session.get("/readyz") as resp:
            assert resp.status == 200
        longest = max(longest, time.monotonic() - asked)
    return longest, time.monotonic() - started


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        (alias_bomb(), "application/yaml", 400),
        (alias_bomb(), "", 400),
        (big_yaml_pod(), "application/yaml", 422),  # annotations over 256 KiB
    ],
    ids=["bomb", "bomb without content type", "400 KB yaml"],
)
async def test_readyz_answers_while_a_body_is_decoded(
    apiserver_process: Callable[..., ComponentProcess],
    body: bytes,
    content_type: str,
    code: int,
) -> None:
    server = await asyncio.to_thread(apiserver_process)
    async with aiohttp.ClientSession(server.url) as session:

        async def post() -> tuple[int, Any]:
            headers = {"Content-Type": content_type}
            async with session.post(PODS, data=body, headers=headers) as resp:
                return resp.status, await resp.json()

        request = asyncio.ensure_future(post())
        try:
            longest, took = await readyz_gaps_while_pending(session, request)
        finally:
            if not request.done():
                request.cancel()
        status, out = await request
        assert status == code, out
        assert out["kind"] == "Status"
        async with session.get("/readyz") as resp:
            assert resp.status == 200
    # A request that took long enough to measure must not have held /readyz for most of it.
    if took > 0.5:
        assert longest < took / 2, f"/readyz waited {longest:.2f}s of a {took:.2f}s decode"
