"""Test harness: watchers that await cluster states, and the resource types the tests use.

* The controller-manager processes come from ``kubelite.testing`` (see ``conftest.py``), with
  Kubernetes' leader-election timings (15 s lease, 10 s renew deadline, 2 s retry period) and
  /healthz on a port of its choosing. The timings are deliberately not
  shortened: a leader that loses its lease exits, and with a 2 s renew deadline a loaded machine
  lost it in the middle of tests about something else. A test of a takeover awaits the Lease
  changing hands on a watch; after SIGTERM the lease is released and the standby takes it
  within a retry period, after SIGKILL the successor waits the 15 s lease out.
* ``Watcher(client, rt, ...)``: an informer in the test process. ``await
  watcher.wait_until(predicate, what=...)`` re-evaluates ``predicate(objects)`` after every
  watch event and returns as soon as it holds — no sleeping, no polling; ``within`` is only a
  safety net that fails the test with what was being waited for. ``on_event`` callbacks see
  every change, for invariants that must hold "at every observed moment".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from api.registry import REGISTRY, ResourceType
from client.informer import Informer
from client.rest import ApiClient

Obj = dict[str, Any]


def rt(group: str, kind: str) -> ResourceType:
    found = REGISTRY.by_kind(group, kind)
    assert found is not None, kind
    return found


PODS = rt("", "Pod")
NODES = rt("", "Node")
RCS = rt("", "ReplicationController")
RSS = rt("apps", "ReplicaSet")
DEPLOYMENTS = rt("apps", "Deployment")
LEASES = rt("coordination.k8s.io", "Lease")
NAMESPACES = rt("", "Namespace")
EVENTS = rt("", "Event")


class Watcher:
    """Informer-backed view of one resource in the test process (``async with``)."""

    def __init__(
        self,
        client: ApiClient,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        on_event: Callable[[str, Obj], None] | None = None,
    ) -> None:
        self.informer = Informer(client, rt, namespace=namespace, label_selector=label_selector)
        self._changed = asyncio.Event()
        self._on_event = on_event
        self._task: asyncio.Task[None] | None = None
        self.informer.add_handler(
            on_add=lambda o: self._event("ADDED", o),
            on_update=lambda _old, o: self._event("MODIFIED", o),
            on_delete=lambda o: self._event("DELETED", o),
        )

    def _event(self, type_: str, obj: Obj) -> None:
        if self._on_event is not None:
            self._on_event(type_, obj)
        self._changed.set()

    async def __aenter__(self) -> Watcher:
        self._task = self.informer.start()
        await asyncio.wait_for(self.informer.wait_synced(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def objects(self) -> list[Obj]:
        return self.informer.list()

    def get(self, key: str) -> Obj | None:
        return self.informer.get(key)

    async def wait_until(
        self, predicate: Callable[[list[Obj]], bool], *, what: str, within: float = 60.0
    ) -> list[Obj]:
        try:
            async with asyncio.timeout(within):
                while True:
                    self._changed.clear()
                    objects = self.informer.list()
                    if predicate(objects):
                        return objects
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out after {within}s waiting for {what}") from None


def active(pod: Obj) -> bool:
    """Counted by a replica set: not terminal, not being deleted."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    return not pod["metadata"].get("deletionTimestamp")


def owned_by(pod: Obj, owner: Obj) -> bool:
    uid = owner["metadata"]["uid"]
    return any(
        r.get("uid") == uid and r.get("controller")
        for r in pod["metadata"].get("ownerReferences") or []
    )


def pod_template(labels: dict[str, str], *, image: str = "nginx", **spec: Any) -> Obj:
    return {
        "metadata": {"labels": dict(labels)},
        "spec": {"containers": [{"name": "app", "image": image}], **spec},
    }


def rc_body(name: str, *, replicas: int, labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    labels = labels or {"app": name}
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": dict(labels),
            "template": pod_template(labels),
            **spec,
        },
    }
