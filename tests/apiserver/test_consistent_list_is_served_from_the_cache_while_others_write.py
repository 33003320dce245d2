"""A consistent list (no resourceVersion) is served from the watch cache although the latest
writes were to another resource: the apiserver asks the store for a progress notification,
the pod cache's store watch reports it behind the pod events it already had, and the list is
answered from the cache — no store list of pods at all (Kubernetes' consistent list from
cache). A list with ``limit``, and any list on a store that cannot ask, still reads the store.

Which reads reach the store is counted by ``ListCountingStore``, a real memory or SQLite store
that counts the lists under each prefix and can be told to answer progress requests as etcd's
gateway does (it cannot ask), to lose them (it says it asked, and no notification ever comes:
the cache stays behind, and the list is read from the store once the wait runs out), or to fail
its pod lists. Each consistent list is counted in
``apiserver_watch_cache_consistent_read_total`` as Kubernetes' cacher counts it.
"""

from __future__ import annotations

import collections

import pytest

from kubelite.testing.metrics import samples
from services.apiserver import listing
from store import open_store
from store.base import ListResult, Store, StoreUnavailable
from tests.apiserver.conftest import Api, MakeApi
from tests.forwarding_store import ForwardingStore

PODS = "/api/v1/namespaces/default/pods"
ALL_PODS = "/api/v1/pods"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
POD_KEYS = "/registry/core/pods/"


class ListCountingStore(ForwardingStore):
    """A real store that counts ``list`` calls by prefix; ``can_ask=False`` makes it answer
    progress requests as a store that cannot ask does."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.lists: collections.Counter[str] = collections.Counter()
        self.can_ask = True
        self.loses_progress = False
        self.pod_lists_fail = False

    def pod_lists(self) -> int:
        return sum(n for prefix, n in self.lists.items() if prefix.startswith(POD_KEYS))

    async def list(
        self, prefix: str, *, revision: int = 0, start_after: str | None = None, limit: int = 0
    ) -> ListResult:
        self.lists[prefix] += 1
        if self.pod_lists_fail and prefix.startswith(POD_KEYS):
            raise StoreUnavailable("the pod list failed (the test's store)", timed_out=False)
        return await super().list(prefix, revision=revision, start_after=start_after, limit=limit)

    async def request_progress(self) -> bool:
        if self.loses_progress:
            return True  # "asked": no notification will come
        return self.can_ask and await super().request_progress()


@pytest.fixture(params=["memory", "sqlite"])
async def counted(
    request: pytest.FixtureRequest, make_api: MakeApi, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Api, ListCountingStore]:
    url = "memory://"
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('store')}/store.db"
    store = ListCountingStore(open_store(url))
    return await make_api(store=store), store


async def consistent_reads(api: Api, *, success: str, fallback: str) -> float:
    """``apiserver_watch_cache_consistent_read_total`` of pods (0 while the series is absent)."""
    status, page = await api.get("/metrics")
    assert status == 200
    labels = {"group": "", "resource": "pods", "success": success, "fallback": fallback}
    found = [
        s.value
        for s in samples(page)
        if s.name == "apiserver_watch_cache_consistent_read_total" and s.labels == labels
    ]
    return found[0] if found else 0.0


async def pods_then_a_write_elsewhere(api: Api) -> int:
    """Two pods, then a ConfigMap: the store's latest write is not a pod's. Its revision."""
    await api.create_pod("p0")
    await api.create_pod("p1")
    written = await api.ok("POST", CONFIGMAPS, {"metadata": {"name": "elsewhere"}, "data": {}})
    return int(written["metadata"]["resourceVersion"])


async def test_a_consistent_list_is_served_from_the_cache_after_a_write_elsewhere(
    counted: tuple[Api, ListCountingStore],
) -> None:
    api, store = counted
    latest = await pods_then_a_write_elsewhere(api)
    before = store.pod_lists()

    for path in (PODS, ALL_PODS):
        listed = await api.ok("GET", path)
        assert [p["metadata"]["name"] for p in listed["items"]] == ["p0", "p1"]
        assert int(listed["metadata"]["resourceVersion"]) >= latest

    assert store.pod_lists() == before  # neither list read the store
    assert await consistent_reads(api, success="true", fallback="false") == 2
    assert await consistent_reads(api, success="true", fallback="true") == 0


async def test_a_list_at_a_revision_past_the_cache_is_served_from_it_too(
    counted: tuple[Api, ListCountingStore],
) -> None:
    api, store = counted
    latest = await pods_then_a_write_elsewhere(api)
    before = store.pod_lists()

    listed = await api.ok("GET", f"{PODS}?resourceVersion={latest}")

    assert len(listed["items"]) == 2 and int(listed["metadata"]["resourceVersion"]) >= latest
    assert store.pod_lists() == before


async def test_a_consistent_list_with_a_limit_reads_the_store(
    counted: tuple[Api, ListCountingStore],
) -> None:
    api, store = counted
    await pods_then_a_write_elsewhere(api)
    before = store.pod_lists()

    page = await api.ok("GET", f"{PODS}?limit=1")

    assert [p["metadata"]["name"] for p in page["items"]] == ["p0"]
    assert page["metadata"]["continue"]
    assert store.pod_lists() == before + 1


async def test_a_store_that_cannot_ask_for_progress_is_read(
    counted: tuple[Api, ListCountingStore],
) -> None:
    api, store = counted
    latest = await pods_then_a_write_elsewhere(api)
    store.can_ask = False
    before = store.pod_lists()

    listed = await api.ok("GET", PODS)

    assert len(listed["items"]) == 2 and int(listed["metadata"]["resourceVersion"]) >= latest
    assert store.pod_lists() == before + 1


async def test_a_cache_that_does_not_catch_up_in_time_leaves_the_list_to_the_store(
    counted: tuple[Api, ListCountingStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, store = counted
    latest = await pods_then_a_write_elsewhere(api)
    store.loses_progress = True  # the pod cache stays behind the ConfigMap's revision
    monkeypatch.setattr(listing, "CONSISTENT_READ_WAIT", 0.05)
    before = store.pod_lists()

    listed = await api.ok("GET", PODS)

    assert [p["metadata"]["name"] for p in listed["items"]] == ["p0", "p1"]
    assert int(listed["metadata"]["resourceVersion"]) >= latest
    assert store.pod_lists() == before + 1
    assert await consistent_reads(api, success="true", fallback="true") == 1
    assert await consistent_reads(api, success="true", fallback="false") == 0


async def test_a_failed_store_read_after_the_wait_is_counted_as_a_failure(
    counted: tuple[Api, ListCountingStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, store = counted
    await pods_then_a_write_elsewhere(api)
    store.loses_progress = True
    store.pod_lists_fail = True
    monkeypatch.setattr(listing, "CONSISTENT_READ_WAIT", 0.05)

    status, body = await api.get(PODS)

    assert status == 503 and body["kind"] == "Status", body
    assert await consistent_reads(api, success="false", fallback="true") == 1
    store.pod_lists_fail = False  # the server keeps serving
    assert len((await api.ok("GET", PODS))["items"]) == 2


async def test_a_store_that_cannot_ask_is_read_without_counting(
    counted: tuple[Api, ListCountingStore],
) -> None:
    api, store = counted
    await pods_then_a_write_elsewhere(api)
    store.can_ask = False

    await api.ok("GET", PODS)

    for success, fallback in (("true", "false"), ("true", "true"), ("false", "true")):
        assert await consistent_reads(api, success=success, fallback=fallback) == 0
