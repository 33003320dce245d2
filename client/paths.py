"""REST paths of Kubernetes resources: ``resource_path``.

Why a module of its own: every verb of the client, and a few controllers that speak raw REST
(the namespace controller's discovery-driven deletes), build the same paths from the resource
registry; one function spells them.

What it owns: ``/api/v1/...`` for the core group, ``/apis/{group}/{version}/...`` otherwise;
``namespaces/{ns}`` only for namespaced kinds; names and namespaces percent-encoded.

What it does not guarantee: nothing is checked against the server's discovery; a namespace
given for a cluster-scoped kind is silently left out.
"""

from __future__ import annotations

from urllib.parse import quote

from api.registry import ResourceType

__all__ = ["resource_path"]


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
