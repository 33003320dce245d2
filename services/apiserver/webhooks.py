"""Admission webhooks: the HTTPS endpoints named by Mutating- and ValidatingWebhookConfigurations.

Why: operators refuse or change objects with their own code (cert-manager, Kyverno, every
kubebuilder ``webhook/``). Kubernetes' ``MutatingAdmissionWebhook`` and
``ValidatingAdmissionWebhook`` plugins (``staging/src/k8s.io/apiserver/pkg/admission/plugin/
webhook``) POST an ``admission.k8s.io/v1`` ``AdmissionReview`` to each matching webhook and act
on its answer. This module does the same for every kind, built-in and custom:

* **Matching** (``matches``): ``rules`` (operations, apiGroups, apiVersions, resources with
  ``*``, ``pods/status``, ``*/status``, ``*/*``; scope ``Cluster``/``Namespaced``/``*``),
  ``namespaceSelector`` (a namespaced object's namespace labels; a Namespace's own labels;
  other cluster-scoped objects always match) and ``objectSelector`` (the object's or the old
  object's labels). The admission kinds themselves are exempt, as in Kubernetes, so a broken
  webhook can always be removed.
* **matchConditions** (CEL over ``object``, ``oldObject``, ``request`` and ``authorizer``;
  ``admission_cel``),
  evaluated just before each call: any ``false`` skips the webhook; one that fails to evaluate
  skips it under ``failurePolicy: Ignore`` and refuses the request under ``Fail`` with 403
  ``<resource> "<name>" is forbidden: expression '<e>' resulted in error: <why>``.
* **Calling** (``WebhookClient``): ``clientConfig.url``, or a ``service`` reference resolved
  through its EndpointSlices to a ready endpoint, which must be on loopback (kubelite's pods are
  loopback processes; a webhook address elsewhere would turn the apiserver into a proxy to the
  network). TLS is verified against ``caBundle`` (the system roots without one) with the server
  name ``<service>.<namespace>.svc`` for a service, and the call is bounded by
  ``timeoutSeconds``.
* **Mutating** webhooks run one after another in configuration-name then webhook order; a
  ``patchType: JSONPatch`` answer (base64) is applied to the object; a webhook with
  ``reinvocationPolicy: IfNeeded`` is called once more when a later webhook changed the object.
* **Validating** webhooks run in parallel; the first refusal in order is the answer.
* **DELETE** goes through both, as Kubernetes' ``AdmissionToValidateObjectDeleteFunc`` sends it:
  ``object`` null, ``oldObject`` the stored object; a mutating webhook may refuse it, and one
  that answers a non-empty patch fails it (500 ``admission webhook "x" attempted to modify the
  object, which is not supported for this operation``).
* **CONNECT** to ``pods/exec`` and ``pods/portforward`` goes through both with the request's
  ``PodExecOptions`` / ``PodPortForwardOptions`` as the object (``admission.admit_connect``);
  the connection is made with the options as the mutating webhooks left them.
* A refusal is Kubernetes' ``admission webhook "x" denied the request: <message>`` with the
  webhook's ``status.code`` (400 when it gave none or less) and ``status.reason``; a webhook
  that cannot be called, times out or answers nonsense refuses with 500 ``failed calling
  webhook`` under ``failurePolicy: Fail`` and is skipped under ``Ignore``. ``warnings`` become
  ``Warning`` headers (``ADMISSION_WARNINGS``); ``auditAnnotations`` become the request's audit
  annotations as ``<webhook name>/<key>``.

Limits: ``matchPolicy: Equivalent`` has nothing to convert (a built-in kind served at two
versions — autoscaling/v1 and v2 HorizontalPodAutoscaler — is admitted as its stored version,
v2, whichever was written, so a rule naming only v1 does not match; a custom kind's other
versions are not translated); a CONNECT to the
``proxy`` subresources does not call webhooks (kubelite serves no ``attach``); the mutation and
patch audit annotations Kubernetes adds are not written.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import functools
import ipaddress
import json
import logging
import ssl
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from api.errors import InternalError, StatusError
from api.patches import apply_json_patch
from api.registry import ResourceType
from api.selectors import label_selector_from_dict
from services.apiserver.admission_cel import activation, match
from services.apiserver.audit import annotate
from services.apiserver.authorization import AUTHORIZER
from services.apiserver.cel_authorizer import AuthorizerValue, authorizer_value
from services.apiserver.context import CONTEXT, ApiContext
from services.apiserver.forbidden import forbidden_resource
from services.apiserver.identity import RequestAttributes, UserInfo

__all__ = [
    "ADMISSION_WARNINGS",
    "WEBHOOK_CLIENT",
    "Attributes",
    "WebhookClient",
    "add_admission_warnings",
    "cel_authorizer",
    "configurations",
    "denial",
    "is_exempt",
    "matches",
    "mutate",
    "mutate_delete",
    "namespace_labels",
    "namespace_object",
    "refusal",
    "review_request",
    "validate",
    "warn",
    "webhook_client_lifetime",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

GROUP = "admissionregistration.k8s.io"
ADMISSION_KINDS = frozenset(
    {
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    }
)
"""``IsExemptAdmissionConfigurationResource``: never sent to webhooks (or policies)."""

ADMISSION_WARNINGS: web.RequestKey[list[str]] = web.RequestKey("admission_warnings", list)
"""Warnings webhooks and policies gave this request; sent as ``Warning`` headers."""

_OPTIONS_KIND = {
    "CREATE": "CreateOptions",
    "UPDATE": "UpdateOptions",
    "DELETE": "DeleteOptions",
    "CONNECT": "",
}


@dataclass(frozen=True, slots=True)
class Attributes:
    """What admission knows about one write (Kubernetes' ``admission.Attributes``)."""

    rt: ResourceType
    operation: str
    """``CREATE``, ``UPDATE``, ``DELETE`` or ``CONNECT``."""
    namespace: str | None
    name: str
    user: UserInfo
    subresource: str = ""
    dry_run: bool = False
    options: Obj = field(default_factory=dict)
    """The request's ``CreateOptions``/``UpdateOptions``/``DeleteOptions`` fields."""

    @property
    def resource(self) -> str:
        return f"{self.rt.plural}/{self.subresource}" if self.subresource else self.rt.plural


# -- matching --------------------------------------------------------------------------------


def is_exempt(rt: ResourceType) -> bool:
    return rt.group == GROUP and rt.plural in ADMISSION_KINDS


def _rule_matches(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """``rules.Matcher``: operation, group, version, resource/subresource and scope."""
    rt = attrs.rt
    operations = rule.get("operations") or ()
    if "*" not in operations and attrs.operation not in operations:
        return False
    groups = rule.get("apiGroups") or ()
    if "*" not in groups and rt.group not in groups:
        return False
    versions = rule.get("apiVersions") or ()
    if "*" not in versions and rt.version not in versions:
        return False
    scope = rule.get("scope") or "*"
    if (scope == "Cluster" and rt.namespaced) or (scope == "Namespaced" and not rt.namespaced):
        return False
    for entry in rule.get("resources") or ():
        resource, _, subresource = str(entry).partition("/")
        if resource in ("*", rt.plural) and subresource in ("*", attrs.subresource):
            return True
    return False


def _labels(obj: Obj | None) -> dict[str, str]:
    labels = ((obj or {}).get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    return label_selector_from_dict(selector or {}).matches(labels)


def matches(
    match: Mapping[str, Any],
    attrs: Attributes,
    *,
    namespace_labels: Mapping[str, str] | None,
    obj: Obj | None,
    old: Obj | None,
) -> bool:
    """Whether a webhook (or a policy's ``matchResources``, whose rules are ``resourceRules``
    less ``excludeResourceRules``) applies to this write."""
    rules = match.get("rules", match.get("resourceRules")) or ()
    if not any(_rule_matches(rule, attrs) for rule in rules):
        return False
    if any(_rule_matches(rule, attrs) for rule in match.get("excludeResourceRules") or ()):
        return False
    if namespace_labels is not None and not _selector_matches(
        match.get("namespaceSelector"), namespace_labels
    ):
        return False
    object_selector = match.get("objectSelector")
    return any(
        _selector_matches(object_selector, _labels(o)) for o in (obj, old) if o is not None
    ) or (obj is None and old is None)


async def namespace_labels(
    ctx: ApiContext, attrs: Attributes, obj: Obj | None, old: Obj | None
) -> dict[str, str] | None:
    """The labels a ``namespaceSelector`` is matched against; None when it does not apply
    (a cluster-scoped object other than a Namespace)."""
    rt = attrs.rt
    if rt.group == "" and rt.kind == "Namespace":
        return _labels(obj if obj is not None else old)
    if not rt.namespaced or attrs.namespace is None:
        return None
    return _labels(await namespace_object(ctx, attrs))


async def namespace_object(ctx: ApiContext, attrs: Attributes) -> Obj | None:
    """The Namespace a namespaced write happens in (a policy's ``namespaceObject``); None for a
    cluster-scoped one (a Namespace included, as in Kubernetes)."""
    if not attrs.rt.namespaced or attrs.namespace is None:
        return None
    return await ctx.cached_get(ctx.resource("", "namespaces"), None, attrs.namespace)


def configurations(ctx: ApiContext, kind: str) -> list[Obj]:
    """Every stored configuration of ``kind`` (a plural), in name order, from its watch cache."""
    return ctx.cached_objects(ctx.resource(GROUP, kind)) or []


# -- calling ---------------------------------------------------------------------------------


class CallFailed(Exception):
    """The webhook could not be asked, or its answer makes no sense (failurePolicy decides)."""


@dataclass(frozen=True, slots=True)
class Hook:
    """One webhook of one configuration, as admission runs it."""

    spec: Obj
    configuration: str

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def ignores_failure(self) -> bool:
        return self.spec.get("failurePolicy") == "Ignore"

    @property
    def timeout(self) -> float:
        return float(self.spec.get("timeoutSeconds") or 10)


class WebhookClient:
    """Posts AdmissionReviews: one connection pool, one TLS context per distinct caBundle."""

    def __init__(self, ctx: ApiContext) -> None:
        self._ctx = ctx
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def _tls(ca_bundle: str) -> ssl.SSLContext:
        if not ca_bundle:
            return ssl.create_default_context()
        try:
            pem = base64.b64decode(ca_bundle, validate=True).decode()
            return ssl.create_default_context(cadata=pem)
        except (binascii.Error, UnicodeDecodeError, ssl.SSLError) as exc:
            raise CallFailed(f"invalid caBundle: {exc}") from exc

    async def _service_url(self, service: Mapping[str, Any]) -> tuple[str, str]:
        """(``https://ip:port/path``, TLS server name) of a ready endpoint of ``service``."""
        namespace, name = str(service.get("namespace")), str(service.get("name"))
        port = int(service.get("port") or 443)
        svc_rt = self._ctx.resource("", "services")
        svc = await self._ctx.storage(svc_rt).get_or_none(namespace, name)
        if svc is None:
            raise CallFailed(f'service "{namespace}/{name}" not found')
        ports = [p for p in (svc.get("spec") or {}).get("ports") or () if p.get("port") == port]
        if not ports:
            raise CallFailed(f'service "{namespace}/{name}" has no port {port}')
        port_name = ports[0].get("name") or ""
        slice_rt = self._ctx.resource("discovery.k8s.io", "endpointslices")
        slices = (await self._ctx.storage(slice_rt).list(namespace)).items
        for piece in slices:
            if _labels(piece).get("kubernetes.io/service-name") != name:
                continue
            target = [p for p in piece.get("ports") or () if (p.get("name") or "") == port_name]
            for endpoint in piece.get("endpoints") or ():
                if (endpoint.get("conditions") or {}).get("ready") is False or not target:
                    continue
                for address in endpoint.get("addresses") or ():
                    if not ipaddress.ip_address(address).is_loopback:
                        raise CallFailed(
                            f"endpoint {address} of service {namespace}/{name} is not on "
                            "loopback; kubelite calls webhooks on loopback only"
                        )
                    host = f"[{address}]" if ":" in address else address
                    path = str(service.get("path") or "/")
                    url = f"https://{host}:{target[0]['port']}{path}"
                    return url, f"{name}.{namespace}.svc"
        raise CallFailed(f'no endpoints available for service "{name}"')

    async def call(self, hook: Hook, review: Obj) -> Obj:
        """The webhook's ``response`` to ``review`` (its uid checked)."""
        config = hook.spec.get("clientConfig") or {}
        if config.get("service"):
            url, server_name = await self._service_url(config["service"])
        else:
            url, server_name = str(config.get("url")), None
        if self._session is None:
            self._session = aiohttp.ClientSession()
        tls = self._tls(str(config.get("caBundle") or ""))
        try:
            async with self._session.post(
                url,
                data=json.dumps(review).encode(),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                ssl=tls,
                server_hostname=server_name,
                timeout=aiohttp.ClientTimeout(total=hook.timeout),
            ) as resp:
                if resp.status != 200:
                    raise CallFailed(f"expected response code 200, got {resp.status}")
                answer = json.loads(await resp.read())
        except TimeoutError as exc:
            raise CallFailed(
                f'Post "{url}": context deadline exceeded (timeout {hook.timeout:g}s)'
            ) from exc
        except (aiohttp.ClientError, ValueError) as exc:
            raise CallFailed(f'Post "{url}": {exc}') from exc
        response = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(response, dict):
            raise CallFailed("webhook response was absent")
        if response.get("uid") != review["request"]["uid"]:
            raise CallFailed(
                f"expected response.uid={review['request']['uid']!r}, got {response.get('uid')!r}"
            )
        return response


WEBHOOK_CLIENT: web.AppKey[WebhookClient] = web.AppKey("webhook_client", WebhookClient)


async def webhook_client_lifetime(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``: the client and its connections live as long as the app."""
    client = WebhookClient(app[CONTEXT])
    app[WEBHOOK_CLIENT] = client
    yield
    await client.close()


# -- reviews and answers ---------------------------------------------------------------------


def review_request(attrs: Attributes, obj: Obj | None, old: Obj | None) -> Obj:
    """The ``request`` of an AdmissionReview (and a policy's ``request`` variable)."""
    rt = attrs.rt
    kind = {"group": rt.group, "version": rt.version, "kind": _kind_of(rt, attrs)}
    resource = {"group": rt.group, "version": rt.version, "resource": rt.plural}
    request: Obj = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": attrs.name,
        "namespace": attrs.namespace or "",
        "operation": attrs.operation,
        "userInfo": _user_info(attrs.user),
        "object": obj,
        "oldObject": old,
        "dryRun": attrs.dry_run,
    }
    if attrs.subresource:
        request["subResource"] = request["requestSubResource"] = attrs.subresource
    options_kind = _OPTIONS_KIND.get(attrs.operation)
    if options_kind:
        request["options"] = {
            "apiVersion": "meta.k8s.io/v1",
            "kind": options_kind,
            **attrs.options,
        }
    return request


def _review(attrs: Attributes, obj: Obj | None, old: Obj | None) -> Obj:
    request = review_request(attrs, obj, old)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _kind_of(rt: ResourceType, attrs: Attributes) -> str:
    for sub in rt.subresources:
        if sub.name == attrs.subresource:
            return sub.kind
    return rt.kind


def _user_info(user: UserInfo) -> Obj:
    info: Obj = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {k: list(v) for k, v in user.extra.items()}
    return info


@functools.lru_cache(maxsize=32)
def _status_error_type(code: int, reason: str) -> type[StatusError]:
    return type("AdmissionDenied", (StatusError,), {"code": code, "reason": reason})


def refusal(message: str, *, code: int, reason: str) -> StatusError:
    """A ``StatusError`` with the code and reason a webhook or a policy chose."""
    return _status_error_type(code, reason)(message)


def denial(source: str, status: Mapping[str, Any] | None) -> StatusError:
    """``webhookerrors.ToStatusErr``: the refusal, worded and coded as Kubernetes does."""
    status = status or {}
    code = status.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    reason = str(status.get("reason") or "")
    denied_by = f"{source} denied the request"
    if status.get("message"):
        message = f"{denied_by}: {status['message']}"
    elif reason:
        message = f"{denied_by}: {reason}"
    else:
        message = f"{denied_by} without explanation"
    return refusal(message, code=code, reason=reason or "BadRequest")


def _call_failed(hook: Hook, exc: CallFailed) -> StatusError:
    return InternalError(
        f'Internal error occurred: failed calling webhook "{hook.name}": '
        f"failed to call webhook: {exc}"
    )


def _patched(hook: Hook, obj: Obj, response: Mapping[str, Any]) -> Obj:
    if response.get("patchType") not in (None, "JSONPatch"):
        raise CallFailed(f"unsupported patch type {response.get('patchType')!r}")
    try:
        ops = json.loads(base64.b64decode(str(response["patch"]), validate=True))
        result = apply_json_patch(copy.deepcopy(obj), ops)
    except (binascii.Error, ValueError, StatusError) as exc:
        raise CallFailed(f"the patch of webhook {hook.name!r} cannot be applied: {exc}") from exc
    if not isinstance(result, dict):
        raise CallFailed("the patch did not result in an object")
    return result


def _hooks(ctx: ApiContext, kind: str) -> list[Hook]:
    return [
        Hook(spec=spec, configuration=str(conf["metadata"]["name"]))
        for conf in configurations(ctx, kind)
        for spec in conf.get("webhooks") or ()
        if isinstance(spec, dict)
    ]


async def _applicable(
    ctx: ApiContext, kind: str, attrs: Attributes, obj: Obj | None, old: Obj | None
) -> list[Hook]:
    if is_exempt(attrs.rt):
        return []
    hooks = _hooks(ctx, kind)
    if not hooks:
        return []
    labels = await namespace_labels(ctx, attrs, obj, old)
    return [h for h in hooks if matches(h.spec, attrs, namespace_labels=labels, obj=obj, old=old)]


# -- entry points ----------------------------------------------------------------------------


def warn(request: web.Request, warnings: Iterable[Any]) -> None:
    """Send ``warnings`` to the client as ``Warning`` headers of this request's answer."""
    texts = [str(w) for w in warnings if w]
    if texts:
        request.setdefault(ADMISSION_WARNINGS, []).extend(texts)


def cel_authorizer(request: web.Request, attrs: Attributes) -> AuthorizerValue:
    """The ``authorizer`` variable of this write's admission expressions."""
    rt = attrs.rt
    asked = RequestAttributes(
        user=attrs.user,
        verb="",
        resource_request=True,
        api_group=rt.group,
        api_version=rt.version,
        resource=rt.plural,
        subresource=attrs.subresource,
        namespace=attrs.namespace or "",
        name=attrs.name,
    )
    return authorizer_value(user=attrs.user, chain=request.app[AUTHORIZER], request=asked)


def _conditions_hold(
    request: web.Request, hook: Hook, attrs: Attributes, obj: Obj | None, old: Obj | None
) -> bool:
    """Whether the webhook's ``matchConditions`` let it be called; a condition that fails to
    evaluate under ``failurePolicy: Fail`` refuses the request (403, as Kubernetes)."""
    conditions = hook.spec.get("matchConditions")
    if not conditions:
        return True
    bound = activation(
        obj=obj,
        old=old,
        request=review_request(attrs, obj, old),
        authorizer=cel_authorizer(request, attrs),
    )
    decided = match(conditions, bound, fail=not hook.ignores_failure)
    if decided.error is not None:
        log.warning("match conditions of webhook %s failed, failing closed", hook.name)
        raise forbidden_resource(attrs.rt.plural, attrs.rt.group, attrs.name, decided.error)
    return decided.matches


async def _ask(
    request: web.Request, hook: Hook, attrs: Attributes, obj: Obj | None, old: Obj | None
) -> Obj | None:
    """The webhook's response; None when it failed and its policy is ``Ignore``."""
    client = request.app[WEBHOOK_CLIENT]
    try:
        response = await client.call(hook, _review(attrs, obj, old))
    except CallFailed as exc:
        if hook.ignores_failure:
            log.warning(
                "webhook %s failed and is ignored (failurePolicy Ignore): %s", hook.name, exc
            )
            return None
        raise _call_failed(hook, exc) from exc
    annotations = response.get("auditAnnotations")
    for key, value in (annotations if isinstance(annotations, dict) else {}).items():
        annotate(request, f"{hook.name}/{key}", str(value))
    warn(request, response.get("warnings") or ())
    if not response.get("allowed"):
        raise denial(f'admission webhook "{hook.name}"', response.get("status"))
    return response


async def mutate(request: web.Request, attrs: Attributes, obj: Obj, old: Obj | None) -> Obj:
    """``obj`` as the matching mutating webhooks leave it (a new dict when one changed it)."""
    ctx = request.app[CONTEXT]
    hooks = await _applicable(ctx, "mutatingwebhookconfigurations", attrs, obj, old)
    changes = 0
    called: list[tuple[Hook, int]] = []
    """Each webhook called, with how many changes the object had had when it answered."""
    for hook in hooks:
        if not _conditions_hold(request, hook, attrs, obj, old):
            continue
        response = await _ask(request, hook, attrs, obj, old)
        if response is not None and response.get("patch"):
            patched = _apply(hook, obj, response)
            changes += patched != obj
            obj = patched
        called.append((hook, changes))
    # reinvocationPolicy IfNeeded: once more if a later webhook changed the object
    for hook, changes_seen in called:
        reinvoke = hook.spec.get("reinvocationPolicy") == "IfNeeded" and changes > changes_seen
        if reinvoke and _conditions_hold(request, hook, attrs, obj, old):
            response = await _ask(request, hook, attrs, obj, old)
            if response is not None and response.get("patch"):
                obj = _apply(hook, obj, response)
    return obj


async def mutate_delete(request: web.Request, attrs: Attributes, old: Obj) -> None:
    """A DELETE through the matching mutating webhooks, as Kubernetes sends it (``object``
    null, ``oldObject`` the stored object): they may refuse it, but one that answers a patch
    fails the request (there is no object to change)."""
    ctx = request.app[CONTEXT]
    for hook in await _applicable(ctx, "mutatingwebhookconfigurations", attrs, None, old):
        if not _conditions_hold(request, hook, attrs, None, old):
            continue
        response = await _ask(request, hook, attrs, None, old)
        if response is not None and _patch_ops(hook, response):
            raise InternalError(
                f'Internal error occurred: admission webhook "{hook.name}" attempted to modify '
                "the object, which is not supported for this operation"
            )


def _patch_ops(hook: Hook, response: Obj) -> list[Any]:
    """The JSONPatch operations of a webhook's answer (none without a patch); an undecodable
    patch is a failed call, which ``failurePolicy: Ignore`` skips."""
    if not response.get("patch"):
        return []
    try:
        ops = json.loads(base64.b64decode(str(response["patch"]), validate=True))
    except (binascii.Error, ValueError) as exc:
        failed = CallFailed(f"received undecodable patch in webhook response: {exc}")
        if hook.ignores_failure:
            log.warning(
                "webhook %s failed and is ignored (failurePolicy Ignore): %s", hook.name, failed
            )
            return []
        raise _call_failed(hook, failed) from exc
    return ops if isinstance(ops, list) else [ops]


def _apply(hook: Hook, obj: Obj, response: Obj) -> Obj:
    try:
        return _patched(hook, obj, response)
    except CallFailed as exc:
        raise _call_failed(hook, exc) from exc


async def validate(
    request: web.Request, attrs: Attributes, obj: Obj | None, old: Obj | None
) -> None:
    """Ask every matching validating webhook at once; raise the first refusal in order."""
    ctx = request.app[CONTEXT]
    hooks = await _applicable(ctx, "validatingwebhookconfigurations", attrs, obj, old)
    if not hooks:
        return
    called = [h for h in hooks if _conditions_hold(request, h, attrs, obj, old)]
    results = await asyncio.gather(
        *(_ask(request, h, attrs, obj, old) for h in called), return_exceptions=True
    )
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def add_admission_warnings(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: one ``Warning: 299 - "<text>"`` header per admission warning."""
    for text in dict.fromkeys(request.get(ADMISSION_WARNINGS) or ()):
        quoted = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{quoted}"')
