"""The status manager: the one writer of pod status, through ``pods/{name}/status`` only.

Why: pod workers compute status often (every sync); the apiserver should see a write only when
something changed, the worker must never wait on the network to keep running containers, and a
write that loses a race must be retried from fresh state. So, like the kubelet's
``status_manager.go``:

* ``set_status(pod, status)`` records the desired status and queues the pod's uid; it never
  blocks. Keys go through ``client.workqueue`` and a ``client.controller.Controller`` (failed
  writes retried with per-key backoff); one manager serves every node of a process.
* A write happens only if the desired status differs from the status the API holds (compared
  with empty values dropped, as the server drops them: ``same_normalized``, which builds no
  copies). It is a PUT of the latest known object
  with the new status — a compare-and-swap on its resourceVersion; on ``Conflict`` the pod is
  read again and the write retried; a pod that is gone (404, or a new uid under the same name)
  is forgotten.
* ``write_now(pod, status)`` does the same synchronously, for the final status of a terminating
  pod that must land before the kubelet deletes the pod object.

It also reports how long each pod took from being first seen to its first Running status
(``pod_started``: the kubelet's ``kubelet_pod_start_duration_seconds``).

Not guaranteed: ordering between pods; a status set for a pod whose object was deleted is
dropped silently.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from api.errors import Conflict, NotFound
from api.registry import REGISTRY, ResourceType
from client.controller import Controller
from client.rest import ApiClient
from client.workqueue import WorkQueue

__all__ = ["StatusManager", "normalize", "same_normalized"]

log = logging.getLogger("kubelet.status")

Obj = dict[str, Any]
CONFLICT_RETRIES = 5


def _pods() -> ResourceType:
    rt = REGISTRY.get("", "v1", "pods")
    assert rt is not None
    return rt


_MAPPINGS = (dict, Mapping)
"""What JSON objects are: dicts first, since a check against the ABC alone is slow."""


def normalize(value: Any) -> Any:
    """Drop ``None``, empty dicts and empty lists, recursively: what survives a round trip."""
    if isinstance(value, _MAPPINGS):
        out = {k: normalize(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def same_normalized(a: Any, b: Any) -> bool:
    """``normalize(a) == normalize(b)``, without building either: a status is compared on every
    reconcile, and the two normalised copies cost more than the walk (subtrees already equal
    are compared by ``==`` in C and not walked)."""
    if a == b:
        return True
    if isinstance(a, _MAPPINGS) and isinstance(b, _MAPPINGS):
        for k, v in a.items():
            w = b.get(k)
            if v != w and not (_vanishes(v) and _vanishes(w)) and not same_normalized(v, w):
                return False
        return all(k in a or _vanishes(w) for k, w in b.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same_normalized, a, b))
    return False


def _vanishes(value: Any) -> bool:
    """Whether ``normalize`` drops ``value`` from the mapping holding it."""
    if value is None:
        return True
    if isinstance(value, _MAPPINGS):
        return all(map(_vanishes, value.values()))
    return isinstance(value, list) and not value


def _rv(obj: Mapping[str, Any] | None) -> int:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


@dataclass(slots=True)
class _Desired:
    pod: Obj
    """The newest pod object known (informer or our own write's answer)."""
    status: Obj
    seen_at: float | None = None
    """When this kubelet first saw the pod not yet Running (None once it ran, or if it was
    Running already when first seen)."""


class StatusManager:
    def __init__(
        self,
        *,
        client: ApiClient,
        workers: int = 4,
        pod_started: Callable[[float], None] = lambda seconds: None,
    ) -> None:
        self.client = client
        self.pod_started = pod_started
        """Called with the seconds from first seeing a pod to its status first turning Running
        (``kubelet_pod_start_duration_seconds``)."""
        self.rt = _pods()
        self._desired: dict[str, _Desired] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.queue: WorkQueue[str] = WorkQueue(name="pod-status")
        self._controller = Controller(
            name="pod-status", queue=self.queue, reconcile=self._reconcile, workers=workers
        )
        self.writes = 0
        """Status writes that reached the apiserver (for tests and benchmarks)."""

    async def run(self) -> None:
        await self._controller.run()

    def observe(self, pod: Obj) -> None:
        """Tell the manager about a newer copy of the pod (from the informer)."""
        uid = (pod.get("metadata") or {}).get("uid")
        d = self._desired.get(uid) if uid else None
        if d is not None and _rv(pod) >= _rv(d.pod):
            d.pod = pod

    def set_status(self, pod: Obj, status: Obj) -> None:
        uid = pod["metadata"]["uid"]
        d = self._desired.get(uid)
        if d is None:
            running = (pod.get("status") or {}).get("phase") == "Running"
            d = self._desired[uid] = _Desired(
                pod=pod, status=status, seen_at=None if running else time.monotonic()
            )
        else:
            if _rv(pod) >= _rv(d.pod):
                d.pod = pod
            d.status = status
        if d.seen_at is not None and status.get("phase") == "Running":
            self.pod_started(time.monotonic() - d.seen_at)
            d.seen_at = None
        self.queue.add(uid)

    def forget(self, uid: str) -> None:
        self._desired.pop(uid, None)
        self._locks.pop(uid, None)

    async def write_now(self, pod: Obj, status: Obj) -> Obj | None:
        """Write at once (and wait); the pod as stored afterwards, or None if it is gone."""
        self.set_status(pod, status)
        await self._reconcile(pod["metadata"]["uid"])
        d = self._desired.get(pod["metadata"]["uid"])
        return d.pod if d is not None else None

    def status_of(self, uid: str) -> Obj | None:
        d = self._desired.get(uid)
        return d.status if d is not None else None

    async def _reconcile(self, uid: str) -> None:
        lock = self._locks.setdefault(uid, asyncio.Lock())
        async with lock:
            d = self._desired.get(uid)
            if d is None:
                return
            for _ in range(CONFLICT_RETRIES):
                if same_normalized(d.status, d.pod.get("status") or {}):
                    return
                # a view, not a copy: the client encodes it before its first await, keeping nothing
                body = {**d.pod, "status": d.status}
                meta = body["metadata"]
                try:
                    stored = await self.client.update_status(
                        self.rt, body, namespace=meta["namespace"]
                    )
                except NotFound:
                    log.info(
                        "pod %s/%s is gone; dropping its status", meta["namespace"], meta["name"]
                    )
                    self.forget(uid)
                    return
                except Conflict:
                    try:
                        fresh = await self.client.get(
                            self.rt, meta["name"], namespace=meta["namespace"]
                        )
                    except NotFound:
                        self.forget(uid)
                        return
                    if fresh["metadata"].get("uid") != uid:
                        self.forget(uid)
                        return
                    d.pod = fresh
                    continue
                self.writes += 1
                if _rv(stored) >= _rv(d.pod):
                    d.pod = stored
                return
            raise Conflict(f"pod {uid}: status write kept conflicting; will retry")
