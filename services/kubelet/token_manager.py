"""The kubelet's service-account tokens: requested for a pod, cached, renewed before they expire.

Why: a projected volume's ``serviceAccountToken`` source is not data the kubelet can read from
an object; it asks the apiserver for a token bound to the pod (``POST
.../serviceaccounts/<account>/token``, the TokenRequest API) and writes that. Tokens expire, so
the kubelet's token manager (``pkg/kubelet/token/token_manager.go``) keeps each one and asks
for a new one in time. This is that manager:

* ``token(pod, projection)``: the cached token, or a new one — a TokenRequest with the
  projection's ``audience`` (none: the apiserver's own), its ``expirationSeconds`` (default
  3600) and ``boundObjectRef`` naming the pod (kind, name, uid), so the token dies with it;
* a token is renewed once it is past 80% of its lifetime or older than 24 hours, minus a random
  jitter of up to 10 s (``requiresRefresh``); ``renew_in(uid)`` says when the earliest of a
  pod's tokens is due, so the pod's sync can be woken then to write the new one;
* a renewal that fails keeps the old token while it is valid (and logs why); without one the
  error is Kubernetes' ("failed to fetch token: ...", "token ... expired and refresh failed:
  ..."), which the volume reports as FailedMount;
* ``forget(uid)``: the pod is gone, its tokens are dropped.

Time is the wall clock (token expiry is a wall-clock instant), injectable for tests.

What it does not guarantee: tokens live in memory only — a restarted kubelet asks again; one
pod worker asks for its pod's tokens, so there is no locking between callers.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from api.errors import StatusError
from api.meta import parse_time
from api.registry import REGISTRY
from client.paths import resource_path
from client.rest import ApiClient
from services.kubelet.volume_sources import VolumeError

__all__ = ["DEFAULT_EXPIRATION", "TokenError", "TokenManager"]

log = logging.getLogger("kubelet.tokens")

DEFAULT_EXPIRATION = 3600
"""``expirationSeconds`` of a projection that does not say (the API's default)."""
REFRESH_FRACTION = 0.2
"""Renew once less than this fraction of the lifetime is left (the kubelet's 80% rule)."""
MAX_TTL = 24 * 3600.0
"""Renew a token older than this whatever its lifetime (``maxTTL``)."""
MAX_JITTER = 10.0
"""Up to this many seconds earlier, so a node's tokens are not all renewed at once."""

_SERVICE_ACCOUNTS = REGISTRY.require("", "ServiceAccount")
_REQUEST_ERRORS = (StatusError, aiohttp.ClientError, OSError, TimeoutError, KeyError, ValueError)
"""A TokenRequest refused, not answered, or answered without a token and its expiry."""


class TokenError(VolumeError):
    """No usable token; ``str()`` is the kubelet's message, the FailedMount cause."""


@dataclass(frozen=True, slots=True)
class _Key:
    uid: str
    account: str
    audience: str
    expiration: int

    def __str__(self) -> str:  # the kubelet's cache key, in its messages
        return f'"{self.account}"/"{self.uid}"/[{self.audience}]/{self.expiration}'


@dataclass(frozen=True, slots=True)
class _Issued:
    token: str
    expires: float
    """Wall-clock seconds at which the apiserver stops accepting it."""
    refresh_at: float


class TokenManager:
    """One node's tokens (``TokenManager(client)``)."""

    def __init__(
        self,
        client: ApiClient,
        *,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = lambda: random.uniform(0.0, MAX_JITTER),
    ) -> None:
        self._client = client
        self._clock = clock
        self._jitter = jitter
        self._tokens: dict[_Key, _Issued] = {}

    async def token(self, pod: Mapping[str, Any], projection: Mapping[str, Any]) -> str:
        """A valid token for ``projection`` (a ``serviceAccountToken`` source) of ``pod``."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        expiration = projection.get("expirationSeconds")
        key = _Key(
            uid=str(meta.get("uid") or ""),
            account=str(spec.get("serviceAccountName") or "default"),
            audience=str(projection.get("audience") or ""),
            expiration=DEFAULT_EXPIRATION if expiration is None else int(expiration),
        )
        cached = self._tokens.get(key)
        now = self._clock()
        if cached is not None and now < cached.refresh_at:
            return cached.token
        try:
            issued = await self._request(meta, key)
        except _REQUEST_ERRORS as exc:
            if cached is None:
                raise TokenError(f"failed to fetch token: {exc}") from None
            if now >= cached.expires:
                raise TokenError(f"token {key} expired and refresh failed: {exc}") from None
            log.warning("could not renew token %s (%s); keeping the current one", key, exc)
            return cached.token
        self._tokens[key] = issued
        return issued.token

    def renew_in(self, uid: str) -> float | None:
        """Seconds until the earliest of the pod's tokens is due for renewal, if it has any."""
        due = [issued.refresh_at for key, issued in self._tokens.items() if key.uid == uid]
        return max(0.0, min(due) - self._clock()) if due else None

    def forget(self, uid: str) -> None:
        """The pod is gone: drop its tokens."""
        for key in [key for key in self._tokens if key.uid == uid]:
            del self._tokens[key]

    async def _request(self, meta: Mapping[str, Any], key: _Key) -> _Issued:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [key.audience] if key.audience else [],
                "expirationSeconds": key.expiration,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta.get("name"),
                    "uid": key.uid,
                },
            },
        }
        path = resource_path(
            _SERVICE_ACCOUNTS,
            namespace=str(meta.get("namespace") or "default"),
            name=key.account,
            subresource="token",
        )
        answer = await self._client.request("POST", path, body=body)
        status = answer["status"] if isinstance(answer, dict) else {}
        expires = parse_time(str(status["expirationTimestamp"])).timestamp()
        ttl = float(answer["spec"].get("expirationSeconds") or key.expiration)
        issued_at = expires - ttl
        refresh = min(expires - ttl * REFRESH_FRACTION, issued_at + MAX_TTL) - self._jitter()
        return _Issued(token=str(status["token"]), expires=expires, refresh_at=refresh)
