"""The etcd store (``etcd://host:2379[,host:2379...]``): kubelite's objects in an etcd v3 cluster.

Why: SQLite serves one apiserver on one machine. A cluster that outgrows that keeps its state in
etcd, exactly as Kubernetes does, and every compare-and-swap of the store contract
(``store.base``) becomes an etcd transaction:

* resourceVersion = etcd ``mod_revision`` (below); ``create`` is a txn on
  ``create_revision == 0``, ``update`` / guarded ``delete`` a txn on ``mod_revision``, whose
  failure branch reads the key so a lost race reports the current value;
* ``list`` is one range read at a revision (``limit`` / ``start_after`` page it, every page at the
  first page's revision); ``watch`` is one etcd watch per call, from a revision, with
  ``prev_kv``, so a DELETED event carries the last value and MODIFIED its predecessor, and —
  when the caller gives ``on_progress`` — with ``progress_notify``: etcd's progress
  notifications reach the caller in stream order (``store.base``);
* ``compact`` is etcd's compaction (``physical``: it returns once the data is gone); a read or
  watch below it raises ``Compacted``, which the apiserver answers 410 Expired as today.

**Client: etcd's v3 JSON gateway over aiohttp**, chosen over the gRPC client ``aetcd`` after
measuring both with ``bench/etcd_clients.py`` against one etcd 3.4 member on this 2-core machine
(1 KiB values, 2000 operations): txn-creates/s 327 (gateway) vs 599 (gRPC) with one in flight,
533 vs 1254 with 16 in flight. gRPC is about twice as fast per round trip, but ``aetcd`` 1.0
opens only plaintext channels to a single endpoint and ships no type information, while TLS to
etcd and failover across members are required here; the gateway needs no new dependency
(aiohttp is already kubelite's HTTP stack), takes a TLS client context and any member as
endpoint, and with several writes in flight its creates/s stay well above what an apiserver
create costs (``bench/etcd_store.py`` prints that ratio).

**Keys.** The contract's keys are the apiserver's own (``/registry/<group>/<resource>/...``, as
on every backend); in etcd they are laid out as kube-apiserver lays them out
(``store.etcd_keys``: ``/registry/pods/<ns>/<name>``, ``/registry/services/specs/...``,
``/registry/minions/...``, custom resources under ``/registry/<group>/<resource>/``), translated
at this store's edge, so ``etcdctl get --prefix /registry/pods`` reads a kubelite cluster as it
reads a Kubernetes one. Keys an earlier kubelite wrote under its own names are moved on the
first call. An etcd key is ``prefix + `` that path; ``?prefix=/cluster-a`` puts a cluster under
its own subtree so that several share one etcd (what Kubernetes' ``--etcd-prefix`` is for).
Store keys must start with ``/``.

**Revisions are etcd's.** resourceVersion is the ``mod_revision`` etcd gives the write, as in
Kubernetes: etcd counts every write to the cluster from 1, whatever prefix it lands under, so a
store's first write is rarely revision 1 and two clusters sharing an etcd (two prefixes)
interleave their revisions. Nothing in kubelite relies on a store starting at 0 (memory and
SQLite still do). The ``#kubelite-revision-origin`` key earlier versions wrote beside the
subtree is no longer read; it is outside every listing and harmless, and a prefix that already
holds keys written by something else is opened as it is.

**Failures.** Unreachable members, leader elections and etcd's "request timed out" /
"no leader" are retried across the endpoints with a jittered, doubling back-off for up to
``timeout`` seconds (the store is below ``client/``, so ``client.backoff`` is not used); after
that a call raises ``StoreUnavailable`` (the apiserver answers 503 or, for a timeout, 504). A
write larger than etcd's request limit (1.5 MiB by default) raises ``RequestTooLarge`` with
etcd's own words ("etcdserver: request is too large"; 413). A watch whose stream breaks is
reopened from its last revision on the next reachable member, for as long as etcd is away
(a watch has no deadline; it ends only as the contract says).

**Writes in flight.** A store sends its writes concurrently (one connection each, up to
aiohttp's 100 per store); etcd orders them itself, giving each the next revision as it applies
it. So writes made one after another (the second started once the first returned) take
increasing revisions, and writes made at once take them in whatever order etcd applies them —
as with several apiservers on one etcd. Nothing relies on more: the conformance suite compares
revisions writes returned, never the order they were started in.

**Leases.** A write with a ``ttl`` (the apiserver gives Events ``--event-ttl``) attaches the key
to an etcd lease, so etcd deletes it on expiry (a DELETED event like any other). As Kubernetes'
lease manager does, a lease is granted for ``ttl`` plus a reuse window (5% of ``ttl``, at most
60 s) and shared by every write with the same ``ttl`` while it still outlives ``ttl``: one grant
per window, not per Event, so a key lives between ``ttl`` and ``ttl`` + the window after its
last write. etcd raises a TTL below its minimum (about 2 s) to that minimum.

**Progress.** etcd sends a watch that asked for them a progress notification every
``--experimental-watch-progress-notify-interval`` (10 minutes by default; kubelite's tests start
members with 0.2 s) once it has received every event. kube-apiserver asks for one on demand
(``RequestProgress``) instead; that is a message sent on an open watch stream, and etcd 3.4's
JSON gateway did not take one: a watch whose request body stayed open to carry it (chunked: the
create request, later a progress request) got no answer at all from etcd 3.4.23 — its Go HTTP/1.1
server (Go 1.19) is not full duplex — so a watch stream's request ends with its creation.

What it does not do: ask for progress on demand (above: ``request_progress`` answers False, and
the apiserver's consistent lists fall back to a store read when the cache is not known current); cap the keys per lease (Kubernetes
starts a new lease after 1000); keep a listing across resources (prefix ``""``) in the
contract's key order — it comes in Kubernetes' (``store.etcd_keys``); a watch cache of its own
(the apiserver has one).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import io
import json
import logging
import math
import random
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any, Final

import aiohttp

from store.base import (
    Compacted,
    Event,
    EventType,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    RequestTooLarge,
    RevisionMismatch,
    StoreClosed,
    StoreError,
    StoreUnavailable,
    WatchOverflow,
)
from store.etcd_keys import LEGACY_PREFIXES, from_etcd, to_etcd
from store.record import prefix_end
from store.watchhub import DEFAULT_WATCH_BUFFER

__all__ = ["EtcdStore"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds one call keeps retrying unavailable members; etcd elects a new leader well within
this (election timeout 1 s by default), and kubectl's own request timeout is longer."""

_FIRST_DELAY: Final = 0.05
_MAX_DELAY: Final = 1.0

_GRPC_INVALID_ARGUMENT: Final = 3
_GRPC_DEADLINE_EXCEEDED: Final = 4
_GRPC_RESOURCE_EXHAUSTED: Final = 8
_GRPC_OUT_OF_RANGE: Final = 11
_GRPC_UNAVAILABLE: Final = 14
_RETRIED_CODES: Final = {_GRPC_DEADLINE_EXCEEDED, _GRPC_UNAVAILABLE}

_NEVER_APPLIED: Final = {
    "etcdserver: no leader",
    "etcdserver: not capable",
    "etcdserver: too many requests",
}
"""Refusals etcd gives before proposing a write: retrying one cannot apply it twice."""

LEASE_REUSE_FRACTION: Final = 0.05
LEASE_REUSE_MAX: Final = 60
"""A lease is shared by writes for ``min(5% of ttl, 60)`` seconds, as Kubernetes' (the
apiserver's ``--lease-reuse-duration-seconds`` default)."""

_COMPACTED_TEXT: Final = "required revision has been compacted"
_LEASE_GONE_TEXT: Final = "requested lease not found"
_FUTURE_TEXT: Final = "required revision is a future revision"
_TOO_LARGE_TEXT: Final = "request is too large"


class _EtcdError(Exception):
    """An error answer of the gateway: gRPC ``code`` and etcd's ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _kv(raw: dict[str, Any], *, strip: int) -> KeyValue:
    return KeyValue(
        key=from_etcd(base64.b64decode(raw["key"]).decode()[strip:]),
        value=base64.b64decode(raw.get("value", "")),
        create_revision=int(raw.get("create_revision", 0)),
        mod_revision=int(raw.get("mod_revision", 0)),
    )


_JSON: Final = {"Content-Type": "application/json"}
_LARGE_BODY: Final = 512 * 1024
"""aiohttp warns that it sends a bytes body this large in one write; a file-like it streams."""


def _payload(body: dict[str, Any]) -> bytes | io.BytesIO:
    raw = json.dumps(body).encode()
    return io.BytesIO(raw) if len(raw) > _LARGE_BODY else raw


def _revision(answer: dict[str, Any]) -> int:
    return int(answer["header"].get("revision", 0))


def _is_progress(result: dict[str, Any]) -> bool:
    """A watch result that is a progress notification: no events, not the creation, no
    compaction or cancellation (the gateway leaves out every field at its zero value)."""
    return not (
        result.get("events")
        or result.get("created")
        or result.get("canceled")
        or "compact_revision" in result
    )


class _Gateway:
    """POSTs to etcd's v3 JSON gateway on any of its endpoints, retrying unavailable members."""

    def __init__(self, endpoints: Sequence[str], *, tls: ssl.SSLContext | None, timeout: float):
        scheme = "https" if tls is not None else "http"
        self.urls = [f"{scheme}://{endpoint}" for endpoint in endpoints]
        self.tls = tls
        self.timeout = timeout
        self._current = 0
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self.tls if self.tls is not None else False)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    @property
    def url(self) -> str:
        """The endpoint calls go to now (the next one after a failure)."""
        return self.urls[self._current]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(self, path: str, body: dict[str, Any], *, write: bool = False) -> dict[str, Any]:
        """The answer of ``path``; raises ``_EtcdError`` for etcd's refusals, retries outages.

        A ``write`` is retried only when it cannot have been applied (no connection was made,
        or etcd had no leader to propose it to); after an ambiguous failure — the connection
        dropped or timed out once the request was sent — it raises ``StoreUnavailable`` at once,
        as Kubernetes' etcd client does, because applying a compare-and-swap twice is not safe.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        delay = _FIRST_DELAY
        while True:
            url = self.url
            timeout = aiohttp.ClientTimeout(total=max(deadline - loop.time(), _FIRST_DELAY))
            try:
                async with self.session.post(
                    url + path, data=_payload(body), headers=_JSON, timeout=timeout
                ) as resp:
                    answer: dict[str, Any] = await resp.json(content_type=None)
            except aiohttp.ClientConnectorError as err:  # never sent: always safe to retry
                problem, timed_out = f"etcd at {url} unreachable ({err.os_error})", False
            except (aiohttp.ClientError, TimeoutError, ValueError) as err:
                problem = f"etcd at {url} did not answer ({type(err).__name__}: {err})"
                timed_out = isinstance(err, TimeoutError)
                if write:
                    raise StoreUnavailable(
                        f"{problem}; the write may or may not have been applied",
                        timed_out=timed_out,
                    ) from None
            else:
                if "error" not in answer and "code" not in answer:
                    return answer
                error = _EtcdError(int(answer.get("code", 2)), str(answer.get("message", "")))
                if error.code not in _RETRIED_CODES:
                    raise error
                problem = f"etcd at {url}: {error.message}"
                timed_out = error.code == _GRPC_DEADLINE_EXCEEDED or "timed out" in error.message
                if write and error.message not in _NEVER_APPLIED:
                    raise StoreUnavailable(
                        f"{problem}; the write may or may not have been applied",
                        timed_out=timed_out,
                    )
            delay = await self.back_off(
                problem, deadline=deadline, delay=delay, timed_out=timed_out
            )

    async def back_off(
        self, problem: str, *, deadline: float, delay: float, timed_out: bool
    ) -> float:
        """Move to the next endpoint and wait; raise ``StoreUnavailable`` past ``deadline``."""
        now = asyncio.get_running_loop().time()
        if now >= deadline:
            raise StoreUnavailable(
                f"{problem}; gave up after {self.timeout:.0f} s on {len(self.urls)} endpoint(s)",
                timed_out=timed_out,
            )
        self._current = (self._current + 1) % len(self.urls)
        wait = min(delay * (1 + random.random()), _MAX_DELAY, deadline - now)
        log.warning("%s; will retry on %s in %.2f s", problem, self.urls[self._current], wait)
        await asyncio.sleep(wait)
        return min(delay * 2, _MAX_DELAY)


class _Buffer:
    """Events read from one etcd watch stream, bounded; the consumer's side of the watch.

    Besides events it holds progress notices (a bare revision: every event up to it is ahead
    of the notice in the buffer), so the consumer meets them in stream order."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.events: collections.deque[Event | int] = collections.deque()
        self.error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._space: asyncio.Future[None] | None = None

    @property
    def full(self) -> bool:
        return len(self.events) >= self.capacity

    def put(self, event: Event) -> None:
        self.events.append(event)
        self._wake()

    def put_progress(self, revision: int) -> None:
        """A progress notice, unless the buffer is full (a later one will say as much)."""
        if not self.full:
            self.events.append(revision)
            self._wake()

    async def room(self) -> None:
        """Wait until the consumer has taken an event from a full buffer."""
        while self.full and self.error is None:
            self._space = asyncio.get_running_loop().create_future()
            try:
                await self._space
            finally:
                self._space = None

    def fail(self, error: BaseException) -> None:
        """End the watch with ``error``: unread events are dropped, as ``store.watchhub`` does."""
        if self.error is None:
            self.error = error
        self.events.clear()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next(self) -> Event | int:
        while not self.events:
            if self.error is not None:
                raise self.error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        event = self.events.popleft()
        if self._space is not None and not self._space.done():
            self._space.set_result(None)
        return event


class _Overflowed(Exception):
    """Internal: a watch's buffer filled up."""


class EtcdStore:
    """A ``Store`` in an etcd v3 cluster. Use ``store.open_store("etcd://host:2379")``.

    Nothing is contacted before the first call (``open_store`` is synchronous); the first call
    asks etcd how far it has compacted. Use the store from one event loop.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        prefix: str = "",
        tls: ssl.SSLContext | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        watch_buffer: int = DEFAULT_WATCH_BUFFER,
    ) -> None:
        if not endpoints:
            raise ValueError("etcd store needs at least one host:port endpoint")
        if prefix.endswith("/"):
            raise ValueError(f"etcd prefix {prefix!r} must not end with '/'")
        if watch_buffer < 1:
            raise ValueError(f"watch buffer capacity must be >= 1, got {watch_buffer}")
        self.endpoints = list(endpoints)
        self.prefix = prefix
        self._gateway = _Gateway(self.endpoints, tls=tls, timeout=timeout)
        self._watch_buffer = watch_buffer
        self._probe_lock = asyncio.Lock()
        self._compacted = 0
        """etcd's compacted revision as far as this store knows (probed on the first call)."""
        self._probed = False
        self._closed = False
        self._leases: dict[int, tuple[str, float]] = {}
        """Per TTL in seconds: the lease writes share now, and when it expires (loop time)."""
        self._lease_lock = asyncio.Lock()
        self._watches: dict[_Buffer, asyncio.Task[None]] = {}
        """Each open watch's buffer and the task that reads its etcd stream into it."""

    # -- keys and revisions ----------------------------------------------------------------

    def _key(self, key: str) -> str:
        if not key.startswith("/"):
            raise ValueError(f"etcd store keys start with '/', got {key!r}")
        return self.prefix + to_etcd(key)

    def _range(self, prefix: str, *, start_after: str | None = None) -> dict[str, str]:
        """The etcd range of the keys under ``prefix`` (all of the store's keys for "")."""
        body = self._raw_range(self.prefix + to_etcd(prefix or "/"))
        if start_after is not None and start_after >= (prefix or "/"):
            body["key"] = _b64(self.prefix + to_etcd(start_after) + "\x00")
        return body

    async def _ready(self) -> None:
        """Raise once closed; on the first call, learn how far etcd has compacted."""
        if self._closed:
            raise StoreClosed("store closed")
        if not self._probed:
            async with self._probe_lock:
                if not self._probed:
                    self._compacted = await self._probe_compacted()
                    await self._move_legacy_keys()
                    self._probed = True

    async def _probe_compacted(self) -> int:
        """etcd's compacted revision (0: never compacted): a watch from revision 1 says it.

        Unreachable members are retried across the endpoints like any read."""
        body = {"create_request": {"key": _b64(self.prefix or "/"), "start_revision": "1"}}
        deadline = asyncio.get_running_loop().time() + self._gateway.timeout
        delay = _FIRST_DELAY
        while True:
            try:
                async with contextlib.aclosing(self._watch_stream(body)) as stream:
                    async for result in stream:
                        if "compact_revision" in result:
                            return int(result["compact_revision"])
                        if result.get("created") or result.get("events"):
                            return 0
                problem = "etcd ended a watch before answering it"
            except (aiohttp.ClientError, OSError) as err:
                problem = f"etcd at {self._gateway.url} unreachable ({type(err).__name__})"
            delay = await self._gateway.back_off(
                problem, deadline=deadline, delay=delay, timed_out=False
            )

    async def _move_legacy_keys(self) -> None:
        """Move keys earlier kubelite versions wrote at ``/registry/<group>/<resource>/`` to
        Kubernetes' names (``store.etcd_keys``), each by one txn: put at the new key if it is
        free, delete the old one if unchanged. Safe beside other apiservers doing the same; a
        key that exists under both names is left where it is, and logged."""
        counts = await asyncio.gather(
            *(
                self._call(
                    "/v3/kv/range",
                    {**self._raw_range(self.prefix + old), "count_only": True},
                )
                for old in LEGACY_PREFIXES
            )
        )
        for (old, new), answer in zip(LEGACY_PREFIXES.items(), counts, strict=True):
            if not int(answer.get("count", 0)):
                continue
            found = await self._call("/v3/kv/range", self._raw_range(self.prefix + old))
            for raw in found.get("kvs", []):
                old_key = base64.b64decode(raw["key"]).decode()
                new_key = _b64(self.prefix + new + old_key[len(self.prefix + old) :])
                put: dict[str, Any] = {"key": new_key, "value": raw.get("value", "")}
                if raw.get("lease"):
                    put["lease"] = raw["lease"]
                moved = await self._call(
                    "/v3/kv/txn",
                    {
                        "compare": [
                            {
                                "key": raw["key"],
                                "target": "MOD",
                                "result": "EQUAL",
                                "mod_revision": raw["mod_revision"],
                            },
                            {
                                "key": new_key,
                                "target": "CREATE",
                                "result": "EQUAL",
                                "create_revision": "0",
                            },
                        ],
                        "success": [
                            {"request_put": put},
                            {"request_delete_range": {"key": raw["key"]}},
                        ],
                    },
                    write=True,
                )
                if not moved.get("succeeded"):
                    log.warning(
                        "etcd key %s was not moved to Kubernetes' layout: it changed meanwhile "
                        "or its new name is taken",
                        old_key,
                    )
            log.info("moved %s keys from %s to %s", found.get("count"), old, new)

    @staticmethod
    def _raw_range(low: str) -> dict[str, str]:
        end = prefix_end(low)
        return {"key": _b64(low), "range_end": _b64(end) if end is not None else "AA=="}

    # -- the Store protocol --------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        await self._ready()
        answer = await self._call("/v3/kv/range", {"key": _b64(self._key(key))})
        kvs = answer.get("kvs", [])
        return _kv(kvs[0], strip=len(self.prefix)) if kvs else None

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        start_after: str | None = None,
        limit: int = 0,
    ) -> ListResult:
        await self._ready()
        if revision and revision < self._compacted:
            raise Compacted(revision, self._compacted)
        body: dict[str, Any] = self._range(prefix, start_after=start_after)
        if limit:
            body["limit"] = str(limit)
        if revision:
            body["revision"] = str(revision)
        try:
            answer = await self._call("/v3/kv/range", body, revision=revision)
        except _EtcdError as err:
            if _FUTURE_TEXT not in err.message:
                raise self._failure(err) from None
            body.pop("revision")  # a revision not reached yet is served at the current one
            answer = await self._call("/v3/kv/range", body)
            revision = 0
        items = [_kv(kv, strip=len(self.prefix)) for kv in answer.get("kvs", [])]
        at = revision or _revision(answer)
        return ListResult(items=items, revision=at, more=bool(answer.get("more")))

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> KeyValue:
        await self._ready()
        etcd_key = _b64(self._key(key))
        answer = await self._txn(
            compare={"key": etcd_key, "target": "CREATE", "create_revision": "0"},
            success={"request_put": {"key": etcd_key, "value": base64.b64encode(value).decode()}},
            failure={"request_range": {"key": etcd_key}},
            ttl=ttl,
        )
        if not answer.get("succeeded"):
            raise KeyExists(key)
        revision = _revision(answer)
        return KeyValue(key, value, revision, revision)

    async def update(
        self, key: str, value: bytes, *, expected_revision: int, ttl: float | None = None
    ) -> KeyValue:
        await self._ready()
        etcd_key = _b64(self._key(key))
        answer = await self._txn(
            compare={
                "key": etcd_key,
                "target": "MOD",
                "mod_revision": str(expected_revision),
            },
            success={
                "request_put": {
                    "key": etcd_key,
                    "value": base64.b64encode(value).decode(),
                    "prev_kv": True,
                }
            },
            failure={"request_range": {"key": etcd_key}},
            ttl=ttl,
        )
        if not answer.get("succeeded"):
            raise self._lost(key, expected_revision, answer)
        prev = answer["responses"][0]["response_put"]["prev_kv"]
        return KeyValue(key, value, int(prev["create_revision"]), _revision(answer))

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        await self._ready()
        etcd_key = _b64(self._key(key))
        deletion = {"request_delete_range": {"key": etcd_key, "prev_kv": True}}
        if expected_revision is None:
            compare = {
                "key": etcd_key,
                "target": "CREATE",
                "result": "GREATER",
                "create_revision": "0",
            }
        else:
            compare = {
                "key": etcd_key,
                "target": "MOD",
                "mod_revision": str(expected_revision),
            }
        answer = await self._txn(
            compare=compare, success=deletion, failure={"request_range": {"key": etcd_key}}
        )
        if not answer.get("succeeded"):
            raise self._lost(key, expected_revision, answer)
        last = _kv(
            answer["responses"][0]["response_delete_range"]["prev_kvs"][0],
            strip=len(self.prefix),
        )
        return KeyValue(key, last.value, last.create_revision, _revision(answer))

    def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        on_progress: Callable[[int], None] | None = None,
    ) -> AsyncIterator[Event]:
        """With ``on_progress``, the watch asks etcd for progress notifications: etcd sends
        them every ``--experimental-watch-progress-notify-interval`` (10 min by default) to a
        watch that has received every event, and each one reaches ``on_progress``."""
        return self._watch(prefix, after_revision=after_revision, on_progress=on_progress)

    async def request_progress(self) -> bool:
        """False: the JSON gateway cannot carry a progress request on an open watch stream
        (**Progress** in the module docstring); only the periodic notifications come."""
        return False

    async def current_revision(self) -> int:
        await self._ready()
        answer = await self._call(
            "/v3/kv/range", {"key": _b64(self.prefix + "/"), "count_only": True}
        )  # a linearizable read of one key: its header carries etcd's current revision
        return _revision(answer)

    async def compacted_revision(self) -> int:
        await self._ready()
        return self._compacted

    async def compact(self, revision: int) -> None:
        """Compact etcd to ``revision`` (physically: returns once the old data is gone).

        etcd's compaction covers the whole etcd cluster, as the apiserver's does in Kubernetes:
        other prefixes on the same etcd lose the same history.
        """
        await self._ready()
        current = await self.current_revision()
        if revision > current:
            raise ValueError(f"cannot compact to {revision}: the current revision is {current}")
        if revision <= self._compacted:
            return
        try:
            await self._call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        except _EtcdError as err:
            if _COMPACTED_TEXT not in err.message:  # compacted further by another apiserver
                raise self._failure(err) from None
            self._compacted = await self._probe_compacted()
            return
        self._compacted = revision

    async def close(self) -> None:
        """Close the connections; open watches end with ``StoreClosed``."""
        if self._closed:
            return
        self._closed = True
        for buffer, reader in self._watches.items():
            buffer.fail(StoreClosed("store closed"))
            reader.cancel()
        await self._gateway.close()

    # -- calls ---------------------------------------------------------------------------------

    async def _call(
        self, path: str, body: dict[str, Any], *, revision: int = 0, write: bool = False
    ) -> dict[str, Any]:
        """``_Gateway.call`` with etcd's refusals turned into store errors (not "future")."""
        try:
            return await self._gateway.call(path, body, write=write)
        except _EtcdError as err:
            if _FUTURE_TEXT in err.message:
                raise
            if _COMPACTED_TEXT in err.message:
                self._compacted = await self._probe_compacted()
                raise Compacted(revision, self._compacted) from None
            raise self._failure(err) from None
        except RuntimeError:  # aiohttp's "Session is closed" after close()
            if self._closed:
                raise StoreClosed("store closed") from None
            raise

    @staticmethod
    def _failure(err: _EtcdError) -> StoreError:
        if _TOO_LARGE_TEXT in err.message or err.code == _GRPC_RESOURCE_EXHAUSTED:
            words = "etcdserver: request is too large"
            return RequestTooLarge(words if words in err.message else f"{words} ({err.message})")
        return StoreError(f"etcd refused the request: {err.message} (gRPC code {err.code})")

    async def _txn(
        self,
        *,
        compare: dict[str, Any],
        success: dict[str, Any],
        failure: dict[str, Any],
        ttl: float | None = None,
    ) -> dict[str, Any]:
        """One compare-and-swap; with a ``ttl``, its put is attached to a lease for it.

        A lease revoked by someone else fails the txn before it applies: it is retried once
        with a freshly granted lease.
        """
        if ttl is not None:
            success["request_put"]["lease"] = await self._lease(ttl)
        try:
            return await self._apply(compare, success, failure)
        except StoreError as err:
            if ttl is None or _LEASE_GONE_TEXT not in str(err):
                raise
        success["request_put"]["lease"] = await self._lease(ttl, fresh=True)
        return await self._apply(compare, success, failure)

    async def _apply(
        self, compare: dict[str, Any], success: dict[str, Any], failure: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._call(
            "/v3/kv/txn",
            {
                "compare": [{"result": "EQUAL", **compare}],
                "success": [success],
                "failure": [failure],
            },
            write=True,
        )

    async def _lease(self, ttl: float, *, fresh: bool = False) -> str:
        """The ID of a lease that expires between ``ttl`` and ``ttl`` + the reuse window from
        now: the one granted for this ``ttl`` while it still does, else a new one."""
        seconds = max(1, math.ceil(ttl))
        reuse = min(int(seconds * LEASE_REUSE_FRACTION), LEASE_REUSE_MAX)
        async with self._lease_lock:
            now = asyncio.get_running_loop().time()
            held = self._leases.get(seconds)
            if held is not None and not fresh and now + seconds < held[1] <= now + seconds + reuse:
                return held[0]
            answer = await self._call("/v3/lease/grant", {"TTL": str(seconds + reuse)})
            lease = str(answer["ID"])
            self._leases[seconds] = (lease, now + seconds + reuse)
            return lease

    def _lost(self, key: str, expected: int | None, answer: dict[str, Any]) -> StoreError:
        """The error of a failed compare: the key is gone, or it moved on (with its value)."""
        kvs = answer["responses"][0]["response_range"].get("kvs", [])
        if not kvs:
            return KeyNotFound(key)
        current = _kv(kvs[0], strip=len(self.prefix))
        return RevisionMismatch(key, expected if expected is not None else 0, current)

    # -- watches -------------------------------------------------------------------------------

    async def _watch(
        self, prefix: str, *, after_revision: int, on_progress: Callable[[int], None] | None
    ) -> AsyncIterator[Event]:
        await self._ready()
        if after_revision < self._compacted:
            raise Compacted(after_revision, self._compacted)
        buffer = _Buffer(self._watch_buffer)
        reader = asyncio.create_task(
            self._read_watch(
                buffer, prefix, after_revision=after_revision, progress=on_progress is not None
            ),
            name=f"etcd-watch:{self.prefix}{prefix}",
        )
        self._watches[buffer] = reader
        last = after_revision
        try:
            while True:
                item = await buffer.next()
                if isinstance(item, int):  # the consumer has taken every event before it
                    if on_progress is not None:
                        on_progress(item)
                    continue
                last = item.revision
                yield item
        except _Overflowed:
            raise WatchOverflow(last, buffer.capacity) from None
        finally:
            self._watches.pop(buffer, None)
            reader.cancel()

    async def _read_watch(
        self, buffer: _Buffer, prefix: str, *, after_revision: int, progress: bool
    ) -> None:
        """Feed ``buffer`` from etcd, reopening a broken stream after the last revision read.

        Events up to the revision etcd was at when the watch was created are history: for them
        the reader waits for room in the buffer (etcd holds the rest). Later ones are live: a
        full buffer then ends the watch with ``WatchOverflow``, as ``store.watchhub`` does.
        With ``progress``, etcd's progress notifications (a result with no events, created
        earlier) go into the buffer as notices of their revision.
        """
        last = after_revision
        history_until = 0
        delay = _FIRST_DELAY
        try:
            while True:
                request = {
                    **self._range(prefix),
                    "start_revision": str(last + 1),
                    "prev_kv": True,
                    "progress_notify": progress,
                }
                stream = self._watch_stream({"create_request": request})
                try:
                    async for result in stream:
                        delay = _FIRST_DELAY
                        if "compact_revision" in result:
                            self._compacted = int(result["compact_revision"])
                            raise Compacted(last, self._compacted)
                        if result.get("created") and not history_until:
                            history_until = _revision(result)
                        if progress and _is_progress(result) and _revision(result) > last:
                            last = _revision(result)  # a reopened stream starts after it
                            buffer.put_progress(last)
                        for raw in result.get("events", []):
                            event = self._event(raw)
                            if buffer.full and event.revision <= history_until:
                                await buffer.room()
                            elif buffer.full:
                                raise _Overflowed
                            last = event.revision
                            buffer.put(event)
                    problem = "etcd ended a watch stream"
                except (aiohttp.ClientError, OSError, ValueError) as err:
                    problem = f"etcd watch stream broke ({type(err).__name__}: {err})"
                finally:
                    await stream.aclose()
                # a watch outlives an outage: it retries until etcd is back or the store closes
                delay = await self._gateway.back_off(
                    problem, deadline=math.inf, delay=delay, timed_out=False
                )
        except asyncio.CancelledError:
            raise
        except Exception as err:  # handed to the consumer, who raises it
            buffer.fail(err)

    async def _watch_stream(self, body: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        """The ``result`` objects of one gateway watch stream (newline-delimited JSON)."""
        url = self._gateway.url
        async with self._gateway.session.post(
            url + "/v3/watch", json=body, timeout=aiohttp.ClientTimeout(total=None)
        ) as resp:
            pending = b""
            async for chunk in resp.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    message = json.loads(line)
                    if "error" in message:
                        error = message["error"]
                        raise _EtcdError(int(error.get("grpc_code", 2)), str(error.get("message")))
                    yield message["result"]

    def _event(self, raw: dict[str, Any]) -> Event:
        strip = len(self.prefix)
        kv = _kv(raw["kv"], strip=strip)
        prev = _kv(raw["prev_kv"], strip=strip) if "prev_kv" in raw else None
        if raw.get("type") == "DELETE":
            if prev is None:
                raise StoreError(f"etcd sent the deletion of {kv.key!r} without its last value")
            gone = KeyValue(kv.key, prev.value, prev.create_revision, kv.mod_revision)
            return Event(EventType.DELETED, gone, prev, kv.mod_revision)
        if kv.create_revision == kv.mod_revision:
            return Event(EventType.ADDED, kv, None, kv.mod_revision)
        return Event(EventType.MODIFIED, kv, prev, kv.mod_revision)
