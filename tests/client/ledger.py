"""Test helpers: a ledger of informer handler calls, and a random churn driver.

``Ledger`` replays the on_add/on_update/on_delete calls into its own map and records any call
that is impossible if nothing is lost or duplicated (an add of a known key, an update or delete
of an unknown one, an update whose ``old`` is not what was last delivered, or a key going back
in time: an add or update whose resourceVersion is not newer than the last one delivered for
that key — what a watch resumed from a stale resourceVersion would replay). At the end, the
ledger's map, the informer's cache and a fresh list from the server must agree exactly.

``churn`` issues random creates / label patches / deletes of pods over a fixed pool of names;
failures while the apiserver is unreachable are tolerated (the outcome is whatever the server
says afterwards — the comparison is against a fresh list, not against what the driver thinks).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

from api.errors import AlreadyExists, NotFound, StatusError
from api.registry import REGISTRY
from client.cache import object_key
from client.informer import Informer
from client.rest import ApiClient

PODS = REGISTRY.by_kind("", "Pod")
assert PODS is not None

Obj = dict[str, Any]


def rv(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


def pod(name: str, namespace: str = "default") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"gen": "0"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


class Ledger:
    def __init__(self, informer: Informer) -> None:
        self.state: dict[str, str] = {}
        self.violations: list[str] = []
        self.calls: Counter[str] = Counter()
        self.deleted: list[str] = []
        self.newest: dict[str, int] = {}
        self._waiters: dict[str, asyncio.Future[None]] = {}
        informer.add_handler(on_add=self.on_add, on_update=self.on_update, on_delete=self.on_delete)

    def _forward(self, key: str, obj: Obj) -> None:
        version = int(rv(obj))
        if version <= self.newest.get(key, 0):
            self.violations.append(f"{key} went back to rv {version} from {self.newest[key]}")
        self.newest[key] = version

    def on_add(self, obj: Obj) -> None:
        key = object_key(obj)
        self.calls["add"] += 1
        self._forward(key, obj)
        if key in self.state:
            self.violations.append(f"add of known {key}")
        self.state[key] = rv(obj)
        waiter = self._waiters.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def on_update(self, old: Obj, new: Obj) -> None:
        key = object_key(new)
        self.calls["update"] += 1
        if old is not new:  # a resync replays the cached object: not a new version
            self._forward(key, new)
        if key not in self.state:
            self.violations.append(f"update of unknown {key}")
        elif self.state[key] != rv(old):
            self.violations.append(
                f"update of {key}: old rv {rv(old)} != delivered {self.state[key]}"
            )
        self.state[key] = rv(new)

    def on_delete(self, obj: Obj) -> None:
        key = object_key(obj)
        self.calls["delete"] += 1
        self.deleted.append(key)
        if self.state.pop(key, None) is None:
            self.violations.append(f"delete of unknown {key}")

    async def wait_added(self, key: str) -> None:
        """Until the informer delivers an add of ``key`` (the caller creates it after calling)."""
        if key in self.state:
            return
        fut = self._waiters.setdefault(key, asyncio.get_running_loop().create_future())
        await fut


async def server_state(client: ApiClient, namespace: str = "default") -> dict[str, str]:
    assert PODS is not None
    body = await client.list(PODS, namespace=namespace)
    return {object_key(item): rv(item) for item in body["items"]}


async def sentinel(client: ApiClient, ledger: Ledger, name: str, *, within: float = 60) -> None:
    """Write one more pod and wait until the informer has it: every earlier event has arrived."""
    assert PODS is not None
    waiting = asyncio.ensure_future(ledger.wait_added(f"default/{name}"))
    await client.create(PODS, pod(name))
    await asyncio.wait_for(waiting, timeout=within)


async def churn(
    client: ApiClient, *, names: list[str], ops: int, rng: random.Random, counts: Counter[str]
) -> None:
    assert PODS is not None
    present: dict[str, bool] = {}
    for i in range(ops):
        name = rng.choice(names)
        try:
            if not present.get(name, False):
                counts["create"] += 1
                await client.create(PODS, pod(name))
                present[name] = True
            elif rng.random() < 0.6:
                counts["update"] += 1
                patch = {"metadata": {"labels": {"gen": str(i)}}}
                await client.patch(PODS, name, patch, namespace="default")
            else:
                counts["delete"] += 1
                await client.delete(PODS, name, namespace="default", grace_period_seconds=0)
                present[name] = False
        except AlreadyExists:
            present[name] = True
        except NotFound:
            present[name] = False
        except (ConnectionError, StatusError):
            counts["failed"] += 1
            present.pop(name, None)  # unknown now; the next op finds out
