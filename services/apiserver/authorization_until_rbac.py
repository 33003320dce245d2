"""The secure port's authorization until RBAC lands: anonymous users see only public info.

Why: with authentication in place, an anonymous request on the secure port must not reach
the API; Kubernetes' default RBAC lets ``system:unauthenticated`` read only what the
``system:public-info-viewer`` ClusterRole grants (``/healthz``, ``/livez``, ``/readyz``,
``/version`` — discovery, ``system:discovery``, is for authenticated users since 1.14). This
module is that one rule and nothing more, in one place the RBAC authorizer replaces
(delete this module and its line in ``app.py``).

What it decides, for requests on the secure port only (the insecure port's superuser passes):

* an unauthenticated user: the public paths above (and their sub-paths) or 403 ``Forbidden``
  with Kubernetes' message for a non-resource request;
* any authenticated user: allowed — *every* verb on every resource, because there are no
  roles yet to say otherwise. That is why ``kubelite up`` keeps the components on the insecure
  port until RBAC is there.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from api.errors import Forbidden
from services.apiserver.authentication import is_secure
from services.apiserver.identity import UNAUTHENTICATED_GROUP, request_user

__all__ = ["PUBLIC_PATHS", "authorize_until_rbac"]

PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")
"""``system:public-info-viewer``'s nonResourceURLs (each also with ``/*`` below it)."""


def _public(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PUBLIC_PATHS)


@web.middleware
async def authorize_until_rbac(request: web.Request, handler: Handler) -> web.StreamResponse:
    user = request_user(request)
    if is_secure(request) and UNAUTHENTICATED_GROUP in user.groups and not _public(request.path):
        verb = request.method.lower()
        raise Forbidden(
            f'forbidden: User "{user.name}" cannot {verb} path "{request.path}"',
        )
    return await handler(request)
