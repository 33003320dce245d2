"""``POST .../serviceaccounts/{name}/token``: the TokenRequest API.

Why: a workload proves who it is with a service-account token that names an audience, expires,
and dies with the pod (or Secret) it is bound to; Kubernetes issues those through this
subresource (``kubectl create token``, the kubelet's projected volumes). The token itself is
built and signed by ``service_account_tokens``; the authenticator checks it.

What it does, as Kubernetes' ``TokenREST.Create``:

* reads an ``authentication.k8s.io/v1`` TokenRequest: ``spec.audiences`` (empty: the API's),
  ``spec.expirationSeconds`` (default 3600; at least 600 and at most 2^32, else 422 ``Invalid``
  with Kubernetes' messages), ``spec.boundObjectRef`` (a Pod or a Secret in the account's
  namespace; another kind is 400, a uid that is not the object's 409, a missing object 404);
* answers 201 with the request, its ``metadata`` the account's name and namespace and its
  ``status``: ``token`` and ``expirationTimestamp``.

Not here: the extended one-year kubelet tokens (``warnafter``), Node-bound tokens,
``--service-account-max-token-expiration``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from api.errors import BadRequest, Conflict, Invalid, ServiceUnavailable
from api.meta import format_time
from services.apiserver.codec import json_response, read_object
from services.apiserver.context import ApiContext
from services.apiserver.node_restriction import CREATE, Write, admit
from services.apiserver.service_account_tokens import claims_for

if TYPE_CHECKING:  # rest.py dispatches here through subresources, one way only
    from services.apiserver.rest import Target

__all__ = ["create_token"]

DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32
BINDABLE = {"Pod": "pods", "Secret": "secrets"}

Obj = dict[str, Any]


def _invalid(name: str, value: Any, message: str) -> Invalid:
    cause = {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {value}: {message}",
        "field": "spec.expirationSeconds",
    }
    return Invalid.of("TokenRequest", name, [cause], group="authentication.k8s.io")


def _expiration(name: str, spec: Obj) -> int:
    value = spec.get("expirationSeconds")
    if value is None:
        return DEFAULT_EXPIRATION
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(f"spec.expirationSeconds: expected an integer, got {value!r}")
    if value < MIN_EXPIRATION:
        raise _invalid(name, value, "may not specify a duration less than 10 minutes")
    if value > MAX_EXPIRATION:
        raise _invalid(name, value, "may not specify a duration larger than 2^32 seconds")
    return value


async def _bound_object(ctx: ApiContext, namespace: str, ref: Obj) -> tuple[str, Obj]:
    kind = str(ref.get("kind") or "")
    api_version = str(ref.get("apiVersion") or "v1")
    plural = BINDABLE.get(kind)
    if plural is None or api_version != "v1":
        raise BadRequest(f"cannot bind token to object of type {api_version}, Kind={kind}")
    obj = await ctx.storage(ctx.resource("", plural)).get(namespace, str(ref.get("name") or ""))
    uid = str(ref.get("uid") or "")
    if uid and uid != obj["metadata"].get("uid"):
        raise Conflict(
            f"the UID in the bound object reference ({uid}) does not match the UID in record. "
            "The object might have been deleted and then recreated"
        )
    return kind.lower(), obj


async def create_token(request: web.Request, ctx: ApiContext, target: Target) -> web.Response:
    keys = ctx.token_keys
    if keys is None or keys.signing_key is None:
        raise ServiceUnavailable(
            "the TokenRequest API needs --service-account-signing-key-file on the apiserver"
        )
    name, namespace = str(target.name), str(target.namespace)
    body = await read_object(request)
    if body.get("kind") not in (None, "TokenRequest"):
        raise BadRequest(
            f"the object provided is unrecognized (must be of type TokenRequest): {body['kind']}"
        )
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    expiration = _expiration(name, spec)
    account = await ctx.storage(ctx.resource("", "serviceaccounts")).get(namespace, name)
    ref = spec.get("boundObjectRef")
    bound = await _bound_object(ctx, namespace, ref) if isinstance(ref, dict) else None
    write = Write(target.rt, CREATE, namespace, name, subresource="token")
    pod = bound[1] if bound is not None and bound[0] == "pod" else None
    admit(request, write, obj=ref if isinstance(ref, dict) else None, old=pod)
    audiences = [str(a) for a in spec.get("audiences") or []] or list(keys.audiences)
    claims = claims_for(
        keys,
        namespace=namespace,
        service_account=account,
        audiences=audiences,
        now=ctx.clock(),
        expiration_seconds=expiration,
        bound=bound,
    )
    expires = datetime.fromtimestamp(claims["exp"], UTC)
    answer = {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": format_time(datetime.fromtimestamp(claims["iat"], UTC)),
        },
        "spec": {**spec, "audiences": audiences, "expirationSeconds": expiration},
        "status": {"token": keys.sign(claims), "expirationTimestamp": format_time(expires)},
    }
    return json_response(answer, status=201)
