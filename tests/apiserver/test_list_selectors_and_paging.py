"""Lists honour label and field selectors, limit/continue paging, and resourceVersion semantics."""

from __future__ import annotations

from urllib.parse import quote

from tests.apiserver.conftest import Api

PODS = "/api/v1/namespaces/default/pods"


def names(listed: dict) -> list[str]:
    return [i["metadata"]["name"] for i in listed["items"]]


async def test_label_selector(api: Api) -> None:
    await api.create_pod("a", labels={"app": "web", "tier": "front"})
    await api.create_pod("b", labels={"app": "web", "tier": "back"})
    await api.create_pod("c", labels={"app": "db"})
    assert names(await api.ok("GET", f"{PODS}?labelSelector=app%3Dweb")) == ["a", "b"]
    assert names(await api.ok("GET", f"{PODS}?labelSelector={quote('app=web,tier!=front')}")) == [
        "b"
    ]
    assert names(await api.ok("GET", f"{PODS}?labelSelector={quote('tier in (front,back)')}")) == [
        "a",
        "b",
    ]
    assert names(await api.ok("GET", f"{PODS}?labelSelector=!tier")) == ["c"]


async def test_field_selector_on_node_name(api: Api) -> None:
    await api.create_pod("a", nodeName="node1")
    await api.create_pod("b", nodeName="node2")
    await api.create_pod("c")
    assert names(await api.ok("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode1")) == ["a"]
    assert names(await api.ok("GET", f"{PODS}?fieldSelector=spec.nodeName%3D")) == ["c"]
    assert names(await api.ok("GET", f"{PODS}?fieldSelector=metadata.name%3Db")) == ["b"]


async def test_unsupported_field_and_bad_selector_are_400(api: Api) -> None:
    status, out = await api.get(f"{PODS}?fieldSelector=spec.foo%3Dx")
    assert status == 400 and out["message"] == "field label not supported: spec.foo"
    status, out = await api.get(f"{PODS}?labelSelector={quote('a in (b')}")
    assert status == 400 and out["reason"] == "BadRequest"


async def test_limit_and_continue_page_through_a_consistent_snapshot(api: Api) -> None:
    for i in range(7):
        await api.create_pod(f"p{i}", labels={"even": str(i % 2 == 0).lower()})
    first = await api.ok("GET", f"{PODS}?limit=3")
    assert names(first) == ["p0", "p1", "p2"]
    token = first["metadata"]["continue"]
    rv = first["metadata"]["resourceVersion"]
    await api.create_pod("p3a")  # written after the first page: not in this snapshot
    second = await api.ok("GET", f"{PODS}?limit=3&continue={token}")
    assert names(second) == ["p3", "p4", "p5"]
    assert second["metadata"]["resourceVersion"] == rv
    third = await api.ok("GET", f"{PODS}?limit=3&continue={second['metadata']['continue']}")
    assert names(third) == ["p6"]
    assert "continue" not in third["metadata"]


async def test_paging_with_a_selector_fills_pages_with_matches(api: Api) -> None:
    for i in range(8):
        await api.create_pod(f"p{i}", labels={"even": str(i % 2 == 0).lower()})
    seen: list[str] = []
    url = f"{PODS}?limit=2&labelSelector=even%3Dtrue"
    while True:
        page = await api.ok("GET", url)
        assert len(page["items"]) <= 2
        seen += names(page)
        token = page["metadata"].get("continue")
        if not token:
            break
        url = f"{PODS}?limit=2&labelSelector=even%3Dtrue&continue={token}"
    assert seen == ["p0", "p2", "p4", "p6"]


async def test_resource_version_zero_is_served_from_the_cache(api: Api) -> None:
    created = await api.create_pod("a")
    listed = await api.ok("GET", f"{PODS}?resourceVersion=0")
    assert names(listed) == ["a"]
    assert int(listed["metadata"]["resourceVersion"]) >= int(created["metadata"]["resourceVersion"])
    got = await api.ok("GET", f"{PODS}/a?resourceVersion=0")
    assert got["metadata"]["uid"] == created["metadata"]["uid"]


async def test_exact_resource_version_lists_the_past(api: Api) -> None:
    a = await api.create_pod("a")
    await api.create_pod("b")
    rv = a["metadata"]["resourceVersion"]
    past = await api.ok("GET", f"{PODS}?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert names(past) == ["a"]
    assert past["metadata"]["resourceVersion"] == rv
    newer = await api.ok("GET", f"{PODS}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan")
    assert names(newer) == ["a", "b"]


async def test_too_large_resource_version_and_bad_combinations(api: Api) -> None:
    status, out = await api.get(f"{PODS}?resourceVersion=999999")
    assert status == 504 and out["reason"] == "Timeout"
    status, out = await api.get(f"{PODS}?resourceVersionMatch=Exact")
    assert status == 400
    status, out = await api.get(f"{PODS}?resourceVersion=abc")
    assert status == 400
    status, out = await api.get(f"{PODS}?continue=not-a-token")
    assert status == 400


async def test_compacted_continue_token_is_410(make_api) -> None:
    api = await make_api("memory")
    for i in range(3):
        await api.create_pod(f"p{i}")
    first = await api.ok("GET", f"{PODS}?limit=1")
    for i in range(3):
        await api.create_pod(f"q{i}")
    await api.store.compact(await api.store.current_revision())
    status, out = await api.get(f"{PODS}?limit=1&continue={first['metadata']['continue']}")
    assert status == 410, out
    assert out["reason"] == "Expired"
