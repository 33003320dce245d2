"""The event recorder: components leave core/v1 Events for people to read, without waiting.

Why: "why is my pod Pending?" is answered by ``kubectl describe pod``'s Events
("FailedScheduling: 0/2 nodes are available ..."). Recording one must never slow down or fail
the work that produced it, and a controller that retries every second must not write a new
Event every second. So, like client-go's ``record`` package:

* ``recorder.event(obj, "Warning", "FailedScheduling", message)`` only queues (O(1), never
  awaits, never raises); a named background task (``start()`` / ``run()``) does the writing;
* **correlation**, as client-go's ``EventCorrelator`` does, in its order:

  - *similar events are combined*: events that differ only in their message (same source,
    involved object, type and reason) keep their own message until ``AGGREGATE_MAX_EVENTS``
    (10) distinct messages were seen with no gap longer than ``AGGREGATE_INTERVAL`` (10
    minutes); from the tenth on, each becomes the group's one Event "(combined from similar
    events): <latest message>" — a controller's "Created pod: web-x" per pod is nine Events
    and then one whose count grows;
  - *identical events are counted*: events with the same involved object, type, reason,
    message and source are one Event whose ``count`` grows and whose ``lastTimestamp`` and
    ``message`` move (a merge patch), which ``kubectl describe`` shows as "(x5 over 2m)".
    Repeats that arrive while one is still queued are folded into it before anything is sent;
  - *spam is dropped*: each source may record ``SPAM_BURST`` (25) events about one object, then
    one more per ``1 / SPAM_QPS`` seconds (5 minutes), a ``client.ratelimit.TokenBucket`` per
    object on the recorder's clock; an event over it is not written, though it still counts
    toward the next write of its Event (client-go counts it the same way);
* the Event lives in the object's namespace (``default`` for cluster-scoped objects such as
  nodes, as Kubernetes does), named ``<object name>.<hex nanoseconds>``, with
  ``involvedObject``, ``source`` {component, host}, ``reportingComponent``/``Instance``,
  ``firstTimestamp``/``lastTimestamp`` and ``count``, and — because those have one-second
  resolution and ``kubelite trace`` orders a pod's steps by when they happened — ``eventTime``,
  the MicroTime of the first occurrence (events.k8s.io's field; with it set, Kubernetes'
  validation also wants ``action``, which this recorder's callers do not name: the reason
  stands in for it).

The clock (``clock=``, seconds since the epoch) stamps the timestamps and drives the combining
window and the token buckets, so tests move it instead of waiting.

Limits: at most ``max_pending`` distinct events wait in memory (more are dropped, with one log
line); the correlation memory (combining groups, counted Events, token buckets) is an LRU of
``cache_size`` entries each, in this process only (a restarted component starts new Events and
full buckets); a write that keeps failing is dropped after a few retries (events are best
effort).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from api.errors import NotFound, StatusError
from api.meta import format_time
from api.registry import REGISTRY, ResourceType
from client.backoff import Backoff, BackoffPolicy
from client.ratelimit import TokenBucket
from client.rest import ApiClient

__all__ = [
    "AGGREGATE_INTERVAL",
    "AGGREGATE_MAX_EVENTS",
    "COMBINED_PREFIX",
    "SPAM_BURST",
    "SPAM_QPS",
    "EventRecorder",
    "EventType",
]

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
_SEND_ATTEMPTS = 3
_SEND_RETRY = BackoffPolicy(initial=0.5, factor=2.0, cap=5.0, jitter=0.5)

AGGREGATE_MAX_EVENTS = 10
"""Similar events (differing only in message) seen before they are combined into one."""
AGGREGATE_INTERVAL = 600.0
"""Seconds without a similar event after which a group starts afresh."""
COMBINED_PREFIX = "(combined from similar events): "
SPAM_BURST = 25
"""Events one source may record about one object at once ..."""
SPAM_QPS = 1.0 / 300.0
"""... and how fast that allowance refills (one event per five minutes)."""

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
    first_micro: str
    """The first occurrence: ``eventTime`` (MicroTime) ..."""
    first_time: str
    """... and ``firstTimestamp`` (whole seconds), formatted once when it was recorded."""
    last: str


@dataclass(slots=True)
class _Similar:
    """The messages seen lately in one group of similar events."""

    messages: set[str]
    last: float


_K = TypeVar("_K")
_V = TypeVar("_V")


def _remember(cache: OrderedDict[_K, _V], key: _K, value: _V, size: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > size:
        cache.popitem(last=False)


@dataclass(slots=True)
class _Sent:
    name: str
    namespace: str
    count: int
    first_micro: str
    first_time: str


class EventRecorder:
    def __init__(
        self,
        client: ApiClient,
        *,
        component: str,
        host: str | None = None,
        max_pending: int = 1000,
        cache_size: int = 4096,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host if host is not None else socket.gethostname()
        self.max_pending = max_pending
        self.cache_size = cache_size
        self.clock = clock
        self._rt = _events()
        self._pending: OrderedDict[_Key, _Pending] = OrderedDict()
        self._sent: OrderedDict[_Key, _Sent] = OrderedDict()
        self._similar: OrderedDict[_Key, _Similar] = OrderedDict()
        self._buckets: OrderedDict[_Key, TokenBucket] = OrderedDict()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._dropped = 0
        self._seq = itertools.count()
        self._second: datetime | None = None
        self._second_text = ""
        self.written = 0
        """Events created or patched so far."""
        self.spam_dropped = 0
        """Events not written because their source had used up its allowance for the object."""

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
        about: _Key = tuple(
            str(ref.get(k, "")) for k in ("kind", "namespace", "name", "uid", "apiVersion")
        )
        seconds = self.clock()
        key, message = self._combine((*about, type_, reason), message, seconds)
        allowed = self._allowance(about)
        now, micro = self._timestamps(seconds)
        pending = self._pending.get(key)
        if pending is not None:
            pending.count += 1
            pending.last = now
            pending.message = message
            pending.ref = ref
            return
        if not allowed:
            self.spam_dropped += 1
            sent = self._sent.get(key)
            if sent is not None:
                sent.count += 1  # written with the Event's next count, as client-go does
            return
        if len(self._pending) >= self.max_pending:
            if self._dropped == 0:
                log.warning(
                    "event recorder: %d events pending; dropping new ones", self.max_pending
                )
            self._dropped += 1
            return
        self._pending[key] = _Pending(ref, namespace, type_, reason, message, 1, micro, now, now)
        self._idle.clear()
        self._wake.set()

    def _combine(self, group: _Key, message: str, now: float) -> tuple[_Key, str]:
        """The key an event is counted under, and its message: its own, until the group has
        seen ``AGGREGATE_MAX_EVENTS`` distinct messages close together, then the group's."""
        similar = self._similar.get(group)
        if similar is None or now - similar.last > AGGREGATE_INTERVAL:
            similar = _Similar(set(), now)
        similar.messages.add(message)
        similar.last = now
        _remember(self._similar, group, similar, self.cache_size)
        if len(similar.messages) < AGGREGATE_MAX_EVENTS:
            return (*group, message), message
        similar.messages.pop()  # the set never grows past the threshold
        return ("combined", *group), COMBINED_PREFIX + message

    def _allowance(self, about: _Key) -> bool:
        """Whether this source may still record an event about the object (a token is
        taken for every event, written or folded, as client-go's spam filter does)."""
        bucket = self._buckets.get(about)
        if bucket is None:
            bucket = TokenBucket(qps=SPAM_QPS, burst=SPAM_BURST, clock=self.clock)
        _remember(self._buckets, about, bucket, self.cache_size)
        return bucket.try_acquire()

    def _timestamps(self, seconds: float) -> tuple[str, str]:
        """``seconds`` as a ``metav1.Time`` and a ``metav1.MicroTime``; the whole second's text
        is formatted once per second (``strftime`` was most of an event's bookkeeping)."""
        at = datetime.fromtimestamp(seconds, UTC)
        second = at.replace(microsecond=0)
        if second != self._second:
            self._second, self._second_text = second, format_time(second)
        text = self._second_text
        return text, f"{text[:-1]}.{at.microsecond:06d}Z"

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
                    {"count": count, "lastTimestamp": p.last, "message": p.message},
                    namespace=sent.namespace,
                )
            except NotFound:
                self._sent.pop(key, None)  # expired or deleted meanwhile: start a new Event
            else:
                sent.count += p.count  # not ``= count``: spam-dropped repeats may have come
                self._sent.move_to_end(key)
                return
            p = _Pending(
                p.ref, p.namespace, p.type, p.reason, p.message, count,
                sent.first_micro, sent.first_time, p.last,
            )  # fmt: skip
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
            "firstTimestamp": p.first_time,
            "lastTimestamp": p.last,
            "count": p.count,
            "eventTime": p.first_micro,
            "action": p.reason,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        await self.client.create(self._rt, body, namespace=p.namespace)
        _remember(
            self._sent,
            key,
            _Sent(name, p.namespace, p.count, p.first_micro, p.first_time),
            self.cache_size,
        )
