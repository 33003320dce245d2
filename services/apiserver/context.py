"""What every request handler reaches for: the store, the registry, storages, watch caches, options.

Why: handlers are plain functions of a request; this object, kept on the app under one typed
``web.AppKey``, hands them the long-lived parts the app's cleanup contexts created (one
``ObjectStorage`` and one ``WatchCache`` per resource type) without module globals.

Limits: it owns nothing itself — ``app.py`` creates and tears down everything referenced here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from aiohttp import web

from api.addresses import DNS_ADDRESS_TYPES, IP_ADDRESS_TYPES, PREFERRED_ADDRESS_TYPES
from api.registry import Registry, ResourceType
from services.apiserver.predicate import Predicate
from services.apiserver.service_account_tokens import DEFAULT_ISSUER, TokenKeys
from services.apiserver.service_allocation import (
    ServiceAllocator,
    parse_cluster_ip_range,
    parse_port_range,
)
from services.apiserver.storage import ObjectStorage
from services.apiserver.watchcache import DEFAULT_CAPACITY, DEFAULT_QUEUE, WatchCache
from store.base import KeyValue, Store

__all__ = ["CONTEXT", "ApiContext", "ServerOptions"]


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """The apiserver's settings, validated by ``main`` from the command line."""

    store_url: str = "memory://"
    state_dir: Path = Path(".kubelite")
    bind_address: str = "127.0.0.1"
    port: int = 8080
    secure_port: int = -1
    """The HTTPS port with authentication (``--secure-port``); 0 = any free port, -1 = off."""
    secure_bind_address: str = "0.0.0.0"
    """Address of the secure port (``--bind-address``; Kubernetes' default: every interface)."""
    cert_dir: Path | None = None
    """Where a self-made CA and serving certificate go when ``tls_cert_file`` is not given
    (``--cert-dir``; None = ``<state_dir>/pki``)."""
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    client_ca_file: Path | None = None
    """CA whose client certificates authenticate their CN/O (``--client-ca-file``)."""
    token_auth_file: Path | None = None
    """CSV ``token,user,uid[,"group1,group2"]`` (``--token-auth-file``)."""
    service_account_key_files: tuple[Path, ...] = ()
    """Public keys that verify service-account tokens (``--service-account-key-file``)."""
    service_account_signing_key_file: Path | None = None
    service_account_issuer: str = DEFAULT_ISSUER
    api_audiences: tuple[str, ...] = ()
    """Audiences a token must name one of (``--api-audiences``; empty = the issuer)."""
    anonymous_auth: bool = True
    """Requests without credentials on the secure port are ``system:anonymous``
    (``--anonymous-auth``); False: 401."""
    authorization_modes: tuple[str, ...] = ("Node", "RBAC")
    """The authorizer chain after ``system:masters``, in order (``--authorization-mode``):
    ``Node`` (``node_authorizer``) and ``RBAC``."""
    kubelet_client_certificate: Path | None = None
    """The client certificate the apiserver shows kubelets (``--kubelet-client-certificate``)."""
    kubelet_client_key: Path | None = None
    kubelet_certificate_authority: Path | None = None
    """The CA kubelets' serving certificates must chain to (``--kubelet-certificate-authority``)."""
    kubelet_preferred_address_types: tuple[str, ...] = PREFERRED_ADDRESS_TYPES
    """The Node address types a kubelet is dialled at, first reported first
    (``--kubelet-preferred-address-types``); kubelite's default puts InternalIP first, as its
    kubelets' Hostname (the node name) need not resolve on the host."""
    event_ttl: float = 3600.0
    """Seconds an Event lives after its last write (``--event-ttl``, Kubernetes' default 1h)."""
    compaction_window: int = 10_000
    """Store revisions kept for watch resumption and paging (older ones are compacted)."""
    compaction_interval: float = 300.0
    watch_cache_capacity: int = DEFAULT_CAPACITY
    watch_queue_size: int = DEFAULT_QUEUE
    direct_watch_writes: bool = True
    """Let the watch cache write events straight onto idle watch connections (see ``watch``)."""
    bookmark_interval: float = 5.0
    """Seconds between BOOKMARK events on an idle watch that asked for them."""
    min_request_timeout: float = 1800.0
    """A watch without ``timeoutSeconds`` ends after 1-2x this many seconds, as in Kubernetes."""
    max_requests_inflight: int = 400
    """Read-only requests served at once before 429 (``--max-requests-inflight``; 0 = no limit)."""
    max_mutating_requests_inflight: int = 200
    """Mutating requests served at once before 429 (``--max-mutating-requests-inflight``)."""
    enable_priority_and_fairness: bool = True
    """API Priority and Fairness (``flowcontrol``) shares the sum of the two limits above among
    the priority levels (``--enable-priority-and-fairness``); False: the two in-flight pools."""
    request_header_timeout: float = 32.0
    """Seconds a connection gets to send a whole request head, and to stay idle between requests."""
    max_open_connections: int | None = None
    """Open connections before new ones are refused with 503; None = sized from RLIMIT_NOFILE,
    0 = no limit (``--max-open-connections``)."""
    service_cluster_ip_range: str = "127.128.0.0/16"
    """Where ClusterIPs come from (``--service-cluster-ip-range``); .1 is the ``kubernetes``
    Service's."""
    service_node_port_range: str = "30000-32767"
    """Where NodePorts come from (``--service-node-port-range``)."""
    service_repair_interval: float = 180.0
    """Seconds between passes of the ClusterIP/NodePort repair loop (Kubernetes' 3 minutes)."""
    service_leak_grace: float = 60.0
    """An allocation no Service holds is released once it is this old (a younger one may belong
    to a create still in flight)."""
    audit_policy_file: Path | None = None
    """The audit ``Policy`` (``--audit-policy-file``); without it nothing is audited."""
    audit_log_path: str | None = None
    """Where audit events go, one JSON line each (``--audit-log-path``; ``-`` = stdout)."""
    audit_log_maxsize: int = 0
    """MiB the audit log may reach before it is rotated (``--audit-log-maxsize``; 0 = never)."""
    audit_log_maxbackup: int = 0
    """Rotated audit logs kept (``--audit-log-maxbackup``; 0 = all)."""
    encryption_provider_config: Path | None = None
    """The ``EncryptionConfiguration`` for encryption at rest (``--encryption-provider-config``)."""
    immortal_namespaces: tuple[str, ...] = ("default", "kube-system", "kube-public")
    initial_namespaces: tuple[str, ...] = (
        "default",
        "kube-system",
        "kube-node-lease",
        "kube-public",
    )

    @property
    def kubelet_https(self) -> bool:
        """Kubelets are dialled over https: a kubelet client certificate or CA is given."""
        return (
            self.kubelet_client_certificate is not None
            or self.kubelet_certificate_authority is not None
        )

    def __post_init__(self) -> None:
        if self.event_ttl <= 0 or self.compaction_window < 1 or self.compaction_interval <= 0:
            raise ValueError("event TTL, compaction window and interval must be positive")
        if self.watch_cache_capacity < 1 or self.watch_queue_size < 1:
            raise ValueError("watch cache capacity and queue size must be positive")
        if self.max_requests_inflight < 0 or self.max_mutating_requests_inflight < 0:
            raise ValueError("in-flight request limits must be >= 0 (0 means no limit)")
        if self.request_header_timeout <= 0:
            raise ValueError("the request header timeout must be positive")
        if self.max_open_connections is not None and self.max_open_connections < 0:
            raise ValueError("the open connection limit must be >= 0 (0 means no limit)")
        parse_cluster_ip_range(self.service_cluster_ip_range)
        parse_port_range(self.service_node_port_range)
        if (self.tls_cert_file is None) != (self.tls_private_key_file is None):
            raise ValueError("--tls-cert-file and --tls-private-key-file go together")
        unknown = set(self.authorization_modes) - {"Node", "RBAC"}
        if unknown or not self.authorization_modes:
            raise ValueError(
                f"--authorization-mode {','.join(self.authorization_modes)}: kubelite knows "
                "Node and RBAC"
            )
        if (self.kubelet_client_certificate is None) != (self.kubelet_client_key is None):
            raise ValueError("--kubelet-client-certificate and --kubelet-client-key go together")
        known = (*IP_ADDRESS_TYPES, *DNS_ADDRESS_TYPES)
        unknown_types = [t for t in self.kubelet_preferred_address_types if t not in known]
        if unknown_types or not self.kubelet_preferred_address_types:
            raise ValueError(
                f"--kubelet-preferred-address-types {','.join(self.kubelet_preferred_address_types)}"
                f": each must be one of {','.join(known)}"
            )
        if self.audit_log_maxsize < 0 or self.audit_log_maxbackup < 0:
            raise ValueError("the audit log's size and backup count must be >= 0")
        if self.service_repair_interval <= 0 or self.service_leak_grace < 0:
            raise ValueError("the service repair interval must be positive, the grace >= 0")


@dataclass
class ApiContext:
    store: Store
    registry: Registry
    options: ServerOptions
    storages: dict[tuple[str, str], ObjectStorage] = field(default_factory=dict)
    caches: dict[tuple[str, str], WatchCache] = field(default_factory=dict)
    services: ServiceAllocator | None = None
    """Hands out ClusterIPs and NodePorts (set by ``make_app``)."""
    token_keys: TokenKeys | None = None
    """Signs and checks service-account tokens (set by ``make_app`` from the options)."""
    clock: Callable[[], float] = time.time
    """Seconds since the epoch, for token lifetimes; tests replace it to move time."""
    _resources: dict[tuple[str, str], ResourceType] = field(default_factory=dict, repr=False)
    """``resource``'s answers, each checked against the registry when reused."""
    _object_lists: dict[tuple[str, str], tuple[WatchCache, int, list[dict[str, Any]]]] = field(
        default_factory=dict, repr=False
    )
    """``cached_objects``' lists, with the cache and the cache revision they were built at."""

    def __post_init__(self) -> None:
        for rt in self.registry:
            ttl = self.options.event_ttl if (rt.group, rt.plural) == ("", "events") else None
            self.storages[(rt.group, rt.plural)] = self.new_storage(rt, ttl=ttl)

    def new_storage(self, rt: ResourceType, *, ttl: float | None = None) -> ObjectStorage:
        """``rt``'s objects in the store, its updates starting from its watch cache's state."""
        return ObjectStorage(
            self.store, rt, ttl=ttl, cached=partial(self._cached_value, (rt.group, rt.plural))
        )

    def _cached_value(self, resource: tuple[str, str], key: str) -> KeyValue | None:
        """The watch cache's latest state of ``key`` as the store value it was decoded from
        (its JSON carries a resourceVersion, which decoding stamps anew): a guaranteed
        update's first guess. None when the kind has no cache, it is not loaded yet, or it
        does not hold the key."""
        cache = self.caches.get(resource)
        if cache is None or not cache.ready.is_set():
            return None
        event = cache.lookup(key)
        if event is None:
            return None
        return KeyValue(key, event.current.json, 0, event.revision)

    def storage(self, rt: ResourceType) -> ObjectStorage:
        return self.storages[(rt.group, rt.plural)]

    def cache(self, rt: ResourceType) -> WatchCache | None:
        return self.caches.get((rt.group, rt.plural))

    async def cached_get(
        self, rt: ResourceType, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        """One object from ``rt``'s watch cache once it is ready; from the store before then,
        or when the cache does not hold it yet (one created a moment ago is found)."""
        cache = self.cache(rt)
        if cache is not None and cache.ready.is_set():
            event = cache.lookup(rt.key(namespace, name))
            if event is not None:
                return event.obj
        return await self.storage(rt).get_or_none(namespace, name)

    def cached_objects(self, rt: ResourceType) -> list[dict[str, Any]] | None:
        """Every object in ``rt``'s watch cache, in key order (None: ``rt`` has no cache), for
        the small kinds admission reads on every write (PriorityClasses, webhook and policy
        configurations): built once per cache revision, not per request. The list and its
        objects are shared: callers read them, never change them."""
        cache = self.cache(rt)
        if cache is None:
            return None
        key = (rt.group, rt.plural)
        built = self._object_lists.get(key)
        if built is None or built[0] is not cache or built[1] != cache.revision:
            events, revision = cache.snapshot(Predicate(rt=rt))
            built = self._object_lists[key] = (cache, revision, [e.obj for e in events])
        return built[2]

    def resource(self, group: str, plural: str) -> ResourceType:
        """The first registered version of ``plural`` in ``group`` (``KeyError`` if none);
        an answer is remembered while the registry still serves it (a CRD can go)."""
        found = self._resources.get((group, plural))
        if found is not None and self.registry.get(group, found.version, plural) is found:
            return found
        for rt in self.registry:
            if rt.group == group and rt.plural == plural:
                self._resources[(group, plural)] = rt
                return rt
        raise KeyError(f"{plural}.{group}")


CONTEXT: web.AppKey[ApiContext] = web.AppKey("apiserver_context", ApiContext)
