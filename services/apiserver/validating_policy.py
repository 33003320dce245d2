"""ValidatingAdmissionPolicy: refusals written as CEL expressions, evaluated in the apiserver.

Why: a webhook is a server to run, secure and keep up; most validation rules are one line
("replicas <= params.maxReplicas"). Kubernetes' ValidatingAdmissionPolicy plugin
(``staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating``) evaluates them in
process; this module does the same with ``celpy`` (cel-python, a pure-Python implementation of
the CEL spec), after the validating webhooks:

* a **binding** (``ValidatingAdmissionPolicyBinding``) names its policy; the write must match
  the policy's ``matchConstraints`` and the binding's ``matchResources`` (the same matcher as the
  webhooks: rules, exclusions, namespace and object selectors);
* **params**: a policy with ``paramKind`` gets, per binding, the object ``paramRef`` names (by
  ``name``, or every object its ``selector`` matches, each evaluated; in ``paramRef.namespace``
  or, for a namespaced kind, the request's namespace); none found is a refusal under
  ``parameterNotFoundAction: Deny`` and a pass under ``Allow``;
* each of ``validations`` is evaluated with ``object``, ``oldObject`` (null on create, and
  ``object`` null on delete), ``request`` (the AdmissionReview request's attributes) and
  ``params``; ``false`` fails with ``message``, else ``messageExpression``'s string, else
  ``failed expression: <expression>``, and ``reason`` (default ``Invalid``, 422; ``Forbidden``
  403, ``Unauthorized`` 401, ``RequestEntityTooLarge`` 413);
* a failure is acted on per the binding's ``validationActions``: ``Deny`` refuses with
  Kubernetes' ``ValidatingAdmissionPolicy 'p' with binding 'b' denied request: <message>``,
  ``Warn`` adds ``Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b':
  <message>`` as a ``Warning`` header, ``Audit`` logs it;
* an expression that does not compile or fails to evaluate is an error: ``failurePolicy: Fail``
  (the default) refuses with ``... denied request: expression '<e>' resulted in error: <why>``,
  ``Ignore`` skips that policy.

Limits: expressions are not type-checked when the policy is written (``status.typeChecking``
stays empty; a broken expression shows when it is evaluated); ``variables``,
``matchConditions``, ``auditAnnotations``, ``namespaceObject`` and ``authorizer`` are not
available; ``Audit`` writes a log line, not an audit-event annotation; CEL cost limits are not
enforced.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import celpy
from aiohttp import web
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.celtypes import BoolType
from celpy.evaluation import CELEvalError

from api.selectors import label_selector_from_dict
from services.apiserver.context import CONTEXT, ApiContext
from services.apiserver.webhooks import (
    Attributes,
    configurations,
    is_exempt,
    matches,
    namespace_labels,
    refusal,
    review_request,
    warn,
)

__all__ = ["validate"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

_REASON_CODES = {
    "Invalid": 422,
    "Forbidden": 403,
    "Unauthorized": 401,
    "RequestEntityTooLarge": 413,
}
"""The reasons a validation may give, and the HTTP code each refuses with."""

_ENVIRONMENT = celpy.Environment()

_EVERY_RESOURCE = [
    {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*", "*/*"]}
]
"""A binding's ``matchResources`` without ``resourceRules`` leaves the policy's own to decide."""


class ExpressionFailed(Exception):
    """An expression that did not compile, or did not evaluate to what it must."""


@functools.lru_cache(maxsize=1024)
def _program(expression: str) -> celpy.Runner:
    try:
        return _ENVIRONMENT.program(_ENVIRONMENT.compile(expression))
    except CELParseError as exc:
        raise ExpressionFailed(f"compilation failed: {exc}") from exc


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    try:
        result = _program(expression).evaluate(activation)
    except CELEvalError as exc:
        raise ExpressionFailed(str(exc.args[0] if exc.args else exc)) from exc
    if isinstance(result, CELEvalError):
        raise ExpressionFailed(str(result.args[0] if result.args else result))
    return result


@dataclass(frozen=True, slots=True)
class Failure:
    """One validation that did not hold."""

    message: str
    reason: str = "Invalid"


@dataclass(frozen=True, slots=True)
class Bound:
    """A binding and the policy it names."""

    policy: Obj
    binding: Obj

    @property
    def names(self) -> str:
        return (
            f"ValidatingAdmissionPolicy '{self.policy['metadata']['name']}' "
            f"with binding '{self.binding['metadata']['name']}'"
        )

    @property
    def spec(self) -> Obj:
        return self.policy.get("spec") or {}

    @property
    def binding_spec(self) -> Obj:
        return self.binding.get("spec") or {}


def _failures(bound: Bound, activation: dict[str, Any]) -> Iterator[Failure]:
    for rule in bound.spec.get("validations") or ():
        expression = str(rule.get("expression") or "")
        try:
            result = _evaluate(expression, activation)
        except ExpressionFailed as exc:
            raise ExpressionFailed(f"expression '{expression}' resulted in error: {exc}") from exc
        if not isinstance(result, BoolType):
            raise ExpressionFailed(f"expression '{expression}' resulted in a non-bool value")
        if result:
            continue
        yield Failure(
            message=_message(rule, expression, activation),
            reason=str(rule.get("reason") or "Invalid"),
        )


def _message(rule: Obj, expression: str, activation: dict[str, Any]) -> str:
    if rule.get("message"):
        return str(rule["message"])
    if rule.get("messageExpression"):
        try:
            text = _evaluate(str(rule["messageExpression"]), activation)
        except ExpressionFailed as exc:
            log.warning("messageExpression of a validation failed: %s", exc)
        else:
            if isinstance(text, str) and text.strip():
                return str(text)
    return f"failed expression: {expression}"


async def _params(ctx: ApiContext, bound: Bound, attrs: Attributes) -> list[Obj | None] | None:
    """The params each evaluation gets: ``[None]`` without a ``paramKind``; None when the
    binding's params are missing and ``parameterNotFoundAction`` is ``Allow``."""
    kind = bound.spec.get("paramKind")
    if not isinstance(kind, dict):
        return [None]
    ref = bound.binding_spec.get("paramRef") or {}
    rt = ctx.registry.by_api_version(str(kind.get("apiVersion")), str(kind.get("kind")))
    found: list[Obj] = []
    if rt is not None:
        namespace = (ref.get("namespace") or attrs.namespace) if rt.namespaced else None
        if ref.get("name"):
            one = await ctx.storage(rt).get_or_none(namespace, str(ref["name"]))
            found = [one] if one is not None else []
        else:
            selector = label_selector_from_dict(ref.get("selector") or {})
            listed = (await ctx.storage(rt).list(namespace)).items
            found = [
                p
                for p in listed
                if selector.matches(((p.get("metadata") or {}).get("labels")) or {})
            ]
    if found:
        return list(found)
    if ref.get("parameterNotFoundAction") == "Allow":
        return None
    raise refusal(
        f"{bound.names} denied request: failed to configure binding: no params found for "
        "policy binding with `Deny` parameterNotFoundAction",
        code=403,
        reason="Forbidden",
    )


def _bindings(ctx: ApiContext) -> Iterator[Bound]:
    policies = {
        p["metadata"]["name"]: p for p in configurations(ctx, "validatingadmissionpolicies")
    }
    for binding in configurations(ctx, "validatingadmissionpolicybindings"):
        policy = policies.get((binding.get("spec") or {}).get("policyName"))
        if policy is not None:
            yield Bound(policy=policy, binding=binding)


def _act(request: web.Request, bound: Bound, failure: Failure) -> None:
    actions = bound.binding_spec.get("validationActions") or ()
    if "Deny" in actions:
        code = _REASON_CODES.get(failure.reason, 422)
        raise refusal(
            f"{bound.names} denied request: {failure.message}", code=code, reason=failure.reason
        )
    if "Warn" in actions:
        warn(request, [f"Validation failed for {bound.names}: {failure.message}"])
    if "Audit" in actions:
        log.info("audit: validation failed for %s: %s", bound.names, failure.message)


async def validate(
    request: web.Request, attrs: Attributes, obj: Obj | None, old: Obj | None
) -> None:
    """Evaluate every binding whose policy matches this write; act on each failure."""
    if is_exempt(attrs.rt):
        return
    ctx = request.app[CONTEXT]
    bindings = list(_bindings(ctx))
    if not bindings:
        return
    labels = await namespace_labels(ctx, attrs, obj, old)
    review = review_request(attrs, None, None)
    for bound in bindings:
        constraints = bound.spec.get("matchConstraints") or {}
        if not matches(constraints, attrs, namespace_labels=labels, obj=obj, old=old):
            continue
        resources = bound.binding_spec.get("matchResources")
        if resources and not matches(
            {"resourceRules": _EVERY_RESOURCE, **resources},
            attrs,
            namespace_labels=labels,
            obj=obj,
            old=old,
        ):
            continue
        await _check(
            request, ctx, bound, attrs, {"object": obj, "oldObject": old, "request": review}
        )


async def _check(
    request: web.Request, ctx: ApiContext, bound: Bound, attrs: Attributes, variables: Obj
) -> None:
    for params in await _params(ctx, bound, attrs) or ():
        activation = {
            name: json_to_cel(value) for name, value in {**variables, "params": params}.items()
        }
        try:
            failures = list(_failures(bound, activation))
        except ExpressionFailed as exc:
            if bound.spec.get("failurePolicy") == "Ignore":
                log.warning("%s: %s; ignored (failurePolicy Ignore)", bound.names, exc)
                continue
            raise refusal(
                f"{bound.names} denied request: {exc}", code=422, reason="Invalid"
            ) from exc
        for failure in failures:
            _act(request, bound, failure)
