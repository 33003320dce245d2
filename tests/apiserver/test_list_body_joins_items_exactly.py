"""A list body is its head, its items joined by commas, and its tail — built in one copy
(``listing.joined``), for no items, one, and many; and a served list parses as JSON."""

from __future__ import annotations

import json

import pytest

from services.apiserver.listing import joined
from tests.apiserver.conftest import Api


@pytest.mark.parametrize("items", [[], [b"1"], [b"1", b"{}"], [b'"x"'] * 7])
def test_joined_is_head_items_and_tail(items: list[bytes]) -> None:
    assert joined(b"[", items, b"]") == b"[" + b",".join(items) + b"]"
    assert json.loads(joined(b"[", items, b"]")) == [json.loads(i) for i in items]


async def test_a_served_list_of_several_pods_parses(api: Api) -> None:
    for name in ("a", "b", "c"):
        await api.create_pod(name)
    for query in ("", "?resourceVersion=0", "?limit=2"):
        listed = await api.ok("GET", f"/api/v1/namespaces/default/pods{query}")
        names = [p["metadata"]["name"] for p in listed["items"]]
        assert names == (["a", "b"] if "limit" in query else ["a", "b", "c"])
