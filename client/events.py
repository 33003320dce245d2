"""The event recorder: components leave core/v1 Events for people to read, without waiting.

Why: "why is my pod Pending?" is answered by ``kubectl describe pod``'s Events
("FailedScheduling: 0/2 nodes are available ..."). Recording one must never slow down or fail
the work that produced it, and a controller that retries every second must not write a new
Event every second. So, like client-go's ``record`` package:

* ``recorder.event(obj, "Warning", "FailedScheduling", message)`` only queues (O(1), never
  awaits, never raises); a named background task (``start()`` / ``run()``) does the writing;
* **aggregation**: events with the same involved object, type, reason, message and source are
  one Event whose ``count`` grows and whose ``lastTimestamp`` moves (a merge patch), exactly how
  ``kubectl describe`` shows "(x5 over 2m)". Repeats that arrive while one is still queued are
  folded into it before anything is sent;
* the Event lives in the object's namespace (``default`` for cluster-scoped objects such as
  nodes, as Kubernetes does), named ``<object name>.<hex nanoseconds>``, with
  ``involvedObject``, ``source`` {component, host}, ``reportingComponent``/``Instance``,
  ``firstTimestamp``/``lastTimestamp`` and ``count``, and — because those have one-second
  resolution and ``kubelite trace`` orders a pod's steps by when they happened — ``eventTime``,
  the MicroTime of the first occurrence (events.k8s.io's field; with it set, Kubernetes'
  validation also wants ``action``, which this recorder's callers do not name: the reason
  stands in for it).

Limits: at most ``max_pending`` distinct events wait in memory (more are dropped, with one log
line); the aggregation memory is an LRU of ``cache_size`` entries in this process only (a
restarted component starts new Events); a write that keeps failing is dropped after a few
retries (events are best effort); no similar-message folding ("combined from similar events")
and no spam filter beyond aggregation.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel

from api.errors import NotFound, StatusError
from api.meta import format_micro_time, format_time
from api.registry import REGISTRY, ResourceType
from client.backoff import Backoff, BackoffPolicy
from client.rest import ApiClient

__all__ = ["EventRecorder", "EventType"]

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
_SEND_ATTEMPTS = 3
_SEND_RETRY = BackoffPolicy(initial=0.5, factor=2.0, cap=5.0, jitter=0.5)

_Key = tuple[str, ...]


def _events() -> ResourceType:
    rt = REGISTRY.by_kind("", "Event")
    if rt is None:  # pragma: no cover - the registry always serves events
        raise RuntimeError("the registry has no core/v1 Event")
    return rt


@dataclass(slots=True)
class _Pending:
    ref: dict[str, Any]
    namespace: str
    type: str
    reason: str
    message: str
    count: int
    first: str
    last: str
    observed: str
    """The first occurrence as a MicroTime (``eventTime``)."""


@dataclass(slots=True)
class _Sent:
    name: str
    namespace: str
    count: int
    first: str
    observed: str


class EventRecorder:
    def __init__(
        self,
        client: ApiClient,
        *,
        component: str,
        host: str | None = None,
        max_pending: int = 1000,
        cache_size: int = 4096,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host if host is not None else socket.gethostname()
        self.max_pending = max_pending
        self.cache_size = cache_size
        self._rt = _events()
        self._pending: OrderedDict[_Key, _Pending] = OrderedDict()
        self._sent: OrderedDict[_Key, _Sent] = OrderedDict()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._dropped = 0
        self._seq = itertools.count()
        self.written = 0
        """Events created or patched so far."""

    # -- recording (never blocks) ---------------------------------------------------------

    def event(
        self,
        obj: Mapping[str, Any] | BaseModel,
        type_: EventType,
        reason: str,
        message: str,
    ) -> None:
        """Queue an event about ``obj``; returns at once."""
        if isinstance(obj, BaseModel):
            obj = obj.model_dump(mode="json", by_alias=True, exclude_none=True)
        meta = obj.get("metadata") or {}
        ref = {
            k: v
            for k, v in (
                ("kind", obj.get("kind")),
                ("namespace", meta.get("namespace")),
                ("name", meta.get("name")),
                ("uid", meta.get("uid")),
                ("apiVersion", obj.get("apiVersion")),
                ("resourceVersion", meta.get("resourceVersion")),
            )
            if v
        }
        namespace = str(meta.get("namespace") or "default")
        key: _Key = (
            str(ref.get("kind", "")),
            namespace,
            str(ref.get("name", "")),
            str(ref.get("uid", "")),
            type_,
            reason,
            message,
        )
        at = datetime.now(UTC)
        now = format_time(at)
        pending = self._pending.get(key)
        if pending is not None:
            pending.count += 1
            pending.last = now
            pending.ref = ref
            return
        if len(self._pending) >= self.max_pending:
            if self._dropped == 0:
                log.warning(
                    "event recorder: %d events pending; dropping new ones", self.max_pending
                )
            self._dropped += 1
            return
        self._pending[key] = _Pending(
            ref, namespace, type_, reason, message, 1, now, now, format_micro_time(at)
        )
        self._idle.clear()
        self._wake.set()

    # -- writing --------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        return asyncio.create_task(self.run(), name=f"event recorder {self.component}")

    async def run(self) -> None:
        """Write queued events until cancelled."""
        while True:
            if not self._pending:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            key, pending = self._pending.popitem(last=False)
            await self._send(key, pending)
            if self._dropped:
                log.warning("event recorder: dropped %d events while busy", self._dropped)
                self._dropped = 0

    async def flush(self) -> None:
        """Wait until every queued event has been written (or given up on)."""
        await self._idle.wait()

    async def _send(self, key: _Key, p: _Pending) -> None:
        backoff = Backoff(_SEND_RETRY)
        for attempt in range(1, _SEND_ATTEMPTS + 1):
            try:
                await self._write(key, p)
                self.written += 1
                return
            except (ConnectionError, StatusError) as exc:
                if attempt == _SEND_ATTEMPTS:
                    log.warning("event %s %s dropped: %r", p.reason, p.ref.get("name"), exc)
                    return
                delay = backoff.next_delay()
                log.info("writing event %s failed: %r; will retry in %.1fs", p.reason, exc, delay)
                await asyncio.sleep(delay)

    async def _write(self, key: _Key, p: _Pending) -> None:
        sent = self._sent.get(key)
        if sent is not None:
            count = sent.count + p.count
            try:
                await self.client.patch(
                    self._rt,
                    sent.name,
                    {"count": count, "lastTimestamp": p.last},
                    namespace=sent.namespace,
                )
            except NotFound:
                self._sent.pop(key, None)  # expired or deleted meanwhile: start a new Event
            else:
                sent.count = count
                self._sent.move_to_end(key)
                return
            p = _Pending(
                p.ref,
                p.namespace,
                p.type,
                p.reason,
                p.message,
                count,
                sent.first,
                p.last,
                sent.observed,
            )
        name = f"{p.ref.get('name', 'event')}.{time.time_ns() + next(self._seq):x}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": p.namespace},
            "involvedObject": p.ref,
            "reason": p.reason,
            "message": p.message,
            "type": p.type,
            "source": {"component": self.component, "host": self.host},
            "firstTimestamp": p.first,
            "lastTimestamp": p.last,
            "count": p.count,
            "eventTime": p.observed,
            "action": p.reason,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        await self.client.create(self._rt, body, namespace=p.namespace)
        self._sent[key] = _Sent(name, p.namespace, p.count, p.first, p.observed)
        while len(self._sent) > self.cache_size:
            self._sent.popitem(last=False)
