"""The apiserver's ``/metrics``: kube-apiserver's metric names, on the app's own registry.

Why: "which requests are slow, which fail, how many watches are open, how far behind is the
cache" are the first questions asked of an apiserver, and dashboards ask them in
kube-apiserver's names. ``ApiServerMetrics`` (``app[METRICS]``; its ``metrics`` is the
``component.metrics.Metrics`` other parts of the apiserver add their own metrics to) holds:

* ``apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,
  code}`` and ``apiserver_request_duration_seconds`` (same labels less ``code``; Kubernetes'
  SLO buckets, 5 ms to 60 s), recorded by ``instrument_requests``, the outermost middleware, so
  every answer is counted with the code the client got (401, 403 and 429 included). The labels
  are ``endpoints/metrics``': the verb as the route reports it (``GET``, ``LIST``, ``WATCH``,
  ``POST``, ``PUT``, ``PATCH``, ``APPLY`` for a server-side apply, ``DELETE``,
  ``DELETECOLLECTION``, ``CONNECT`` for ``log``/``exec``/``attach``/``portforward``/``proxy``;
  a non-resource request's method), ``scope`` ``resource`` (named, or a create), ``namespace``,
  ``cluster`` or empty for a non-resource path, whose path is its ``subresource`` label (as in
  Kubernetes) only for the paths in ``_KNOWN_PATHS``: any other path — a resource or
  subresource the app does not serve included — is counted as ``other``, so random URLs
  cannot grow the series without bound;
* ``apiserver_longrunning_requests`` (watches and the ``CONNECT`` subresources open now) and
  ``apiserver_current_inflight_requests{request_kind}`` (``readOnly``/``mutating`` slots
  taken, read at the scrape where Kubernetes reports the last second's maximum);
* per watch cache, read at the scrape: ``apiserver_watch_events_total{group,version,kind}``
  (events sent to watchers), ``apiserver_watch_cache_events_received_total{group,resource}``,
  ``apiserver_watch_cache_capacity`` and ``apiserver_watch_cache_resource_version``,
  ``apiserver_storage_objects{resource}`` (objects stored, ``pods``/``deployments.apps``) and
  ``apiserver_watch_cache_consistent_read_total{group,resource,success,fallback}`` (consistent
  lists served from the cache, or from the store when the cache did not catch up: ``listing``);
* ``etcd_request_duration_seconds{operation,type}``: every store call
  (``services.apiserver.measured_store``), whatever the backend.

Limits: no response sizes, no ``request_slo``/``sli`` histograms, no per-user or per-flow
metrics (API Priority and Fairness adds its own ``apiserver_flowcontrol_*`` to ``metrics``);
watches fed from the store's history (``StoreFeed``) send events ``watch_events_total`` does
not count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from api.registry import ResourceType
from component.metrics import CONTENT_TYPE, Metrics, Samples
from services.apiserver.context import CONTEXT
from services.apiserver.inflight import LONG_RUNNING_SUBRESOURCES, InflightLimits, is_long_running
from services.apiserver.loop_metrics import LoopCounter, LoopGauge, LoopHistogram
from services.apiserver.request_info import RequestInfo, request_info_of
from services.apiserver.watchcache import WatchCache

__all__ = [
    "METRICS",
    "REQUEST_BUCKETS",
    "ApiServerMetrics",
    "instrument_requests",
    "serve_metrics",
]

METRICS: web.AppKey[ApiServerMetrics] = web.AppKey("metrics")

REQUEST_BUCKETS: Final = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20,
    30, 45, 60,
)  # fmt: skip
"""kube-apiserver's ``apiserver_request_duration_seconds`` buckets (its latency SLO's)."""

_REQUEST_LABELS: Final = (
    "verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component",
)  # fmt: skip
_VERBS: Final = {
    "get": "GET",
    "list": "LIST",
    "watch": "WATCH",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETECOLLECTION",
}
_APPLY_CONTENT_TYPE: Final = "application/apply-patch+yaml"
_KNOWN_PATHS: Final = (
    "/healthz", "/livez", "/readyz", "/version", "/metrics", "/api", "/apis", "/openapi",
    "/.well-known",
)  # fmt: skip
"""Non-resource paths counted under their own name (and their sub-paths under it)."""
COMPONENT: Final = "apiserver"


def _labels(info: RequestInfo, request: web.Request) -> tuple[str, ...]:
    """``_REQUEST_LABELS``' values for one request."""
    dry_run = "All" if request.query.get("dryRun") == "All" else ""
    rt = request.app[CONTEXT].registry.get(info.api_group, info.api_version, info.resource)
    if rt is None or (
        info.subresource and all(s.name != info.subresource for s in rt.subresources)
    ):  # not a route: counted by path, as a non-resource request
        path = info.path.rstrip("/") or "/"
        known = next((p for p in _KNOWN_PATHS if path == p or path.startswith(p + "/")), "other")
        return (request.method, dry_run, "", "", "", known, "", COMPONENT)
    if info.subresource in LONG_RUNNING_SUBRESOURCES:
        verb = "CONNECT"
    elif info.verb == "patch" and request.content_type == _APPLY_CONTENT_TYPE:
        verb = "APPLY"
    else:
        verb = _VERBS.get(info.verb, info.verb.upper())
    if info.name or info.verb == "create":
        scope = "resource"
    elif info.namespace:
        scope = "namespace"
    else:
        scope = "cluster"
    return (
        verb, dry_run, info.api_group, info.api_version, info.resource, info.subresource, scope,
        COMPONENT,
    )  # fmt: skip


class ApiServerMetrics:
    """One apiserver's metrics: the request metrics now, the rest once ``observe`` is told
    what to read at each scrape."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        m = self.metrics
        self.requests = LoopCounter(
            m,
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, "
            "version, resource, scope, component, and HTTP response code.",
            (*_REQUEST_LABELS, "code"),
        )
        self.durations = LoopHistogram(
            m,
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, "
            "version, resource, subresource, scope and component.",
            _REQUEST_LABELS,
            buckets=REQUEST_BUCKETS,
        )
        self.longrunning = LoopGauge(
            m,
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, "
            "version, resource, scope and component. Not all requests are tracked this way.",
            ("verb", "group", "version", "resource", "subresource", "scope", "component"),
        )

    def observe(self, *, inflight: InflightLimits, caches: Mapping[Any, WatchCache]) -> None:
        """Read ``inflight``'s pools and every cache in ``caches`` (CRDs add theirs later)."""
        self.metrics.gauges(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per "
            "request kind in last second.",
            ("request_kind",),
            lambda: [
                (("readOnly",), float(inflight.read_only.taken)),
                (("mutating",), float(inflight.mutating.taken)),
            ],
        )
        for name, doc, labels, kind, sample in _PER_CACHE:
            register = self.metrics.counters if kind == "counter" else self.metrics.gauges
            register(name, doc, labels, _reader(caches, sample))
        self.metrics.counters(
            "apiserver_watch_cache_consistent_read_total",
            "Counter for consistent reads from cache.",
            ("group", "resource", "success", "fallback"),
            lambda: [
                ((c.rt.group, c.rt.plural, success, fallback), float(n))
                for c in list(caches.values())
                for (success, fallback), n in list(c.consistent_reads.items())
            ],
        )


CacheSample = Callable[[WatchCache], tuple[tuple[str, ...], float]]


def _resource(rt: ResourceType) -> str:
    """``pods``, ``deployments.apps``: Kubernetes' group-resource string."""
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


_PER_CACHE: Final[tuple[tuple[str, str, tuple[str, ...], str, CacheSample], ...]] = (
    (
        "apiserver_watch_events_total",
        "Number of events sent in watch clients",
        ("group", "version", "kind"),
        "counter",
        lambda c: ((c.rt.group, c.rt.version, c.rt.kind), float(c.events_sent)),
    ),
    (
        "apiserver_watch_cache_events_received_total",
        "Counter of events received in watch cache broken by resource type.",
        ("group", "resource"),
        "counter",
        lambda c: ((c.rt.group, c.rt.plural), float(c.events_received)),
    ),
    (
        "apiserver_watch_cache_capacity",
        "Total capacity of watch cache broken by resource type.",
        ("group", "resource"),
        "gauge",
        lambda c: ((c.rt.group, c.rt.plural), float(c.capacity)),
    ),
    (
        "apiserver_watch_cache_resource_version",
        "Current resource version of watch cache broken by resource type. This is truncated "
        "to the 15 least significant digits.",
        ("group", "resource"),
        "gauge",
        lambda c: ((c.rt.group, c.rt.plural), float(c.revision % 10**15)),
    ),
    (
        "apiserver_storage_objects",
        "Number of stored objects at the time of last check split by kind. In case of a "
        "fetching error, the value will be -1.",
        ("resource",),
        "gauge",
        lambda c: ((_resource(c.rt),), float(c.object_count)),
    ),
)
"""The metrics read off each watch cache: name, help, labels, kind, its sample of one cache."""


def _reader(caches: Mapping[Any, WatchCache], sample: CacheSample) -> Callable[[], Samples]:
    def read() -> Samples:
        return [sample(cache) for cache in list(caches.values())]

    return read


def instrument_requests(metrics: ApiServerMetrics) -> Middleware:
    """The middleware recording every request (place it outermost)."""

    @web.middleware
    async def instrument(request: web.Request, handler: Handler) -> web.StreamResponse:
        labels = _labels(request_info_of(request), request)
        started = time.monotonic()
        code = 500
        long_running = labels[0] in ("WATCH", "CONNECT") and is_long_running(request)
        if long_running:
            gauge = metrics.longrunning.labels(*labels[:1], *labels[2:])
            gauge.inc()
        try:
            response = await handler(request)
            code = response.status
            return response
        except web.HTTPException as exc:
            code = exc.status
            raise
        finally:
            if long_running:
                gauge.dec()
            metrics.requests.labels(*labels, str(code)).inc()
            metrics.durations.labels(*labels).observe(time.monotonic() - started)

    return instrument


async def _metrics_page(request: web.Request) -> web.Response:
    return web.Response(
        body=request.app[METRICS].metrics.render().encode(),
        headers={"Content-Type": CONTENT_TYPE},
    )


def serve_metrics(app: web.Application, metrics: ApiServerMetrics) -> None:
    """``GET /metrics`` (on the secure port it needs ``get`` on the non-resource URL
    ``/metrics``: the ``system:monitoring`` role)."""
    app[METRICS] = metrics
    app.router.add_get("/metrics", _metrics_page)
