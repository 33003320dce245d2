"""Authentication on the secure port: who a request comes from, or 401.

Why: Kubernetes' apiserver answers a request only once it knows its user; authorization
(``identity.Authorizer``), admission and the audit log all start from that user. This module
decides it, for requests arriving over TLS on ``--secure-port``; a request on the loopback
plain-HTTP port is ``identity.INSECURE_SUPERUSER``, as Kubernetes' insecure port was.

What it owns, in the order Kubernetes' union authenticator asks them:

* **x509 client certificates**: the handshake takes any certificate (``serving``); here it must
  verify against ``--client-ca-file`` as Go's ``x509.Verify`` does for kube-apiserver
  (``component.client_certificates``: signed by a CA of the file, within its validity, for
  client authentication) and have a CN; the user is its CN, the groups its O values. One that
  does not is a wrong credential like a wrong token: 401, unless a bearer token authenticates
  the request (Kubernetes' union authenticator takes the first authenticator that succeeds);
* **static tokens** (``--token-auth-file``): a CSV of ``token,user,uid[,"group1,group2"]``,
  read once at start;
* **service-account tokens**: JWTs ``service_account_tokens`` verifies, then the service
  account must still exist with the token's uid, and the pod or Secret the token is bound to
  too (a token outlives neither); the user is ``system:serviceaccount:<ns>:<name>`` in
  ``system:serviceaccounts`` and ``system:serviceaccounts:<ns>``, with the pod's name and uid
  in ``extra`` as Kubernetes puts them;
* **anonymous** (``--anonymous-auth``, default on): a request with no credentials at all is
  ``system:anonymous`` in ``system:unauthenticated``; authorization then decides. Off, it is 401.

Credentials that are present but wrong (an unknown token, a token past its expiry or whose pod
is gone, a client certificate that does not verify) are 401 ``Unauthorized`` — never a fall
back to anonymous. Every authenticated user
also gets ``system:authenticated``. The reason a credential was refused is logged, never sent
with the 401.

``Authentication.review_token`` answers the TokenReview API with the same token authenticators:
the user, the audiences the token is good for (Kubernetes' intersection of the asked audiences —
default the API's — with the token's; a static token is good for the API's audiences only), or
``InvalidCredentials`` worded as Kubernetes' ``status.error``: ``invalid bearer token`` for a
token no authenticator knows, ``[invalid bearer token, <why>]`` for a service-account token of
ours that no longer checks out (``service account token has expired``, ``service account token
has been invalidated`` once its pod or Secret is gone, ...).

Not here: OIDC, webhook token authentication, the request-header (front proxy) authenticator,
bootstrap tokens.
"""

from __future__ import annotations

import csv
import datetime
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from cryptography import x509
from cryptography.x509.oid import NameOID

from api.errors import Unauthorized
from component.client_certificates import (
    UntrustedCertificate,
    peer_certificate,
    verify_client_certificate,
)
from services.apiserver.context import CONTEXT, ApiContext
from services.apiserver.identity import (
    ANONYMOUS,
    AUTHENTICATED_GROUP,
    INSECURE_SUPERUSER,
    UNAUTHENTICATED_GROUP,
    UserInfo,
    set_request_user,
)
from services.apiserver.service_account_tokens import (
    InvalidToken,
    TokenKeys,
    service_account_username,
)

__all__ = [
    "AUTHENTICATION",
    "NOBODY",
    "Authentication",
    "InvalidCredentials",
    "ReviewedToken",
    "StaticTokens",
    "authenticate_requests",
    "is_secure",
]

log = logging.getLogger(__name__)

SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
CREDENTIAL_ID_EXTRA = "authentication.kubernetes.io/credential-id"
NOBODY = UserInfo(name="")
"""The user of a request refused with 401: no one (the audit log writes ``"user": {}``, as
Kubernetes' failed-authentication audit does) — never the insecure port's superuser."""
INVALID_BEARER_TOKEN = "invalid bearer token"
"""Kubernetes' bearer-token authenticator's error when no token authenticator knows a token."""


class InvalidCredentials(Exception):
    """Credentials were presented and are not valid; the message is for the log, and for a
    TokenReview's ``status.error`` (never for a 401's body)."""


@dataclass(frozen=True, slots=True)
class ReviewedToken:
    """What a bearer token stands for: its user and the audiences it is good for."""

    user: UserInfo
    audiences: tuple[str, ...]


def is_secure(request: web.Request) -> bool:
    """Did ``request`` arrive over TLS (the secure port)? (aiohttp read the connection's TLS
    context once, for ``scheme``; no code of ours clones a request with another scheme.)"""
    return request.scheme == "https"


@dataclass(frozen=True, slots=True)
class StaticTokens:
    """``--token-auth-file``: token -> user."""

    users: Mapping[str, UserInfo] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> StaticTokens:
        """Parse the CSV as Kubernetes does; ``ValueError`` for a line with too few columns."""
        users: dict[str, UserInfo] = {}
        with path.open(newline="") as lines:
            for number, record in enumerate(csv.reader(lines, skipinitialspace=True), 1):
                if not record or record[0].startswith("#"):
                    continue
                if len(record) < 3:
                    raise ValueError(
                        f"token file {path!r} must have at least 3 columns (token, user name, "
                        f"user uid), found {len(record)} on line {number}"
                    )
                token, name, uid = record[0], record[1], record[2]
                if not token:
                    log.warning("token file %s: line %d has an empty token; skipped", path, number)
                    continue
                if token in users:
                    log.warning("token file %s: line %d repeats a token; it wins", path, number)
                groups = tuple(g for g in record[3].split(",") if g) if len(record) > 3 else ()
                users[token] = UserInfo(name=name, uid=uid, groups=groups)
        return cls(users=users)


def _certificate_user(
    request: web.Request, authorities: Sequence[x509.Certificate], *, now: float
) -> UserInfo | None:
    """The user of the client certificate, if the client sent one; ``InvalidCredentials`` if
    it does not verify against ``authorities``."""
    der = peer_certificate(request.transport)
    if der is None:
        return None
    at = datetime.datetime.fromtimestamp(now, datetime.UTC)
    try:
        cert = verify_client_certificate(der, authorities, now=at)
    except UntrustedCertificate as exc:
        raise InvalidCredentials(f"client certificate: {exc}") from None
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names or not str(names[0].value):
        raise InvalidCredentials("the client certificate has no common name")
    groups = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return UserInfo(name=str(names[0].value), groups=tuple(str(g.value) for g in groups))


def _bearer_token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


@dataclass(frozen=True, slots=True)
class Authentication:
    """The secure port's authenticators (see the module docstring)."""

    client_authorities: tuple[x509.Certificate, ...] = ()
    """``--client-ca-file``'s certificates; none: client certificates authenticate nobody."""
    tokens: StaticTokens = field(default_factory=StaticTokens)
    service_accounts: TokenKeys | None = None
    anonymous: bool = True
    api_audiences: tuple[str, ...] = ()
    """The audiences a token is good for when a TokenReview names none (``--api-audiences``)."""

    async def authenticate(self, request: web.Request, ctx: ApiContext) -> UserInfo:
        """The user ``request`` comes from; ``InvalidCredentials`` for wrong credentials (a
        client certificate or a bearer token — the first that authenticates wins), and for
        none when anonymous requests are off."""
        refused: InvalidCredentials | None = None
        if self.client_authorities:
            try:
                user = _certificate_user(request, self.client_authorities, now=ctx.clock())
            except InvalidCredentials as exc:
                refused = exc
            else:
                if user is not None:
                    return _with_authenticated(user)
        token = _bearer_token(request)
        if token is not None:
            try:
                reviewed = await self.review_token(token, audiences=self.api_audiences, ctx=ctx)
            except InvalidCredentials as exc:
                raise InvalidCredentials(f"{refused}; {exc}" if refused else str(exc)) from None
            return reviewed.user
        if refused is not None:
            raise refused
        if not self.anonymous:
            raise InvalidCredentials("no credentials, and anonymous requests are off")
        return ANONYMOUS

    async def review_token(
        self, token: str, *, audiences: Sequence[str], ctx: ApiContext
    ) -> ReviewedToken:
        """Whom ``token`` stands for when presented to ``audiences`` (empty: the API's);
        ``InvalidCredentials`` worded as Kubernetes' TokenReview error otherwise."""
        wanted = tuple(audiences) or self.api_audiences
        user = self.tokens.users.get(token)
        if user is not None:
            common = _intersection(self.api_audiences, wanted)
            if self.api_audiences and not common:  # good for the API only
                raise InvalidCredentials(INVALID_BEARER_TOKEN)
            return ReviewedToken(_with_authenticated(user), common)
        if self.service_accounts is None or token.count(".") != 2:
            raise InvalidCredentials(INVALID_BEARER_TOKEN)
        keys = replace(self.service_accounts, audiences=wanted)
        try:
            claims = keys.decode(token, now=ctx.clock())
        except InvalidToken as exc:
            raise InvalidCredentials(_token_error(exc, token, wanted)) from None
        try:
            user = await _service_account_user(claims, ctx)
        except InvalidCredentials as exc:
            raise InvalidCredentials(f"[{INVALID_BEARER_TOKEN}, {exc}]") from None
        return ReviewedToken(_with_authenticated(user), _intersection(_claimed(claims), wanted))


def _intersection(have: Sequence[str], wanted: Sequence[str]) -> tuple[str, ...]:
    return tuple(a for a in have if a in wanted)


def _claimed(claims: Mapping[str, Any]) -> tuple[str, ...]:
    aud = claims.get("aud")
    return (aud,) if isinstance(aud, str) else tuple(str(a) for a in aud or ())


def _token_error(exc: InvalidToken, token: str, wanted: Sequence[str]) -> str:
    """Kubernetes' words for a JWT that did not check out. One from another issuer or with a
    signature none of our keys makes is not a service-account token of ours at all."""
    if isinstance(exc, jwt.ExpiredSignatureError):
        why = "service account token has expired"
    elif isinstance(exc, jwt.ImmatureSignatureError):
        why = "service account token is not valid yet"
    elif isinstance(exc, jwt.InvalidAudienceError):
        # Only the message reads the unverified claims; the token is refused either way.
        unverified = jwt.decode(token, options={"verify_signature": False})
        why = (
            f"token audiences {_go_quoted(_claimed(unverified))} is invalid for the target "
            f"audiences {_go_quoted(wanted)}"
        )
    else:
        return INVALID_BEARER_TOKEN
    return f"[{INVALID_BEARER_TOKEN}, {why}]"


def _go_quoted(values: Sequence[str]) -> str:
    """A list of strings as Go's ``%q`` prints a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def _with_authenticated(user: UserInfo) -> UserInfo:
    if AUTHENTICATED_GROUP in user.groups or UNAUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(
        name=user.name, uid=user.uid, groups=(*user.groups, AUTHENTICATED_GROUP), extra=user.extra
    )


def _ref(claims: Mapping[str, Any], key: str) -> tuple[str, str] | None:
    value = claims.get(key)
    if not isinstance(value, dict):
        return None
    return str(value.get("name") or ""), str(value.get("uid") or "")


async def _still_there(ctx: ApiContext, plural: str, namespace: str, ref: tuple[str, str]) -> None:
    name, uid = ref
    obj = await ctx.storage(ctx.resource("", plural)).get_or_none(namespace, name)
    if obj is None:
        if plural == "serviceaccounts":
            raise InvalidCredentials(f'serviceaccounts "{name}" not found')
        raise InvalidCredentials("service account token has been invalidated")
    actual = obj["metadata"].get("uid", "")
    if uid and actual != uid:
        claim = {"serviceaccounts": "claim", "pods": "service account pod ref claim"}.get(
            plural, "service account secret ref claim"
        )
        what = {"serviceaccounts": "service account", "pods": "pod"}.get(plural, "secret")
        raise InvalidCredentials(f"{what} UID ({actual}) does not match {claim} ({uid})")


async def _service_account_user(claims: Mapping[str, Any], ctx: ApiContext) -> UserInfo:
    private = claims.get("kubernetes.io")
    if not isinstance(private, dict):
        raise InvalidCredentials("service-account token without kubernetes.io claims")
    namespace = str(private.get("namespace") or "")
    account = _ref(private, "serviceaccount")
    if not namespace or account is None or not account[0]:
        raise InvalidCredentials("service-account token without a namespace or account")
    if claims.get("sub") != service_account_username(namespace, account[0]):
        raise InvalidCredentials("service-account token whose subject is not its account")
    await _still_there(ctx, "serviceaccounts", namespace, account)
    extra: dict[str, tuple[str, ...]] = {}
    pod = _ref(private, "pod")
    if pod is not None:
        await _still_there(ctx, "pods", namespace, pod)
        extra = {POD_NAME_EXTRA: (pod[0],), POD_UID_EXTRA: (pod[1],)}
    secret = _ref(private, "secret")
    if secret is not None:
        await _still_there(ctx, "secrets", namespace, secret)
    if claims.get("jti"):
        extra[CREDENTIAL_ID_EXTRA] = (f"JTI={claims['jti']}",)
    return UserInfo(
        name=service_account_username(namespace, account[0]),
        uid=account[1],
        groups=(SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}"),
        extra=extra,
    )


AUTHENTICATION: web.AppKey[Authentication] = web.AppKey("authentication", Authentication)
"""The app's authenticators, for what asks them directly (the TokenReview API)."""


def authenticate_requests(authentication: Authentication) -> Middleware:
    """The middleware: every request gets its user (``identity.set_request_user``) or a 401."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not is_secure(request):
            set_request_user(request, INSECURE_SUPERUSER)
            return await handler(request)
        try:
            user = await authentication.authenticate(request, request.app[CONTEXT])
        except InvalidCredentials as exc:
            log.info("401 for %s %s: %s", request.method, request.path, exc)
            set_request_user(request, NOBODY)
            raise Unauthorized("Unauthorized") from None
        set_request_user(request, user)
        return await handler(request)

    return authenticate
