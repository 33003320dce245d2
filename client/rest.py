"""The REST client: every component's one way to call the apiserver.

Why: all components talk to the apiserver only through its Kubernetes REST API, so one client
does it right once — paths from the resource registry (``paths.py``), ``Status`` bodies turned
back into the typed errors of ``api.errors`` (``NotFound``, ``Conflict``, ``AlreadyExists``,
``Expired``, ``Invalid``, ...; ``responses.py``), a client-side QPS/burst limit, retries where
they are safe (``transport.py``).

What it owns — the typed verbs:

* ``get``, ``list``, ``create``, ``update``, ``update_status``, ``patch``, ``delete``,
  ``bind`` (pods/binding) and ``watch`` (a ``WatchStream``); plus ``request`` for anything else;
* **dicts by default.** Objects go in and come out as the JSON dicts on the wire. Pass
  ``model=Pod`` to get ``Pod.model_validate(body)`` instead; pydantic objects are accepted as
  input and dumped by alias without ``None`` fields;
* ``async with``. The session, ``request``, ``close`` and the retry rules are inherited from
  ``Transport``: an idempotent read that fails to connect, or gets 429/503, is retried; a
  write that got 429 is retried; a write that lost its connection is *not* (``ApiUnreachable``:
  the caller re-reads).

What it does not do: follow list pagination by itself (pass ``limit``/``continue_token``),
cache, or retry on Conflict (callers re-read and retry: every write is a compare-and-swap).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Literal, TypeVar, overload
from urllib.parse import quote

import aiohttp
from pydantic import BaseModel

from api.errors import StatusError
from api.registry import ResourceType
from client.kubeconfig import ClientConfig
from client.paths import resource_path
from client.responses import ApiUnreachable
from client.transport import Transport
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


def _dump(obj: Mapping[str, Any] | BaseModel) -> JSON:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(obj)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _bool(value: bool) -> str:
    return "true" if value else "false"


class ApiClient(Transport):
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
        super().__init__(config, session=session)

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, *, context: str | None = None, **overrides: Any
    ) -> ApiClient:
        return cls(ClientConfig.load(kubeconfig=path, context=context, **overrides))

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

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
        opener = self.watch_opener(path, params=params, timeout_seconds=timeout_seconds)
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
