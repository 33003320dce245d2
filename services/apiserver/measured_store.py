"""A ``Store`` that times every call: kube-apiserver's ``etcd_request_duration_seconds``.

Why: when requests are slow, the first split is "the apiserver or its storage?". Kubernetes
times every etcd call by operation and resource (``etcd3/metrics``); ``MeasuredStore`` does
the same around whichever backend the apiserver opened (memory, SQLite, etcd), so the metric
exists on all of them under the same name.

* ``operation``: ``get``, ``list``, ``create``, ``update``, ``delete``, ``compact``,
  ``current_revision`` (etcd3's ``get``/``list``/``create``/``update``/``delete`` are the ones a
  dashboard reads; the store's own calls keep their names);
* ``type``: the resource the key belongs to, as Kubernetes writes it (``pods``,
  ``deployments.apps``), read from the key (``/registry/<group>/<plural>/...``; other keys are
  ``other``); a failed call is timed too.

Buckets are Kubernetes' (5 ms to 60 s). Watches are not timed (they last; the watch cache
reports what it received). Not here: request and response sizes, lease object counts.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Final

from component.metrics import Metrics
from services.apiserver.loop_metrics import HistogramChild, LoopHistogram
from services.apiserver.metrics import REQUEST_BUCKETS
from store.base import Event, KeyValue, ListResult, Store

__all__ = ["MeasuredStore"]

_PREFIX: Final = "/registry/"


def _type(key: str) -> str:
    """``pods`` for ``/registry/core/pods/ns/x``; ``deployments.apps`` for an ``apps`` key."""
    if not key.startswith(_PREFIX):
        return "other"
    group, _, rest = key[len(_PREFIX) :].partition("/")
    plural = rest.partition("/")[0]
    if not plural:
        return "other"
    return plural if group == "core" else f"{plural}.{group}"


class _Timed:
    """Observes on ``latency`` the time its ``with`` body takes, whether it returns or raises.
    (A class: a generator-based context manager costs several times more, once per store
    call.)"""

    __slots__ = ("latency", "started")

    def __init__(self, latency: HistogramChild) -> None:
        self.latency = latency
        self.started = 0.0

    def __enter__(self) -> None:
        self.started = time.monotonic()

    def __exit__(self, *exc_info: object) -> None:
        self.latency.observe(time.monotonic() - self.started)


class MeasuredStore:
    """``inner``, with each call's time observed on ``metrics``."""

    def __init__(self, inner: Store, metrics: Metrics) -> None:
        self.inner = inner
        self.latency = LoopHistogram(
            metrics,
            "etcd_request_duration_seconds",
            "Etcd request latency in seconds for each operation and object type.",
            ("operation", "type"),
            buckets=REQUEST_BUCKETS,
        )

    def _timed(self, operation: str, key: str = "") -> _Timed:
        """A timer of one call of ``operation`` on ``key``."""
        return _Timed(self.latency.labels(operation, _type(key)))

    async def get(self, key: str) -> KeyValue | None:
        with self._timed("get", key):
            return await self.inner.get(key)

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        start_after: str | None = None,
        limit: int = 0,
    ) -> ListResult:
        with self._timed("list", prefix):
            return await self.inner.list(
                prefix, revision=revision, start_after=start_after, limit=limit
            )

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> KeyValue:
        with self._timed("create", key):
            if ttl is None:  # as storage.py calls it: stores written before ttl take none
                return await self.inner.create(key, value)
            return await self.inner.create(key, value, ttl=ttl)

    async def update(
        self, key: str, value: bytes, *, expected_revision: int, ttl: float | None = None
    ) -> KeyValue:
        with self._timed("update", key):
            if ttl is None:
                return await self.inner.update(key, value, expected_revision=expected_revision)
            return await self.inner.update(key, value, expected_revision=expected_revision, ttl=ttl)

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        with self._timed("delete", key):
            return await self.inner.delete(key, expected_revision=expected_revision)

    def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        on_progress: Callable[[int], None] | None = None,
    ) -> AsyncIterator[Event]:
        return self.inner.watch(prefix, after_revision=after_revision, on_progress=on_progress)

    async def request_progress(self) -> bool:
        return await self.inner.request_progress()

    async def current_revision(self) -> int:
        with self._timed("current_revision"):
            return await self.inner.current_revision()

    async def compacted_revision(self) -> int:
        return await self.inner.compacted_revision()

    async def compact(self, revision: int) -> None:
        with self._timed("compact"):
            await self.inner.compact(revision)

    async def close(self) -> None:
        await self.inner.close()
