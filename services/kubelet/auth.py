"""Who may use the kubelet's server: TLS, then authentication and authorization delegated to the apiserver.

Why: the kubelet's server runs commands in containers, reads their logs and opens their ports —
anyone who reaches it unchecked owns the node's pods. A real kubelet's port 10250 therefore
serves TLS and asks the apiserver about every request; this module does the same, with
Kubernetes' flags (``--tls-cert-file``, ``--tls-private-key-file``, ``--client-ca-file``,
``--authentication-token-webhook``, ``--authorization-mode``, ``--anonymous-auth``).

What it owns:

* ``KubeletAuthOptions``: those flags, and ``server_ssl_context`` — TLS 1.2 or later; with a
  client CA a client certificate is asked for and taken whatever it is, as Go's
  ``tls.RequestClientCert`` takes it (``component.client_certificates``), to be judged below;
* **authentication** (``Authenticator``), in Kubernetes' order: a client certificate that
  verifies against ``--client-ca-file`` (signature, validity, client-auth usage: user = CN,
  groups = O, plus ``system:authenticated``; one that does not verify is a 401 unless a good
  bearer token comes with it); a bearer token sent to the apiserver's
  TokenReview API (``authentication.k8s.io/v1``) when the token webhook is on, each answer
  (yes or no) cached for ``--authentication-token-webhook-cache-ttl`` (2m) by a hash of the
  token; otherwise ``system:anonymous`` in ``system:unauthenticated`` when anonymous requests are
  allowed, and 401 ``Unauthorized`` when not;
* **authorization** (``Authorizer``): ``AlwaysAllow``, or ``Webhook`` — a SubjectAccessReview
  (``authorization.k8s.io/v1``) per request attribute set, allowed answers cached for
  ``--authorization-webhook-cache-authorized-ttl`` (5m), denials for
  ``--authorization-webhook-cache-unauthorized-ttl`` (30s);
* ``request_attributes``: Kubernetes' kubelet mapping (``pkg/kubelet/server/auth.go`` with
  fine-grained authorization on, the default since 1.33): resource ``nodes``, name = the node,
  verb from the HTTP method (GET get, POST create, PUT update, PATCH patch, DELETE delete),
  subresource ``stats``, ``metrics``, ``log`` (``/logs``) or ``checkpoint`` for those paths,
  ``proxy`` for everything else — exec, attach, portForward, run, containerLogs — and for
  ``/pods``, ``/runningpods``, ``/healthz``, ``/configz`` and ``/statusz`` first their own
  subresource (``pods``, ``healthz``, ...) then ``proxy``; any one allowed lets the request in;
* ``authenticate_and_authorize``: the aiohttp middleware answering 401 ``Unauthorized`` and 403
  ``Forbidden (user=<name>, verb=<verb>, resource=nodes, subresource(s)=[<subresources>])`` in
  plain text, as the kubelet does, and 500 ``Authorization error (...)`` when the apiserver
  cannot be asked. Refusals are logged here (the kubelet's own log); the reviews asked show in
  the apiserver's audit log like any other request.

Not here: the separate health port (``--healthz-port``: ``/healthz`` with no authentication, as
the kubelet's 10248), and certificate rotation or a self-signed serving certificate (without
``--tls-cert-file`` the server speaks plain HTTP with no authentication at all — the kubelite
default for tests and ``--runtime sim`` benches; Kubernetes would make its own certificate).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from cryptography import x509
from cryptography.x509.oid import NameOID

from api.errors import StatusError
from api.registry import REGISTRY
from client.rest import ApiClient
from component.client_certificates import (
    UntrustedCertificate,
    load_authorities,
    peer_certificate,
    serving_context,
    verify_client_certificate,
)

__all__ = [
    "AUTHORIZATION_MODES",
    "Attributes",
    "Authenticator",
    "Authorizer",
    "KubeletAuthOptions",
    "ReviewFailed",
    "User",
    "authenticate_and_authorize",
    "make_auth",
    "request_attributes",
]

log = logging.getLogger("kubelet.auth")

AUTHORIZATION_MODES = ("AlwaysAllow", "Webhook")
AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
ANONYMOUS_USER = "system:anonymous"
TOKEN_CACHE_TTL = 120.0
"""``--authentication-token-webhook-cache-ttl``'s default (Kubernetes' 2m)."""
AUTHORIZED_TTL = 300.0
"""``--authorization-webhook-cache-authorized-ttl``'s default (Kubernetes' 5m)."""
UNAUTHORIZED_TTL = 30.0
"""``--authorization-webhook-cache-unauthorized-ttl``'s default (Kubernetes' 30s)."""
CACHE_LIMIT = 4096
"""Entries each cache holds before it drops the expired ones, then the oldest."""

VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
FINE_GRAINED = (
    ("/pods", "pods"),
    ("/healthz", "healthz"),
    ("/configz", "configz"),
    ("/statusz", "statusz"),
    ("/runningpods", "pods"),
)
"""Paths tried first as their own subresource, then as ``proxy`` (KubeletFineGrainedAuthz)."""
NARROW = (
    ("/stats", "stats"),
    ("/metrics", "metrics"),
    ("/logs", "log"),
    ("/checkpoint", "checkpoint"),
)
"""Paths authorized as these subresources only, never as ``proxy``."""


@dataclass(frozen=True, slots=True)
class User:
    """An authenticated identity, as a SubjectAccessReview names it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


ANONYMOUS = User(name=ANONYMOUS_USER, groups=(UNAUTHENTICATED_GROUP,))


@dataclass(frozen=True, slots=True)
class KubeletAuthOptions:
    """The server's TLS and auth flags, as the kubelet's."""

    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    client_ca_file: Path | None = None
    """Client certificates signed by this CA authenticate as CN in O (``--client-ca-file``)."""
    token_webhook: bool = False
    """Bearer tokens are checked by the apiserver's TokenReview (``--authentication-token-webhook``)."""
    token_cache_ttl: float = TOKEN_CACHE_TTL
    authorization_mode: Literal["AlwaysAllow", "Webhook"] = "AlwaysAllow"
    authorized_ttl: float = AUTHORIZED_TTL
    unauthorized_ttl: float = UNAUTHORIZED_TTL
    anonymous: bool = True
    """A request without credentials is ``system:anonymous`` (``--anonymous-auth``)."""

    def __post_init__(self) -> None:
        if (self.tls_cert_file is None) != (self.tls_private_key_file is None):
            raise ValueError("--tls-cert-file and --tls-private-key-file go together")
        asks = self.client_ca_file is not None or self.token_webhook
        if self.tls_cert_file is None and (asks or self.authorization_mode != "AlwaysAllow"):
            raise ValueError(
                "--client-ca-file, --authentication-token-webhook and --authorization-mode="
                "Webhook need --tls-cert-file: credentials are never taken over plain HTTP"
            )

    @property
    def serves_tls(self) -> bool:
        return self.tls_cert_file is not None

    def server_ssl_context(self) -> ssl.SSLContext:
        assert self.tls_cert_file is not None and self.tls_private_key_file is not None
        return serving_context(self.tls_cert_file, self.tls_private_key_file, self.client_ca_file)


@dataclass(frozen=True, slots=True)
class Attributes:
    """One authorization question: may ``user`` ``verb`` ``nodes/<subresource>`` ``name``."""

    user: User
    verb: str
    subresource: str
    name: str
    path: str

    def review(self) -> dict[str, Any]:
        """The SubjectAccessReview asking it."""
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": self.user.name,
                "uid": self.user.uid,
                "groups": list(self.user.groups),
                "extra": {key: list(values) for key, values in self.user.extra.items()},
                "resourceAttributes": {
                    "namespace": "",
                    "verb": self.verb,
                    "group": "",
                    "version": "v1",
                    "resource": "nodes",
                    "subresource": self.subresource,
                    "name": self.name,
                },
            },
        }


def _is_subpath(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def request_attributes(user: User, *, method: str, path: str, node: str) -> list[Attributes]:
    """The attribute sets one of which must be allowed (see the module docstring)."""
    subresources = [sub for prefix, sub in FINE_GRAINED if _is_subpath(path, prefix)][:1]
    narrow = [sub for prefix, sub in NARROW if _is_subpath(path, prefix)][:1]
    subresources += narrow or ["proxy"]
    verb = VERBS.get(method, "")
    return [Attributes(user, verb, sub, node, path) for sub in subresources]


K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class _Cached(Generic[V]):
    value: V


class _TtlCache(Generic[K, V]):
    """A small map whose entries expire; bounded by ``CACHE_LIMIT``."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> _Cached[V] | None:
        """The live entry for ``key`` (its value may itself be None), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires <= self._clock():
            del self._entries[key]
            return None
        return _Cached(value)

    def put(self, key: K, value: V, *, ttl: float) -> None:
        if ttl <= 0:
            return
        now = self._clock()
        if len(self._entries) >= CACHE_LIMIT:
            self._entries = {k: e for k, e in self._entries.items() if e[0] > now}
            while len(self._entries) >= CACHE_LIMIT:
                del self._entries[next(iter(self._entries))]
        self._entries[key] = (now + ttl, value)


class ReviewFailed(Exception):
    """The apiserver could not be asked (or answered nonsense); the request is not let in."""


class Untrusted(Exception):
    """Credentials were presented and do not check out (logged; the answer is a 401)."""


def _certificate_user(request: web.Request, authorities: Sequence[x509.Certificate]) -> User | None:
    """The user of the client certificate, if one was sent; ``Untrusted`` if it does not
    verify against ``authorities`` (the handshake took it unchecked, as Go's)."""
    der = peer_certificate(request.transport)
    if der is None:
        return None
    try:
        cert = verify_client_certificate(der, authorities, now=datetime.datetime.now(datetime.UTC))
    except UntrustedCertificate as exc:
        raise Untrusted(f"client certificate: {exc}") from None
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names or not str(names[0].value):
        raise Untrusted("the client certificate has no common name")
    organizations = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    groups = tuple(str(o.value) for o in organizations)
    return User(name=str(names[0].value), groups=(*groups, AUTHENTICATED_GROUP))


def _bearer_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


class Authenticator:
    """Who a request comes from, or None (401): certificate, token review, anonymous."""

    def __init__(
        self,
        options: KubeletAuthOptions,
        client: ApiClient,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._options = options
        self._client = client
        self._tokens: _TtlCache[str, User | None] = _TtlCache(clock)
        ca = options.client_ca_file
        self._authorities = load_authorities(ca) if ca is not None else ()

    async def authenticate(self, request: web.Request) -> User | None:
        """The user, or None for a 401: a certificate that does not verify or a token the
        apiserver does not know is never taken for anonymous."""
        refused: Untrusted | None = None
        if self._authorities:
            try:
                user = _certificate_user(request, self._authorities)
            except Untrusted as exc:
                refused = exc
            else:
                if user is not None:
                    return user
        token = _bearer_token(request)
        if token is not None and self._options.token_webhook:
            return await self._review_token(token)
        if refused is not None:
            log.info("Unable to authenticate the request: %s", refused)
            return None
        return ANONYMOUS if self._options.anonymous else None

    async def _review_token(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._tokens.get(key)
        if cached is not None:
            return cached.value
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        answer = await _create(self._client, "authentication.k8s.io", "TokenReview", review)
        status = answer.get("status") or {}
        user: User | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            user = User(
                name=str(info.get("username") or ""),
                uid=str(info.get("uid") or ""),
                groups=tuple(str(g) for g in info.get("groups") or ()),
                extra={
                    str(k): tuple(str(v) for v in vs) for k, vs in (info.get("extra") or {}).items()
                },
            )
        else:
            log.info(
                "a bearer token the apiserver does not know: %s",
                status.get("error") or "not authenticated",
            )
        self._tokens.put(key, user, ttl=self._options.token_cache_ttl)
        return user


class Authorizer:
    """Whether one attribute set is allowed: always, or as the apiserver's review says."""

    def __init__(
        self,
        options: KubeletAuthOptions,
        client: ApiClient,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._options = options
        self._client = client
        self._decisions: _TtlCache[str, bool] = _TtlCache(clock)

    async def allowed(self, attributes: Attributes) -> bool:
        if self._options.authorization_mode == "AlwaysAllow":
            return True
        review = attributes.review()
        key = json.dumps(review["spec"], sort_keys=True)
        cached = self._decisions.get(key)
        if cached is not None:
            return cached.value
        answer = await _create(self._client, "authorization.k8s.io", "SubjectAccessReview", review)
        status = answer.get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        ttl = self._options.authorized_ttl if allowed else self._options.unauthorized_ttl
        self._decisions.put(key, allowed, ttl=ttl)
        return allowed


async def _create(
    client: ApiClient, group: str, kind: str, review: dict[str, Any]
) -> dict[str, Any]:
    try:
        answer = await client.create(REGISTRY.require(group, kind), review)
    except (StatusError, OSError) as exc:
        raise ReviewFailed(f"{kind}: {exc}") from exc
    if not isinstance(answer, dict):
        raise ReviewFailed(f"{kind}: unexpected answer {str(answer)[:200]!r}")
    return answer


NodeOf = Callable[[web.Request], str]
"""The name of the node a request is about (the kubelet's own, or the pod's under sim)."""


def authenticate_and_authorize(
    authenticator: Authenticator, authorizer: Authorizer, *, node_of: NodeOf
) -> Middleware:
    """The middleware that lets a request in only once it is authenticated and authorized."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            user = await authenticator.authenticate(request)
        except ReviewFailed as exc:
            log.error("Unable to authenticate the request due to an error: %s", exc)
            user = None
        if user is None:
            log.info("Unauthorized: %s %s from %s", request.method, request.path, request.remote)
            return web.Response(status=401, text="Unauthorized")
        attrs = request_attributes(
            user, method=request.method, path=request.path, node=node_of(request)
        )
        for candidate in attrs:
            try:
                if await authorizer.allowed(candidate):
                    return await handler(request)
            except ReviewFailed as exc:
                message = _describe("Authorization error", candidate, candidate.subresource)
                log.error("%s: %s", message, exc)
                return web.Response(status=500, text=message)
        subresources = "[" + " ".join(a.subresource for a in attrs) + "]"
        message = _describe("Forbidden", attrs[0], subresources, plural=True)
        log.info("%s %s: %s", request.method, request.path, message)
        return web.Response(status=403, text=message + "\n")

    return middleware


def _describe(what: str, attrs: Attributes, subresource: str, *, plural: bool = False) -> str:
    label = "subresource(s)" if plural else "subresource"
    return (
        f"{what} (user={attrs.user.name}, verb={attrs.verb}, resource=nodes, {label}={subresource})"
    )


def make_auth(
    options: KubeletAuthOptions, client: ApiClient, *, node_of: NodeOf
) -> Sequence[Middleware]:
    """The middlewares the kubelet server runs: none over plain HTTP, else the auth filter."""
    if not options.serves_tls:
        return ()
    return (
        authenticate_and_authorize(
            Authenticator(options, client), Authorizer(options, client), node_of=node_of
        ),
    )
