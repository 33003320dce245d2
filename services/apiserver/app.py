"""The apiserver's aiohttp application: routes, middleware, and every long-lived resource.

Why: one factory builds the same app for ``kubelite apiserver``, for in-process tests
(``aiohttp_client(make_app(...))``) and for benchmarks. Long-lived resources are owned by
``cleanup_ctx`` generators, so they start in order and stop in reverse for free:

1. the store (opened by ``make_app``, closed last);
2. the system namespaces and the default storage class (``bootstrap``);
3. the background tasks, one supervised group (``app[BACKGROUND]``, ``component.tasks``): one
   watch cache per resource (startup waits until all are loaded), the CRD controller (``crd``:
   every stored CRD's kind is served before startup ends), then the store compactor
   (``store.keep_window``, keeping ``compaction_window`` revisions; one compactor per round
   among the apiservers sharing the store, by a claim key), the Event sweeper
   (``eventttl``) and the Service allocations' releaser and repair loop
   (``service_allocation``). They run until shutdown; the first to end is logged loudly and ends the
   others, and ``kubelite apiserver`` then stops (exit 1: its supervisor restarts it). A store
   that fails for good is reported to ``app[STORE_HEALTH]`` instead, with one line.

Terminating namespaces are emptied by the controller-manager's namespace controller, as in
Kubernetes: without one, a deleted namespace stays Terminating.

On shutdown every open watch is ended first (``on_shutdown``), so stopping never waits for
watch streams to time out.

Every request is counted and timed first (``metrics``: ``/metrics``, which ``app[METRICS]``
serves; the store is wrapped in ``MeasuredStore`` to time its calls). Every request passes
``authentication`` (the secure port's users; the insecure port's
superuser), then impersonation and RBAC (``authorization``: ``system:masters`` always, the
roles and bindings in the watch caches otherwise; the default ones are written at start by
``bootstrap_policy``); ``service.py`` serves the same app on both ports.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

from aiohttp import web

from api.registry import REGISTRY, Registry
from component.client_certificates import load_authorities
from component.errors import Fatal
from component.tasks import TaskGroup
from services.apiserver.audit import AuditLog, AuditWriter, setup_audit
from services.apiserver.audit_policy import PolicyChecker, load_policy
from services.apiserver.authentication import (
    AUTHENTICATION,
    Authentication,
    StaticTokens,
    authenticate_requests,
)
from services.apiserver.authorization import authorize_requests, setup_authorization
from services.apiserver.bootstrap import (
    ensure_default_storage_class,
    ensure_kubernetes_service,
    ensure_namespaces,
    ensure_system_priority_classes,
)
from services.apiserver.bootstrap_policy import ensure_bootstrap_policy
from services.apiserver.codec import MAX_BODY_BYTES
from services.apiserver.context import CONTEXT, ApiContext, ServerOptions
from services.apiserver.crd import CustomResourceDefinitions, warn_deprecated
from services.apiserver.dashboard import setup_dashboard
from services.apiserver.discovery import setup_discovery
from services.apiserver.encryption import EncryptingStore, load_encryption_config
from services.apiserver.eventttl import sweep_events
from services.apiserver.flowcontrol import (
    FLOW_CONTROL,
    flow_control_for,
    keep_dangling_conditions,
    priority_and_fairness,
    setup_flowcontrol,
)
from services.apiserver.flowcontrol_bootstrap import ensure_flowcontrol_defaults
from services.apiserver.health import setup_health
from services.apiserver.inflight import InflightLimits, limit_inflight
from services.apiserver.measured_store import MeasuredStore
from services.apiserver.metrics import ApiServerMetrics, instrument_requests, serve_metrics
from services.apiserver.middleware import log_malformed_requests, status_errors
from services.apiserver.proxy import setup_proxy
from services.apiserver.resource_metrics import serve_resource_metrics
from services.apiserver.rest import setup_rest
from services.apiserver.service_account_tokens import TokenKeys
from services.apiserver.service_allocation import (
    ServiceAllocator,
    parse_cluster_ip_range,
    parse_port_range,
    repair_event,
)
from services.apiserver.storehealth import STORE_HEALTH, StoreHealth, store_failures
from services.apiserver.watchcache import WatchCache
from services.apiserver.webhooks import add_admission_warnings, webhook_client_lifetime
from store import keep_window, open_store
from store.base import Store, StoreFailed
from store.compactor import CLAIM_KEY as COMPACTION_CLAIM_KEY

__all__ = ["BACKGROUND", "make_app", "open_configured_store"]

log = logging.getLogger(__name__)

BACKGROUND: web.AppKey[TaskGroup] = web.AppKey("background_tasks", TaskGroup)
"""The app's background tasks (watch caches, compactor, Event sweeper), once started."""

DISCOVERY_CHANGED: web.AppKey[Callable[[], None]] = web.AppKey("discovery_changed")
"""Rebuilds discovery and OpenAPI after the registry changed (the CRD controller calls it)."""


def open_configured_store(options: ServerOptions) -> Store:
    """Open ``options.store_url``, creating the directory of a SQLite file if needed.

    Storage that cannot be used (a damaged or unwritable file, a directory that cannot be
    made) raises ``StoreFailed``, whose message is one line; a malformed URL ``ValueError``.
    """
    url = options.store_url
    if url.startswith("sqlite://"):
        location = url[len("sqlite://") :].split("?", 1)[0]
        if location.startswith("//"):  # sqlite:////abs/path: one leading slash is enough
            location = "/" + location.lstrip("/")
        directory = Path(location).parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            in_the_way = isinstance(err, (FileExistsError, NotADirectoryError))
            raise StoreFailed(
                f"cannot create its directory {directory} ("
                + ("a file is in the way" if in_the_way else err.strerror or str(err))
                + ")",
                remedy="remove what is in the way or choose another --state-dir or --store",
            ) from None
    return open_store(url)


def make_app(
    options: ServerOptions | None = None,
    *,
    store: Store | None = None,
    registry: Registry = REGISTRY,
) -> web.Application:
    """The apiserver app over ``store`` (default: opened from ``options.store_url``)."""
    options = options or ServerOptions()
    encryption = (
        load_encryption_config(options.encryption_provider_config, registry)
        if options.encryption_provider_config is not None
        else None
    )
    metrics = ApiServerMetrics()
    store = MeasuredStore(
        store if store is not None else open_configured_store(options), metrics.metrics
    )
    if encryption is not None:
        store = EncryptingStore(store, encryption)
    # this app's own: CRDs add their kinds to it
    registry = Registry(list(registry.every_version()))
    ctx = ApiContext(store=store, registry=registry, options=options)
    ctx.services = _service_allocator(ctx)
    for rt in registry:
        if "watch" in rt.verbs or "list" in rt.verbs:
            ctx.caches[(rt.group, rt.plural)] = WatchCache(
                store,
                rt,
                capacity=options.watch_cache_capacity,
                queue_size=options.watch_queue_size,
            )
    apf = options.enable_priority_and_fairness
    inflight = InflightLimits(  # with APF: requests counted by kind, limited by its levels
        max_read_only=0 if apf else options.max_requests_inflight,
        max_mutating=0 if apf else options.max_mutating_requests_inflight,
    )
    metrics.observe(inflight=inflight, caches=ctx.caches)
    flow_control = flow_control_for(ctx, metrics.metrics, counted=inflight) if apf else None
    ctx.token_keys = _token_keys(options)
    authentication = _authentication(options, ctx.token_keys)
    # instrument_requests outermost: it counts the code the client got; then status_errors,
    # which renders the 401, 403 and 429 the others raise.
    app = web.Application(
        middlewares=[
            instrument_requests(metrics),
            status_errors,
            authenticate_requests(authentication),
            authorize_requests,
            store_failures,
            priority_and_fairness(flow_control) if flow_control else limit_inflight(inflight),
        ],
        client_max_size=MAX_BODY_BYTES + 1,
    )
    app[CONTEXT] = ctx
    app[AUTHENTICATION] = authentication  # the TokenReview API asks it too
    setup_authorization(app, ctx)
    audit = _audit_log(options)
    if audit is not None:
        setup_audit(app, audit)  # outermost: it sees the status every other layer answered
    app[STORE_HEALTH] = StoreHealth()
    app.cleanup_ctx.append(log_malformed_requests)
    app.cleanup_ctx.append(_store_lifetime)
    app.cleanup_ctx.append(_bootstrap)
    app.cleanup_ctx.append(_background)
    app.cleanup_ctx.append(webhook_client_lifetime)
    app.on_shutdown.append(_end_watches)
    app.on_response_prepare.append(warn_deprecated)
    app.on_response_prepare.append(add_admission_warnings)
    if flow_control is not None:
        setup_flowcontrol(app, flow_control)
    setup_health(app)
    serve_metrics(app, metrics)
    setup_dashboard(app)
    serve_resource_metrics(app, registry)  # metrics-server's group, from the kubelets
    app[DISCOVERY_CHANGED] = setup_discovery(app, registry)
    setup_proxy(app)
    setup_rest(app)
    return app


def _token_keys(options: ServerOptions) -> TokenKeys | None:
    """The service-account keys the options name, if any."""
    if not options.service_account_key_files and options.service_account_signing_key_file is None:
        return None
    return TokenKeys.load(
        issuer=options.service_account_issuer,
        audiences=options.api_audiences,
        key_files=options.service_account_key_files,
        signing_key_file=options.service_account_signing_key_file,
    )


def _authentication(options: ServerOptions, keys: TokenKeys | None) -> Authentication:
    """The secure port's authenticators (the insecure port's requests skip them)."""
    tokens = StaticTokens.load(options.token_auth_file) if options.token_auth_file else None
    return Authentication(
        client_authorities=(
            load_authorities(options.client_ca_file) if options.client_ca_file else ()
        ),
        tokens=tokens or StaticTokens(),
        service_accounts=keys,
        anonymous=options.anonymous_auth,
        api_audiences=(
            keys.audiences
            if keys is not None
            else options.api_audiences or (options.service_account_issuer,)
        ),
    )


def _audit_log(options: ServerOptions) -> AuditLog | None:
    """The audit log the options ask for: it takes a policy file and a log path, as in
    Kubernetes (one without the other audits nothing, and says so)."""
    policy_file, log_path = options.audit_policy_file, options.audit_log_path
    if policy_file is None or not log_path:
        if policy_file is not None or log_path:
            log.warning(
                "audit log off: --audit-policy-file and --audit-log-path are needed together"
            )
        return None
    writer = AuditWriter(
        log_path, max_size_mb=options.audit_log_maxsize, max_backups=options.audit_log_maxbackup
    )
    return AuditLog(PolicyChecker(load_policy(policy_file)), writer)


def _service_allocator(ctx: ApiContext) -> ServiceAllocator:
    """The ClusterIP/NodePort allocator; its repair loops record Warning events on Services."""
    events = ctx.storage(ctx.resource("", "events"))

    async def record_event(svc: dict[str, Any], reason: str, message: str, source: str) -> None:
        await events.create(repair_event(svc, reason, message, source))

    return ServiceAllocator(
        ctx.store,
        cluster_ip_range=parse_cluster_ip_range(ctx.options.service_cluster_ip_range),
        node_port_range=parse_port_range(ctx.options.service_node_port_range),
        leak_grace=ctx.options.service_leak_grace,
        record_event=record_event,
    )


async def _store_lifetime(app: web.Application) -> AsyncIterator[None]:
    yield
    await app[CONTEXT].store.close()


async def _bootstrap(app: web.Application) -> AsyncIterator[None]:
    await ensure_namespaces(app[CONTEXT])
    await ensure_default_storage_class(app[CONTEXT])
    await ensure_system_priority_classes(app[CONTEXT])
    await ensure_kubernetes_service(app[CONTEXT])
    await ensure_bootstrap_policy(app[CONTEXT])
    if FLOW_CONTROL in app:
        await ensure_flowcontrol_defaults(app[CONTEXT])
    yield


async def _reporting(coro: Coroutine[Any, Any, Any], *, health: StoreHealth) -> None:
    """``coro``, with a permanent store failure reported to ``health`` (which stops the
    server) and raised as the one-line ``Fatal`` it is, instead of a crash with a traceback."""
    try:
        await coro
    except StoreFailed as failure:
        health.report(failure)
        raise Fatal(f"the store has failed: {failure}") from failure


def start_background(app: web.Application, name: str, coro: Coroutine[Any, Any, Any]) -> None:
    """Run ``coro`` in the app's supervised group (``app[BACKGROUND]``) as ``name``; a store
    failure in it stops the server with the store's one-line verdict, as in every other
    background task (``_reporting``)."""
    app[BACKGROUND].start(name, _reporting(coro, health=app[STORE_HEALTH]))


async def _background(app: web.Application) -> AsyncIterator[None]:
    """Every background task of the app, in one supervised group (``app[BACKGROUND]``).

    The watch caches start first and startup waits until all have loaded; then the store
    compactor and the Event sweeper. These tasks run until shutdown: the first to end is logged
    loudly and the others are cancelled (``component.tasks``); the serving process waits on
    ``first_ended()`` and stops.
    """
    ctx = app[CONTEXT]
    health = app[STORE_HEALTH]
    options = ctx.options
    group = TaskGroup("apiserver", logger=log)
    app[BACKGROUND] = group
    for cache in ctx.caches.values():
        start_background(app, f"watch-cache-{cache.rt.plural}", cache.run())
    all_ready: asyncio.Future[Any] = asyncio.ensure_future(
        asyncio.gather(*(cache.ready.wait() for cache in ctx.caches.values()))
    )
    ended: asyncio.Future[Any] = asyncio.ensure_future(group.first_ended())
    try:
        await asyncio.wait([all_ready, ended], return_when=asyncio.FIRST_COMPLETED)
    finally:
        all_ready.cancel()
        ended.cancel()
    if not all_ready.done() or all_ready.cancelled():
        await group.cancel()
        if health.failure is not None:
            raise health.failure
        raise RuntimeError("a watch cache stopped before it had loaded; see the log above")
    crds = CustomResourceDefinitions(ctx, on_change=app[DISCOVERY_CHANGED])
    await crds.load()  # every stored CRD's kind is served before the first request
    start_background(app, "crd-controller", crds.run())
    start_background(
        app,
        "store-compactor",
        keep_window(
            ctx.store,
            revisions=options.compaction_window,
            interval=options.compaction_interval,
            claim_key=COMPACTION_CLAIM_KEY,  # one compactor per round among the apiservers
        ),
    )
    allocator = ctx.services
    if allocator is not None:
        start_background(app, "service-allocation-releaser", allocator.follow_services())
        start_background(
            app,
            "service-allocation-repair",
            allocator.repair_forever(interval=options.service_repair_interval),
        )
    ttl = options.event_ttl
    start_background(
        app, "event-ttl-sweeper", sweep_events(ctx, ttl=ttl, interval=min(60.0, ttl / 2))
    )
    if FLOW_CONTROL in app:
        control = app[FLOW_CONTROL]
        schemas = ctx.storage(control.schemas.rt)
        start_background(app, "apf-dangling-conditions", keep_dangling_conditions(control, schemas))
    yield
    for cache in ctx.caches.values():
        cache.stop()
    await group.cancel()


async def _end_watches(app: web.Application) -> None:
    for cache in app[CONTEXT].caches.values():
        cache.stop()
