"""The REST client: every component's one way to call the apiserver.

Why: all components talk to the apiserver only through its Kubernetes REST API, so one client
does it right once — paths from the resource registry, ``Status`` bodies turned back into the
typed errors of ``api.errors`` (``NotFound``, ``Conflict``, ``AlreadyExists``, ``Expired``,
``Invalid``, ...), a client-side QPS/burst limit, retries where they are safe.

What it owns:

* one ``aiohttp.ClientSession`` (created on first use, closed by ``close()`` / ``async with``),
  no connection limit, since every watch holds a connection for minutes;
* verbs: ``get``, ``list``, ``create``, ``update``, ``update_status``, ``patch``, ``delete``,
  ``bind`` (pods/binding) and ``watch`` (a ``WatchStream``); plus ``request`` for anything else;
* **dicts by default.** Objects go in and come out as the JSON dicts on the wire. Pass
  ``model=Pod`` to get ``Pod.model_validate(body)`` instead; pydantic objects are accepted as
  input and dumped by alias without ``None`` fields;
* **retries**: an idempotent read (GET) that fails to connect, or gets 429/503, is retried
  (``read_retries`` times, jittered backoff, honouring ``Retry-After``). A write that got 429 is
  retried too (the server did not act on it); a write that lost its connection is *not* — its
  outcome is unknown, so ``ApiUnreachable`` is raised and the caller re-reads;
* ``ClientConfig.qps``: a token bucket every request (watches included) passes; off by default.

What it does not do: follow list pagination by itself (pass ``limit``/``continue_token``),
cache, or retry on Conflict (callers re-read and retry: every write is a compare-and-swap).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Literal, TypeVar, overload
from urllib.parse import quote

import aiohttp
from pydantic import BaseModel

from api.errors import StatusError, from_status
from api.registry import ResourceType
from client.backoff import Backoff, BackoffPolicy
from client.kubeconfig import ClientConfig
from client.ratelimit import TokenBucket
from client.watch import WatchStream

__all__ = ["JSON", "ApiClient", "ApiUnreachable", "PatchType", "resource_path"]

JSON = dict[str, Any]
M = TypeVar("M", bound=BaseModel)
PatchType = Literal["merge", "json", "strategic"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
_READ_RETRY = BackoffPolicy(initial=0.2, factor=2.0, cap=5.0, jitter=0.5, reset_after=60.0)
_MAX_RETRY_AFTER = 30.0

log = logging.getLogger(__name__)


class ApiUnreachable(ConnectionError):
    """The request did not get an HTTP answer (refused, reset, timed out)."""


def resource_path(
    rt: ResourceType,
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """``/api/v1/namespaces/ns/pods/name/status``-style path of a collection or object."""
    path = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    if rt.namespaced and namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{rt.plural}"
    if name is not None:
        path += f"/{quote(name, safe='')}"
        if subresource:
            path += f"/{subresource}"
    return path


def _dump(obj: Mapping[str, Any] | BaseModel) -> JSON:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(obj)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _bool(value: bool) -> str:
    return "true" if value else "false"


class ApiClient:
    """``ApiClient(server="http://127.0.0.1:8080")`` or ``ApiClient.from_kubeconfig(path)``."""

    def __init__(
        self,
        config: ClientConfig | None = None,
        *,
        server: str | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        if config is None:
            config = ClientConfig(server=server) if server else ClientConfig()
        elif server is not None:
            config = config.with_options(server=server)
        self.config = config
        self.server = config.server.rstrip("/")
        self._session = session
        self._owns_session = session is None
        self._limiter = (
            TokenBucket(qps=config.qps, burst=config.burst) if config.qps is not None else None
        )
        headers = {"Accept": "application/json", "User-Agent": config.user_agent}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        self._headers = headers

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, *, context: str | None = None, **overrides: Any
    ) -> ApiClient:
        return cls(ClientConfig.load(kubeconfig=path, context=context, **overrides))

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, ssl=self.config.ssl_context() or True)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers)
            self._owns_session = True
        return self._session

    async def close(self) -> None:
        if self._session is not None and self._owns_session:
            await self._session.close()
        self._session = None

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the one request path -------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        idempotent: bool | None = None,
    ) -> Any:
        """Send one request; the decoded JSON (or text) answer, or a raised ``StatusError``."""
        idempotent = method == "GET" if idempotent is None else idempotent
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": content_type} if data is not None else None
        timeout = aiohttp.ClientTimeout(total=self.config.request_timeout)
        attempts = 1 + max(0, self.config.read_retries)
        backoff = Backoff(_READ_RETRY)
        for attempt in range(1, attempts + 1):
            if self._limiter is not None:
                await self._limiter.acquire()
            try:
                async with self.session.request(
                    method,
                    self.server + path,
                    params=params,
                    data=data,
                    headers=headers,
                    timeout=timeout,
                ) as resp:
                    payload = await resp.read()
                    if resp.status < 400:
                        return _decode(payload, resp.content_type)
                    error = _error_from(resp.status, payload, resp.content_type)
                    retry_after = _retry_after(resp, error)
            except (TimeoutError, aiohttp.ClientConnectionError) as exc:
                if not idempotent or attempt == attempts:
                    raise ApiUnreachable(f"{method} {path}: {exc or type(exc).__name__}") from exc
                delay = backoff.next_delay()
                log.info(
                    "%s %s failed (%s); will retry in %.1fs (attempt %d/%d)",
                    method,
                    path,
                    exc or type(exc).__name__,
                    delay,
                    attempt + 1,
                    attempts,
                )
                await asyncio.sleep(delay)
                continue
            retryable = error.code == 429 or (error.code == 503 and idempotent)
            if not retryable or attempt == attempts:
                raise error
            delay = retry_after if retry_after is not None else backoff.next_delay()
            log.info(
                "%s %s answered %d %s; will retry in %.1fs (attempt %d/%d)",
                method,
                path,
                error.code,
                error.reason,
                delay,
                attempt + 1,
                attempts,
            )
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- typed verbs ----------------------------------------------------------------------

    @overload
    async def get(
        self,
        rt: ResourceType,
        name: str,
        *,
        namespace: str | None = ...,
        subresource: str | None = ...,
        model: None = ...,
    ) -> JSON: ...
    @overload
    async def get(
        self,
        rt: ResourceType,
        name: str,
        *,
        namespace: str | None = ...,
        subresource: str | None = ...,
        model: type[M],
    ) -> M: ...
    async def get(
        self,
        rt: ResourceType,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        model: type[BaseModel] | None = None,
    ) -> Any:
        ns = self._namespace(rt, namespace)
        body = await self.request(
            "GET", resource_path(rt, namespace=ns, name=name, subresource=subresource)
        )
        return _typed(body, model)

    async def list(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> JSON:
        """The ``{Kind}List`` body; ``namespace=None`` lists across all namespaces."""
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if resource_version_match:
            params["resourceVersionMatch"] = resource_version_match
        if limit:
            params["limit"] = str(limit)
        if continue_token:
            params["continue"] = continue_token
        path = resource_path(rt, namespace=namespace if rt.namespaced else None)
        body = await self.request("GET", path, params=params)
        if not isinstance(body, dict):
            raise StatusError(f"list {rt.plural}: unexpected answer {str(body)[:200]!r}")
        body.setdefault("items", [])
        return body

    @overload
    async def create(
        self,
        rt: ResourceType,
        obj: Mapping[str, Any] | BaseModel,
        *,
        namespace: str | None = ...,
        model: None = ...,
    ) -> JSON: ...
    @overload
    async def create(
        self,
        rt: ResourceType,
        obj: Mapping[str, Any] | BaseModel,
        *,
        namespace: str | None = ...,
        model: type[M],
    ) -> M: ...
    async def create(
        self,
        rt: ResourceType,
        obj: Mapping[str, Any] | BaseModel,
        *,
        namespace: str | None = None,
        model: type[BaseModel] | None = None,
    ) -> Any:
        """POST ``obj``; namespace from the argument, else from ``obj.metadata.namespace``."""
        body = _dump(obj)
        body.setdefault("apiVersion", rt.api_version)
        body.setdefault("kind", rt.kind)
        ns = self._namespace(rt, namespace or _meta(body).get("namespace"))
        created = await self.request("POST", resource_path(rt, namespace=ns), body=body)
        return _typed(created, model)

    @overload
    async def update(
        self,
        rt: ResourceType,
        obj: Mapping[str, Any] | BaseModel,
        *,
        namespace: str | None = ...,
        subresource: str | None = ...,
        model: None = ...,
    ) -> JSON: ...
    @overload
    async def update(
        self,
        rt: ResourceType,
        obj: Mapping[str, Any] | BaseModel,
        *,
        namespace: str | None = ...,
        subresource: str | None = ...,
        model: type[M],
    ) -> M: ...
    async def update(
        self,
        rt: ResourceType,
        obj: Mapping[str, Any] | BaseModel,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        model: type[BaseModel] | None = None,
    ) -> Any:
        """PUT ``obj`` (a compare-and-swap on its ``metadata.resourceVersion``)."""
        body = _dump(obj)
        body.setdefault("apiVersion", rt.api_version)
        body.setdefault("kind", rt.kind)
        meta = _meta(body)
        name = meta.get("name")
        if not name:
            raise ValueError(f"update {rt.plural}: the object has no metadata.name")
        ns = self._namespace(rt, namespace or meta.get("namespace"))
        path = resource_path(rt, namespace=ns, name=str(name), subresource=subresource)
        return _typed(await self.request("PUT", path, body=body), model)

    async def update_status(
        self,
        rt: ResourceType,
        obj: Mapping[str, Any] | BaseModel,
        *,
        namespace: str | None = None,
    ) -> JSON:
        """PUT to the ``status`` subresource (only status changes are kept by the server)."""
        return await self.update(rt, obj, namespace=namespace, subresource="status")

    @overload
    async def patch(
        self,
        rt: ResourceType,
        name: str,
        patch: Any,
        *,
        namespace: str | None = ...,
        patch_type: PatchType = ...,
        subresource: str | None = ...,
        model: None = ...,
    ) -> JSON: ...
    @overload
    async def patch(
        self,
        rt: ResourceType,
        name: str,
        patch: Any,
        *,
        namespace: str | None = ...,
        patch_type: PatchType = ...,
        subresource: str | None = ...,
        model: type[M],
    ) -> M: ...
    async def patch(
        self,
        rt: ResourceType,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        model: type[BaseModel] | None = None,
    ) -> Any:
        """PATCH with a JSON merge patch (default), a JSON patch list, or a strategic merge."""
        ns = self._namespace(rt, namespace)
        path = resource_path(rt, namespace=ns, name=name, subresource=subresource)
        answer = await self.request(
            "PATCH", path, body=patch, content_type=_PATCH_CONTENT_TYPES[patch_type]
        )
        return _typed(answer, model)

    async def delete(
        self,
        rt: ResourceType,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: Literal["Orphan", "Background", "Foreground"] | None = None,
        preconditions: Mapping[str, str] | None = None,
    ) -> JSON:
        """DELETE; the answer is the object (graceful/finalized) or a ``Status``."""
        options: JSON = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        ns = self._namespace(rt, namespace)
        path = resource_path(rt, namespace=ns, name=name)
        answer = await self.request("DELETE", path, body=options)
        return answer if isinstance(answer, dict) else {}

    async def bind(self, *, namespace: str, pod: str, node: str, uid: str | None = None) -> JSON:
        """POST a ``Binding`` to ``pods/{pod}/binding``: the scheduler's one write."""
        meta: JSON = {"name": pod, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}/binding"
        answer = await self.request("POST", path, body=binding)
        return answer if isinstance(answer, dict) else {}

    def watch(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> WatchStream:
        """A watch from ``resource_version``; opened on ``async with`` / first iteration."""
        params: dict[str, str] = {"watch": "true", "allowWatchBookmarks": _bool(allow_bookmarks)}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(int(timeout_seconds))
        path = resource_path(rt, namespace=namespace if rt.namespaced else None)
        # The server ends the watch after timeoutSeconds; the client gives up a minute later,
        # so a half-open connection cannot hang a reflector forever.
        total = None if timeout_seconds is None else timeout_seconds + 60.0
        timeout = aiohttp.ClientTimeout(total=total, sock_connect=self.config.request_timeout)

        async def opener() -> aiohttp.ClientResponse:
            if self._limiter is not None:
                await self._limiter.acquire()
            try:
                resp = await self.session.get(self.server + path, params=params, timeout=timeout)
            except (TimeoutError, aiohttp.ClientConnectionError) as exc:
                raise ApiUnreachable(f"watch {path}: {exc or type(exc).__name__}") from exc
            if resp.status >= 400:
                try:
                    payload = await resp.read()
                except (TimeoutError, aiohttp.ClientError) as exc:
                    raise ApiUnreachable(f"watch {path}: {exc}") from exc
                finally:
                    resp.release()
                raise _error_from(resp.status, payload, resp.content_type)
            return resp

        return WatchStream(opener)

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def _namespace(rt: ResourceType, namespace: Any) -> str | None:
        if not rt.namespaced:
            return None
        if not namespace:
            raise ValueError(f"{rt.plural} are namespaced: pass namespace=")
        return str(namespace)


def _typed(body: Any, model: type[BaseModel] | None) -> Any:
    return body if model is None else model.model_validate(body)


def _decode(payload: bytes, content_type: str) -> Any:
    if not payload:
        return {}
    if "json" in content_type:
        return json.loads(payload)
    return payload.decode("utf-8", errors="replace")


def _error_from(code: int, payload: bytes, content_type: str) -> StatusError:
    body: Any = None
    if payload and "json" in content_type:
        try:
            body = json.loads(payload)
        except ValueError:
            body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return from_status(body, http_code=code)
    text = payload.decode("utf-8", errors="replace").strip()[:500]
    return from_status({"code": code, "message": text or f"HTTP {code}"}, http_code=code)


def _retry_after(resp: aiohttp.ClientResponse, error: StatusError) -> float | None:
    header = resp.headers.get("Retry-After")
    seconds: float | None = None
    if header:
        try:
            seconds = float(header)
        except ValueError:
            seconds = None
    if seconds is None and error.retry_after_seconds is not None:
        seconds = float(error.retry_after_seconds)
    return None if seconds is None else min(max(seconds, 0.0), _MAX_RETRY_AFTER)
