"""API Priority and Fairness: every request is classified, then waits its turn at its level.

Why: with one pool of in-flight slots (``inflight``), a user's bulk creates take the slots the
kubelets need for their Lease renewals and Node status, and nodes go NotReady under load.
Kubernetes' answer, on by default (``--enable-priority-and-fairness``), is this filter:

1. **classify** (``flowcontrol_matching``): the FlowSchemas in the watch cache, in precedence
   order, give the request a schema, a flow distinguisher and the schema's
   PriorityLevelConfiguration (schemas whose level does not exist are skipped, as Kubernetes
   skips dangling ones; ``catch-all`` covers what nothing else matches);
2. **exempt** levels (``system:masters`` — so every request on the insecure port — and the
   probes) run at once, counted but never limited;
3. a **limited** level's requests take a seat of its ``QueueSet`` (``flowcontrol_queueset``:
   shuffle-sharded queues, fair queuing, queue length limit, wait limit) or are refused with
   Kubernetes' 429: ``Retry-After: 1`` and a ``TooManyRequests`` Status, "Too many requests,
   please try again later.".

Seats: the server's concurrency is ``--max-requests-inflight`` + ``--max-mutating-requests-
inflight`` (600 by default) and each limited level's seats are its share of it,
``ceil(total * nominalConcurrencyShares / sum of every level's shares)``, as Kubernetes'
nominal concurrency limit (``apf_controller.go``); 0 for both flags means no limits at all,
and a level of 0 shares gets no seat (in Kubernetes it could only borrow). The requests
executing are also counted as read-only or mutating in the ``InflightLimits`` pools the
apiserver reports as ``apiserver_current_inflight_requests`` (their limits not enforced).
A new configuration (an edited schema or level) takes effect at the next request.

Every classified response names its schema and level by uid in ``X-Kubernetes-PF-FlowSchema-UID``
and ``X-Kubernetes-PF-PriorityLevel-UID``. Metrics, labelled ``priority_level`` and
``flow_schema``: ``apiserver_flowcontrol_current_inflight_requests``,
``_current_inqueue_requests``, ``_dispatched_requests_total``, ``_rejected_requests_total``
(also ``reason``: queue-full, concurrency-limit, time-out), ``_request_wait_duration_seconds``
(also ``execute``), and ``apiserver_flowcontrol_nominal_limit_seats`` per level.

The FlowSchemas' ``Dangling`` status condition is kept by ``keep_dangling_conditions`` (one
writer per apiserver; each write a compare-and-swap, so several apiservers agree).

What it does not do, on purpose: watches are classified (and get the headers) but hold no
seat — Kubernetes holds one for the watch's initial listing only; long-running ``exec``,
``attach``, ``log``, ``portforward`` and ``proxy`` requests pass untouched, as in Kubernetes;
every request costs one seat (no work estimation of LIST sizes or watch fan-out); levels
neither lend nor borrow seats (``lendablePercent`` and ``borrowingLimitPercent`` are ignored).
With ``--enable-priority-and-fairness=false`` the old ``max-in-flight`` filter (``inflight``)
runs instead.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from api.errors import NotFound, TooManyRequests
from api.flowcontrol import (
    DEFAULT_HAND_SIZE,
    DEFAULT_QUEUE_LENGTH_LIMIT,
    DEFAULT_QUEUES,
    GROUP,
)
from api.meta import now_time
from client.backoff import Backoff
from component.metrics import Metrics
from services.apiserver.context import ApiContext
from services.apiserver.flowcontrol_bootstrap import PRIORITY_LEVELS
from services.apiserver.flowcontrol_matching import classify, precedence_order
from services.apiserver.flowcontrol_queueset import QueueSet, Queuing, Rejected
from services.apiserver.identity import UserInfo, request_user
from services.apiserver.inflight import (
    RETRY_AFTER_SECONDS,
    TOO_MANY_REQUESTS,
    InflightLimits,
    is_long_running,
    is_mutating,
    is_probe,
    served,
)
from services.apiserver.loop_metrics import (
    CounterChild,
    GaugeChild,
    HistogramChild,
    LoopCounter,
    LoopGauge,
    LoopHistogram,
)
from services.apiserver.predicate import Predicate
from services.apiserver.request_info import RequestInfo, request_info_of
from services.apiserver.storage import ObjectStorage
from services.apiserver.watchcache import WatchCache
from store.base import StoreClosed

__all__ = [
    "FLOW_CONTROL",
    "FLOW_SCHEMA_UID_HEADER",
    "PRIORITY_LEVEL_UID_HEADER",
    "Flow",
    "FlowControl",
    "Level",
    "add_flow_headers",
    "flow_control_for",
    "keep_dangling_conditions",
    "priority_and_fairness",
    "setup_flowcontrol",
]

log = logging.getLogger(__name__)

FLOW_SCHEMA_UID_HEADER: Final = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_UID_HEADER: Final = "X-Kubernetes-PF-PriorityLevel-UID"
_CLASSIFIED_ENTRIES: Final = 4096
"""Request shapes whose classification is remembered; all are forgotten when full."""
WAIT_BUCKETS: Final = (0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30)
"""``apiserver_flowcontrol_request_wait_duration_seconds``' buckets, Kubernetes' own."""

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Flow:
    """What a request was classified as: its schema, level and distinguisher."""

    schema: str
    schema_uid: str
    level: str
    level_uid: str
    distinguisher: str


_FLOW: web.RequestKey[Flow] = web.RequestKey("kubelite.flow", Flow)


@dataclass(frozen=True, slots=True)
class _Children:
    """One (level, schema)'s labelled metrics."""

    inflight: GaugeChild
    inqueue: GaugeChild
    dispatched: CounterChild
    waited: HistogramChild
    refused_wait: HistogramChild


class Level:
    """One priority level: exempt (no limit) or limited by its ``QueueSet``."""

    def __init__(self, name: str, *, uid: str, queues: QueueSet | None) -> None:
        self.name = name
        self.uid = uid
        self.queues = queues
        """None for an exempt level."""


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _limited(level: Obj) -> Obj | None:
    spec = level.get("spec") or {}
    limited = spec.get("limited")
    return limited if spec.get("type") == "Limited" and isinstance(limited, Mapping) else None


def _shares(level: Obj) -> int:
    spec = level.get("spec") or {}
    part = _limited(level) or spec.get("exempt") or {}
    shares = part.get("nominalConcurrencyShares")
    return shares if isinstance(shares, int) else 0


def _queuing(limited: Obj) -> Queuing | None:
    response = limited.get("limitResponse") or {}
    queuing = response.get("queuing")
    if response.get("type") != "Queue" or not isinstance(queuing, Mapping):
        return None
    return Queuing(
        queues=int(queuing.get("queues") or DEFAULT_QUEUES),
        hand_size=int(queuing.get("handSize") or DEFAULT_HAND_SIZE),
        queue_length_limit=int(queuing.get("queueLengthLimit") or DEFAULT_QUEUE_LENGTH_LIMIT),
    )


_BUILT_IN_CATCH_ALL: Final = (
    _shares({"spec": PRIORITY_LEVELS["catch-all"]}),
    sum(_shares({"spec": spec}) for spec in PRIORITY_LEVELS.values()),
)
"""The built-in ``catch-all`` level's share of the seats (its shares of all the defaults'),
for the requests no schema matches once its object is gone (restored at the next start)."""


def _objects(cache: WatchCache) -> list[Obj]:
    events, _ = cache.snapshot(Predicate(rt=cache.rt))
    return [e.obj for e in events]


class FlowControl:
    """The configuration read from the watch caches, the levels' queue sets and the metrics."""

    def __init__(
        self,
        *,
        schemas: WatchCache,
        levels: WatchCache,
        server_seats: int,
        metrics: Metrics,
        counted: InflightLimits | None = None,
        wait_limit: float = 15.0,
    ) -> None:
        self.schemas = schemas
        self.level_cache = levels
        self.metrics = metrics
        self.counted = counted or InflightLimits(max_read_only=0, max_mutating=0)
        """Requests executing now, read-only and mutating (limits 0: never refused), for
        ``apiserver_current_inflight_requests`` as the max-in-flight filter counts them."""
        self.server_seats = server_seats
        self.wait_limit = wait_limit
        self.levels: dict[str, Level] = {}
        self._ordered: list[Obj] = []
        self._revisions = (-1, -1)
        self._classified: dict[tuple[object, ...], tuple[Flow, Level]] = {}
        self._children: dict[tuple[str, str], _Children] = {}
        labels = ("priority_level", "flow_schema")
        self.inflight = LoopGauge(
            metrics,
            "apiserver_flowcontrol_current_inflight_requests",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution "
            "stage in the API Priority and Fairness subsystem",
            labels,
        )
        self.inqueue = LoopGauge(
            metrics,
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness "
            "subsystem",
            labels,
        )
        self.dispatched = LoopCounter(
            metrics,
            "apiserver_flowcontrol_dispatched_requests",
            "Number of requests executed by API Priority and Fairness subsystem",
            labels,
        )
        self.rejected = LoopCounter(
            metrics,
            "apiserver_flowcontrol_rejected_requests",
            "Number of requests rejected by API Priority and Fairness subsystem",
            (*labels, "reason"),
        )
        self.wait = LoopHistogram(
            metrics,
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "Length of time a request spent waiting in its queue",
            (*labels, "execute"),
            buckets=WAIT_BUCKETS,
        )
        metrics.gauges(
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            ("priority_level",),
            self._nominal_seats,
        )

    def _nominal_seats(self) -> Iterator[tuple[tuple[str], float]]:
        for level in self.levels.values():
            if level.queues is not None:
                yield (level.name,), level.queues.seats

    # -- configuration ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the levels and the schema order if either cache has moved on."""
        revisions = (self.schemas.revision, self.level_cache.revision)
        if revisions == self._revisions:
            return
        self._revisions = revisions
        objects = {_meta(o).get("name", ""): o for o in _objects(self.level_cache)}
        total = sum(_shares(o) for o in objects.values())
        levels: dict[str, Level] = {}
        for name, obj in objects.items():
            levels[name] = self._level(name, obj, total)
        self.levels = levels
        self._classified.clear()
        self._ordered = [
            s
            for s in precedence_order(_objects(self.schemas))
            if ((s.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name") in levels
        ]

    def _seats(self, shares: int, total: int) -> int:
        if not self.server_seats:
            return 1 << 30  # no limits: classification and metrics only
        return math.ceil(self.server_seats * shares / total) if total else 0

    def _level(self, name: str, obj: Obj, total: int) -> Level:
        uid = str(_meta(obj).get("uid") or "")
        limited = _limited(obj)
        if limited is None:
            return Level(name, uid=uid, queues=None)
        seats, queuing = self._seats(_shares(obj), total), _queuing(limited)
        old = self.levels.get(name)
        if old is not None and old.queues is not None:
            old.queues.configure(seats=seats, queuing=queuing)
            old.uid = uid
            return old
        return Level(
            name,
            uid=uid,
            queues=QueueSet(seats=seats, queuing=queuing, wait_limit=self.wait_limit),
        )

    def classify(self, user: UserInfo, info: RequestInfo) -> tuple[Flow, Level]:
        """The request's flow and level, remembered per user and request shape until the
        configuration changes (most requests repeat one of a few hundred shapes)."""
        self.refresh()
        key = (
            user.name,
            user.groups,
            info.verb,
            info.api_group,
            info.resource,
            info.subresource,
            info.namespace,
            "" if info.resource_request else info.path,
        )
        found = self._classified.get(key)
        if found is None:
            if len(self._classified) >= _CLASSIFIED_ENTRIES:
                self._classified.clear()
            found = self._classified[key] = self._classify(user, info)
        return found

    def _classify(self, user: UserInfo, info: RequestInfo) -> tuple[Flow, Level]:
        """``classify`` uncached; the built-in ``catch-all`` rule when nothing matches (only
        possible once an operator has deleted the ``catch-all`` schema or level)."""
        match = classify(self._ordered, user, info)
        if match is None:
            level = self.levels.get("catch-all") or self._fallback()
            return Flow("catch-all", "", level.name, level.uid, user.name), level
        schema = match.schema
        level_name = schema["spec"]["priorityLevelConfiguration"]["name"]
        level = self.levels[level_name]
        flow = Flow(
            schema=str(_meta(schema).get("name") or ""),
            schema_uid=str(_meta(schema).get("uid") or ""),
            level=level_name,
            level_uid=level.uid,
            distinguisher=match.distinguisher,
        )
        return flow, level

    def _fallback(self) -> Level:
        level = Level(
            "catch-all",
            uid="",
            queues=QueueSet(
                seats=self._seats(*_BUILT_IN_CATCH_ALL), queuing=None, wait_limit=self.wait_limit
            ),
        )
        self.levels["catch-all"] = level
        return level

    # -- serving ------------------------------------------------------------------------------

    def _metrics_of(self, flow: Flow) -> _Children:
        """The labelled metrics of ``flow``'s level and schema, looked up once."""
        key = (flow.level, flow.schema)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = _Children(
                inflight=self.inflight.labels(*key),
                inqueue=self.inqueue.labels(*key),
                dispatched=self.dispatched.labels(*key),
                waited=self.wait.labels(*key, "true"),
                refused_wait=self.wait.labels(*key, "false"),
            )
        return children

    async def serve(
        self, request: web.Request, handler: Handler, flow: Flow, level: Level
    ) -> web.StreamResponse:
        """Run ``handler`` in a seat of ``level`` (at once for an exempt level)."""
        metrics = self._metrics_of(flow)
        pool = self.counted.mutating if is_mutating(request.method) else self.counted.read_only
        if level.queues is None:
            metrics.dispatched.inc()
            metrics.waited.observe(0)
            with metrics.inflight.track_inprogress(), pool.slot():
                return await served(request, handler)
        metrics.inqueue.inc()
        queued = True
        try:
            async with level.queues.seat((flow.schema, flow.distinguisher)) as waited:
                metrics.inqueue.dec()
                queued = False
                metrics.dispatched.inc()
                metrics.waited.observe(waited)
                with metrics.inflight.track_inprogress(), pool.slot():
                    return await served(request, handler)
        except Rejected as rejected:
            self.rejected.labels(flow.level, flow.schema, rejected.reason).inc()
            metrics.refused_wait.observe(0)
            raise TooManyRequests(
                TOO_MANY_REQUESTS, retry_after_seconds=RETRY_AFTER_SECONDS
            ) from None
        finally:
            if queued:
                metrics.inqueue.dec()


def _passes_untouched(request: web.Request) -> bool:
    """exec, attach, log, portforward and proxy: long-running, and not APF's business
    (watches are classified; so are the probes, which the ``probes`` schema exempts)."""
    return (
        is_long_running(request)
        and not is_probe(request.path)
        and request_info_of(request).verb != "watch"
    )


FLOW_CONTROL: web.AppKey[FlowControl] = web.AppKey("flow_control", FlowControl)
"""The app's ``FlowControl`` when priority and fairness is on."""


def flow_control_for(
    ctx: ApiContext, metrics: Metrics, *, counted: InflightLimits | None = None
) -> FlowControl:
    """The ``FlowControl`` over ``ctx``'s FlowSchema and PriorityLevelConfiguration caches,
    sharing ``--max-requests-inflight`` + ``--max-mutating-requests-inflight`` seats; the
    requests it runs are counted in ``counted``'s pools (their limits are not enforced)."""
    options = ctx.options

    def cache(kind: str) -> WatchCache:
        found = ctx.cache(ctx.registry.require(GROUP, kind))
        if found is None:
            raise KeyError(f"no watch cache for {kind}: cannot classify requests")
        return found

    return FlowControl(
        schemas=cache("FlowSchema"),
        levels=cache("PriorityLevelConfiguration"),
        server_seats=options.max_requests_inflight + options.max_mutating_requests_inflight,
        metrics=metrics,
        counted=counted,
    )


def setup_flowcontrol(app: web.Application, control: FlowControl) -> None:
    """Keep ``control`` on ``app`` and add the flow headers to every response."""
    app[FLOW_CONTROL] = control
    app.on_response_prepare.append(add_flow_headers)


def priority_and_fairness(control: FlowControl) -> Middleware:
    """The middleware; it takes the in-flight filter's place (inside authorization)."""

    @web.middleware
    async def filter_by_priority(request: web.Request, handler: Handler) -> web.StreamResponse:
        if _passes_untouched(request):
            return await handler(request)
        info = request_info_of(request)
        flow, level = control.classify(request_user(request), info)
        request[_FLOW] = flow
        if info.verb == "watch":
            return await handler(request)
        return await control.serve(request, handler, flow, level)

    return filter_by_priority


async def add_flow_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: name the request's schema and level (429s included)."""
    flow = request.get(_FLOW)
    if isinstance(flow, Flow):
        response.headers[FLOW_SCHEMA_UID_HEADER] = flow.schema_uid
        response.headers[PRIORITY_LEVEL_UID_HEADER] = flow.level_uid


# -- the FlowSchemas' Dangling condition -------------------------------------------------------


def _dangling(schema: Obj, levels: set[str]) -> Obj:
    """The ``Dangling`` condition ``schema`` should carry, without its transition time."""
    name = ((schema.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name", "")
    if name in levels:
        status, reason, says = "False", "Found", "and it exists"
    else:
        status, reason, says = "True", "NotFound", "but there is no such object"
    return {
        "type": "Dangling",
        "status": status,
        "reason": reason,
        "message": "This FlowSchema references the PriorityLevelConfiguration object named "
        f'"{name}" {says}',
    }


def _with_dangling(schema: Obj, levels: set[str]) -> dict[str, Any] | None:
    """``schema`` with its ``Dangling`` condition brought up to date; None if it is."""
    wanted = _dangling(schema, levels)
    status = schema.get("status") or {}
    conditions = list(status.get("conditions") or [])
    old = next((c for c in conditions if c.get("type") == "Dangling"), None)
    if old is not None and all(old.get(k) == v for k, v in wanted.items()):
        return None
    others = [c for c in conditions if c.get("type") != "Dangling"]
    condition = {**wanted, "lastTransitionTime": now_time()}
    return {**schema, "status": {**status, "conditions": [*others, condition]}}


async def _changes(schemas: WatchCache, levels: WatchCache) -> None:
    """Return once either cache has applied a newer revision."""
    waits = [
        asyncio.ensure_future(schemas.wait_until(schemas.revision + 1)),
        asyncio.ensure_future(levels.wait_until(levels.revision + 1)),
    ]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def keep_dangling_conditions(
    control: FlowControl, storage: ObjectStorage, *, backoff: Backoff | None = None
) -> NoReturn:
    """Forever: after each change of the schemas or levels, set every schema's ``Dangling``
    condition to whether its priority level exists (Kubernetes' config controller does). A
    pass that fails (a store error, a Conflict after too many writers) is retried after
    ``backoff`` rather than ending the task, which would stop the apiserver; only a closed or
    failed store ends it."""
    schemas, levels = control.schemas, control.level_cache
    backoff = backoff or Backoff()
    while True:
        try:
            await _mark_dangling(schemas, levels, storage)
        except StoreClosed:
            raise
        except Exception:
            delay = backoff.next_delay()
            log.exception("marking dangling FlowSchemas failed; will retry in %.1f s", delay)
            await asyncio.sleep(delay)
            continue
        await _changes(schemas, levels)


async def _mark_dangling(schemas: WatchCache, levels: WatchCache, storage: ObjectStorage) -> None:
    """One pass: every cached schema whose ``Dangling`` condition is out of date is updated."""
    names = {str(_meta(o).get("name") or "") for o in _objects(levels)}
    for schema in _objects(schemas):
        if _with_dangling(schema, names) is None:
            continue
        try:
            await storage.guaranteed_update(
                None,
                str(_meta(schema).get("name") or ""),
                functools.partial(_mark, levels=names),
            )
        except NotFound:
            pass  # deleted meanwhile


async def _mark(current: dict[str, Any], levels: set[str]) -> dict[str, Any] | None:
    return _with_dangling(current, levels)
