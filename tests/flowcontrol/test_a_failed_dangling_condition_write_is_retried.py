"""The task that keeps the FlowSchemas' ``Dangling`` condition survives a failed write: the
store refuses the first write of a schema naming a missing level, the task retries after its
backoff and marks the schema, and every background task of the apiserver is still running
(one that ended would stop the server).
"""

from __future__ import annotations

from typing import Any

from services.apiserver.app import BACKGROUND
from store import open_store
from store.base import KeyValue, Store, StoreError
from tests.flowcontrol.conftest import Cluster

SCHEMAS = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas"
ORPHAN_KEY = "/registry/flowcontrol.apiserver.k8s.io/flowschemas/orphan"


class FailsOnce:
    """The real store; the first update of ``key`` raises a ``StoreError``."""

    def __init__(self, inner: Store, *, key: str) -> None:
        self.inner = inner
        self.key = key
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def update(self, key: str, value: bytes, **kw: Any) -> KeyValue:
        if key == self.key and not self.failed:
            self.failed = True
            raise StoreError("disk I/O error (injected)")
        return await self.inner.update(key, value, **kw)


async def test_the_orphan_is_marked_after_a_failed_write(start_cluster: Any) -> None:
    store = FailsOnce(open_store("memory://"), key=ORPHAN_KEY)
    cluster: Cluster = await start_cluster(store)
    orphan = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": "orphan"},
        "spec": {"priorityLevelConfiguration": {"name": "nowhere"}},
    }
    created = await cluster.admin("POST", SCHEMAS, orphan)

    def dangling(event: dict[str, Any]) -> bool:
        obj = event["object"]
        conditions = (obj.get("status") or {}).get("conditions") or []
        return obj["metadata"]["name"] == "orphan" and any(
            c.get("type") == "Dangling" and c.get("status") == "True" for c in conditions
        )

    await cluster.watch_until(SCHEMAS, since=created["metadata"]["resourceVersion"], done=dangling)
    assert store.failed
    assert [t.get_name() for t in cluster.app[BACKGROUND].tasks if t.done()] == []
