"""Watch streams: start points, exact resume, selectors, 410s, bookmarks, initial events, timeouts."""

from __future__ import annotations

import asyncio

import pytest

from api.registry import REGISTRY
from services.apiserver.context import CONTEXT
from tests.apiserver.conftest import Api, EventReader, summary

PODS = "/api/v1/namespaces/default/pods"


async def test_watch_without_resource_version_starts_with_current_state(api: Api) -> None:
    await api.create_pod("a")
    await api.create_pod("b")
    async with api.watch(PODS) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("application/json")
        assert resp.headers.get("Transfer-Encoding") == "chunked"
        events = EventReader(resp)
        assert summary(await events.take(2)) == [("ADDED", "a"), ("ADDED", "b")]
        await api.create_pod("c")
        [event] = await events.take(1)
        assert summary([event]) == [("ADDED", "c")]
        assert event["object"]["kind"] == "Pod" and event["object"]["apiVersion"] == "v1"


async def test_watch_from_resource_version_sees_exactly_the_missed_events(api: Api) -> None:
    a = await api.create_pod("a")
    rv = a["metadata"]["resourceVersion"]
    await api.create_pod("b")
    await api.patch(f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}})
    await api.delete(f"{PODS}/b")
    async with api.watch(PODS, resourceVersion=rv) as resp:
        events = EventReader(resp)
        missed = await events.take(3)
        assert summary(missed) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in missed]
        assert rvs == sorted(rvs) and rvs[0] > int(rv)
        await api.create_pod("c")
        assert summary(await events.take(1)) == [("ADDED", "c")]


async def test_watch_zero_replays_state_from_the_cache(api: Api) -> None:
    await api.create_pod("a")
    async with api.watch(PODS, resourceVersion="0") as resp:
        events = EventReader(resp)
        assert summary(await events.take(1)) == [("ADDED", "a")]


async def test_field_selected_watch_sees_pods_arrive_and_leave_its_node(api: Api) -> None:
    await api.create_pod("a")
    await api.create_pod("b", nodeName="node2")
    async with api.watch("/api/v1/pods", fieldSelector="spec.nodeName=node1") as resp:
        events = EventReader(resp)
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "a"},
            "target": {"kind": "Node", "name": "node1"},
        }
        await api.ok("POST", f"{PODS}/a/binding", binding)
        [added] = await events.take(1)
        assert summary([added]) == [("ADDED", "a")]
        assert added["object"]["spec"]["nodeName"] == "node1"
        await api.patch(f"{PODS}/a", {"metadata": {"labels": {"k": "v"}}})
        assert summary(await events.take(1)) == [("MODIFIED", "a")]
        await api.delete(f"{PODS}/a?gracePeriodSeconds=0")
        assert summary(await events.take(1)) == [("DELETED", "a")]


async def test_label_selected_watch_gets_deleted_when_an_object_stops_matching(api: Api) -> None:
    created = await api.create_pod("a", labels={"app": "web"})
    async with api.watch(
        PODS, labelSelector="app=web", resourceVersion=created["metadata"]["resourceVersion"]
    ) as resp:
        events = EventReader(resp)
        changed = await api.ok(
            "PATCH",
            f"{PODS}/a",
            None,
            raw=b'{"metadata":{"labels":{"app":"db"}}}',
            content_type="application/merge-patch+json",
        )
        [gone] = await events.take(1)
        assert gone["type"] == "DELETED"
        # the previous state, stamped with the revision of the change
        assert gone["object"]["metadata"]["labels"] == {"app": "web"}
        assert (
            gone["object"]["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
        )
        await api.patch(f"{PODS}/a", {"metadata": {"labels": {"app": "web"}}})
        assert summary(await events.take(1)) == [("ADDED", "a")]


async def test_resume_older_than_the_ring_is_served_from_store_history(make_api) -> None:
    api = await make_api("sqlite", watch_cache_capacity=2)
    first = await api.create_pod("a")
    rv = first["metadata"]["resourceVersion"]
    for name in ("b", "c", "d", "e"):
        await api.create_pod(name)
    async with api.watch(PODS, resourceVersion=rv) as resp:
        events = EventReader(resp)
        assert summary(await events.take(4)) == [("ADDED", n) for n in "bcde"]
        await api.create_pod("f")
        assert summary(await events.take(1)) == [("ADDED", "f")]


async def test_watch_from_a_compacted_revision_gets_a_410_error_event(make_api) -> None:
    api = await make_api("memory", watch_cache_capacity=2)
    first = await api.create_pod("a")
    rv = first["metadata"]["resourceVersion"]
    for name in ("b", "c", "d", "e"):
        await api.create_pod(name)
    compacted = await api.store.current_revision()
    await api.store.compact(compacted)
    async with api.watch(PODS, resourceVersion=rv) as resp:
        assert resp.status == 200
        events = await EventReader(resp).rest()
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"].startswith(f"too old resource version: {rv} (")


async def test_bookmarks_carry_a_resumable_resource_version(make_api) -> None:
    api = await make_api("memory", bookmark_interval=0.05)
    created = await api.create_pod("a")
    async with api.watch(
        PODS, resourceVersion=created["metadata"]["resourceVersion"], allowWatchBookmarks="true"
    ) as resp:
        events = EventReader(resp)
        bookmark = await events.next()
        assert bookmark is not None and bookmark["type"] == "BOOKMARK"
        assert bookmark["object"] == {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
        }


async def test_send_initial_events_ends_with_an_annotated_bookmark(api: Api) -> None:
    await api.create_pod("a")
    await api.create_pod("b")
    async with api.watch(
        PODS,
        sendInitialEvents="true",
        resourceVersionMatch="NotOlderThan",
        allowWatchBookmarks="true",
    ) as resp:
        events = EventReader(resp)
        got = await events.take(3, skip_bookmarks=False)
        assert summary(got[:2]) == [("ADDED", "a"), ("ADDED", "b")]
        assert got[2]["type"] == "BOOKMARK"
        assert got[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        await api.create_pod("c")
        assert summary(await events.take(1)) == [("ADDED", "c")]


async def test_send_initial_events_requires_not_older_than(api: Api) -> None:
    status, out = await api.get(f"{PODS}?watch=1&sendInitialEvents=true")
    assert status == 400 and out["reason"] == "BadRequest"


@pytest.mark.looptime
async def test_watch_from_beyond_the_store_gets_a_504_error_event(make_api) -> None:
    api = await make_api("memory")
    ahead = await api.store.current_revision() + 100
    async with api.watch(PODS, resourceVersion=ahead) as resp:
        assert resp.status == 200
        events = await EventReader(resp).rest()
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert status["code"] == 504 and status["reason"] == "Timeout"
    assert status["message"].startswith(f"Too large resource version: {ahead}, current: ")
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


@pytest.mark.looptime
async def test_timeout_seconds_ends_the_stream(make_api) -> None:
    # memory store only: virtual time and the SQLite store's worker threads do not mix
    api = await make_api("memory")
    async with api.watch(PODS, timeoutSeconds=30, resourceVersion="0") as resp:
        assert await EventReader(resp).rest() == []


async def test_kubectl_watch_gets_one_row_tables(api: Api) -> None:
    await api.create_pod("a")
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    async with api.client.get(
        PODS, params={"watch": "1", "resourceVersion": "0"}, headers={"Accept": accept}
    ) as resp:
        assert resp.headers["Content-Type"].startswith("application/json;as=Table")
        events = EventReader(resp)
        [first] = await events.take(1)
        assert first["object"]["kind"] == "Table"
        assert first["object"]["columnDefinitions"]
        assert len(first["object"]["rows"]) == 1
        await api.create_pod("b")
        [second] = await events.take(1)
        assert second["object"]["columnDefinitions"] is None
        assert second["object"]["rows"][0]["object"]["metadata"]["name"] == "b"


async def test_legacy_watch_path_selects_one_object(api: Api) -> None:
    await api.create_pod("a")
    await api.create_pod("b")
    async with api.client.get("/api/v1/watch/namespaces/default/pods/b") as resp:
        events = EventReader(resp)
        assert summary(await events.take(1)) == [("ADDED", "b")]


@pytest.mark.looptime
async def test_a_client_that_goes_away_releases_its_watcher(make_api) -> None:
    api = await make_api("memory", bookmark_interval=1.0)
    cache = api.client.app[CONTEXT].cache(REGISTRY.get("", "v1", "pods"))
    resp = await api.client.get(PODS, params={"watch": "1", "resourceVersion": "0"})
    assert resp.status == 200
    assert cache.watcher_count == 1
    resp.close()  # the client hangs up on a quiet watch
    for _ in range(10):  # virtual seconds: the server checks the connection once per interval
        if cache.watcher_count == 0:
            break
        await asyncio.sleep(1)
    assert cache.watcher_count == 0


@pytest.mark.parametrize("direct", [True, False], ids=["direct-writes", "queued-writes"])
async def test_bursts_of_events_arrive_complete_and_in_order(make_api, direct: bool) -> None:
    api = await make_api("memory", direct_watch_writes=direct)
    async with api.watch(PODS, resourceVersion="0", allowWatchBookmarks="true") as resp:
        events = EventReader(resp)
        await asyncio.gather(*(api.create_pod(f"p{i:03d}") for i in range(200)))
        got = await events.take(200)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in got]
    assert rvs == sorted(rvs) and len(set(rvs)) == 200
    assert sorted(e["object"]["metadata"]["name"] for e in got) == [f"p{i:03d}" for i in range(200)]
