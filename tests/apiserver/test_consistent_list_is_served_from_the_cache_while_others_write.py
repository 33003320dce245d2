"""A consistent list (no resourceVersion) is served from the watch cache although the latest
writes were to another resource: the apiserver asks the store for a progress notification,
the pod cache's store watch reports it behind the pod events it already had, and the list is
answered from the cache — no store list of pods at all (Kubernetes' consistent list from
cache). A list with ``limit``, and any list on a store that cannot ask, still reads the store.

Which reads reach the store is counted by ``ListCountingStore``, a real memory or SQLite store
that counts the lists under each prefix and can be told to answer progress requests as etcd's
gateway does (it cannot ask).
"""

from __future__ import annotations

import collections

import pytest

from store import open_store
from store.base import ListResult, Store
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

    def pod_lists(self) -> int:
        return sum(n for prefix, n in self.lists.items() if prefix.startswith(POD_KEYS))

    async def list(
        self, prefix: str, *, revision: int = 0, start_after: str | None = None, limit: int = 0
    ) -> ListResult:
        self.lists[prefix] += 1
        return await super().list(prefix, revision=revision, start_after=start_after, limit=limit)

    async def request_progress(self) -> bool:
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
