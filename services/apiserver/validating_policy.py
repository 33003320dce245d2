"""ValidatingAdmissionPolicy: refusals written as CEL expressions, evaluated in the apiserver.

Why: a webhook is a server to run, secure and keep up; most validation rules are one line
("replicas <= params.maxReplicas"). Kubernetes' ValidatingAdmissionPolicy plugin
(``staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating``) evaluates them in
process; this module does the same with ``celpy`` (cel-python, through ``admission_cel``), after
the validating webhooks:

* a **binding** (``ValidatingAdmissionPolicyBinding``) names its policy; the write must match
  the policy's ``matchConstraints`` and the binding's ``matchResources`` (the same matcher as the
  webhooks: rules, exclusions, namespace and object selectors);
* **params**: a policy with ``paramKind`` gets, per binding, the object ``paramRef`` names (by
  ``name``, or every object its ``selector`` matches, each evaluated; in ``paramRef.namespace``
  or, for a namespaced kind, the request's namespace; read from the kind's watch cache, as
  Kubernetes reads them from an informer); none found is a refusal under
  ``parameterNotFoundAction: Deny`` and a pass under ``Allow``;
* expressions see ``object``, ``oldObject`` (null on create, and ``object`` null on delete),
  ``request`` (the AdmissionReview request's attributes), ``params``, ``namespaceObject`` (the
  namespace of a namespaced write), ``authorizer`` (``cel_authorizer``: what the requester may
  do) and ``variables.<name>`` (``spec.variables``, composited in order);
* ``matchConditions``: any ``false`` skips the policy for that binding and params; one that
  fails to evaluate skips it under ``failurePolicy: Ignore`` and fails it under ``Fail``;
* each of ``validations``: ``false`` fails with ``message``, else ``messageExpression``'s
  string, else ``failed expression: <expression>``, and ``reason`` (default ``Invalid``, 422;
  ``Forbidden`` 403, ``Unauthorized`` 401, ``RequestEntityTooLarge`` 413); one that fails to
  evaluate (or does not compile) fails with ``expression '<e>' resulted in error: <why>``
  under ``Fail`` and passes under ``Ignore``;
* a failure is acted on per the binding's ``validationActions``: ``Deny`` refuses (the first
  denial, after every policy was evaluated) with Kubernetes'
  ``ValidatingAdmissionPolicy 'p' with binding 'b' denied request: <message>``, ``Warn`` adds
  ``Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': <message>`` as a
  ``Warning`` header, ``Audit`` adds the audit annotation
  ``validation.policy.admission.k8s.io/validation_failure`` (a JSON list of ``{message, policy,
  binding, expressionIndex, validationActions}``);
* ``auditAnnotations``: each ``valueExpression`` that yields a string becomes the audit
  annotation ``<policy>/<key>`` (distinct values of a policy's bindings joined by ``", "``, each
  cut at 10 KiB); null leaves it out; an error fails the policy under ``Fail``.

A policy whose expressions do not parse is refused when written (``admission_cel``'s
``configuration_problems``).

Limits: expressions are parsed, not type-checked, when the policy is written
(``status.typeChecking`` stays empty; a field the object lacks shows when evaluated); CEL cost
limits are not enforced.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from celpy.celtypes import BoolType

from api.registry import ResourceType
from api.selectors import label_selector_from_dict
from services.apiserver.admission_cel import (
    Activation,
    ExpressionFailed,
    activation,
    evaluate,
    match,
    with_params,
    with_variables,
)
from services.apiserver.audit import annotate
from services.apiserver.context import CONTEXT, ApiContext
from services.apiserver.predicate import Predicate
from services.apiserver.webhooks import (
    Attributes,
    cel_authorizer,
    configurations,
    is_exempt,
    matches,
    namespace_labels,
    namespace_object,
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

_EVERY_RESOURCE = [
    {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*", "*/*"]}
]
"""A binding's ``matchResources`` without ``resourceRules`` leaves the policy's own to decide."""

VALIDATION_FAILURE = "validation.policy.admission.k8s.io/validation_failure"
"""The audit annotation an ``Audit`` action writes."""

MAX_ANNOTATION_VALUE = 10 * 1024
"""Characters of an ``auditAnnotations`` value kept (Kubernetes' maxAuditAnnotationValueLength)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One validation that did not hold (or could not be evaluated under ``Fail``)."""

    message: str
    reason: str = "Invalid"
    index: int = 0
    """Which of the policy's validations (``expressionIndex`` of the Audit annotation)."""


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

    @property
    def fails_closed(self) -> bool:
        return self.spec.get("failurePolicy") != "Ignore"


@dataclass
class Outcome:
    """What evaluating every binding decided: denials in order, and audit annotations by
    policy name, then key, in order of their distinct values."""

    denials: list[tuple[Bound, Failure]] = field(default_factory=list)
    annotations: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def add_annotation(self, bound: Bound, key: str, value: str) -> None:
        values = self.annotations.setdefault(bound.policy["metadata"]["name"], {}).setdefault(
            key, []
        )
        if value not in values:
            values.append(value)


def _failures(bound: Bound, bound_vars: Activation) -> Iterator[Failure]:
    for index, rule in enumerate(bound.spec.get("validations") or ()):
        expression = str(rule.get("expression") or "")
        try:
            result = evaluate(expression, bound_vars)
            if not isinstance(result, BoolType):
                raise ExpressionFailed(f"expression '{expression}' resulted in a non-bool value")
        except ExpressionFailed as exc:
            if bound.fails_closed:
                yield Failure(message=str(exc), index=index)
            else:
                log.warning("%s: %s; ignored (failurePolicy Ignore)", bound.names, exc)
            continue
        if not result:
            yield Failure(
                message=_message(rule, expression, bound_vars),
                reason=str(rule.get("reason") or "Invalid"),
                index=index,
            )


def _message(rule: Obj, expression: str, bound_vars: Activation) -> str:
    if rule.get("message"):
        return str(rule["message"])
    if rule.get("messageExpression"):
        try:
            text = evaluate(str(rule["messageExpression"]), bound_vars)
        except ExpressionFailed as exc:
            log.warning("messageExpression of a validation failed: %s", exc)
        else:
            if isinstance(text, str) and text.strip():
                return str(text)
    return f"failed expression: {expression}"


def _audit_annotations(bound: Bound, bound_vars: Activation, outcome: Outcome) -> None:
    for annotation in bound.spec.get("auditAnnotations") or ():
        expression = str(annotation.get("valueExpression") or "")
        try:
            value = evaluate(expression, bound_vars)
            if value is not None and not isinstance(value, str):
                raise ExpressionFailed(
                    f"valueExpression '{expression}' resulted in unsupported return type"
                )
        except ExpressionFailed as exc:
            if bound.fails_closed:
                outcome.denials.append((bound, Failure(message=str(exc))))
            continue
        if value is not None:
            key = str(annotation.get("key") or "")
            outcome.add_annotation(bound, key, str(value)[:MAX_ANNOTATION_VALUE])


async def _params(ctx: ApiContext, bound: Bound, attrs: Attributes) -> Sequence[Obj | None] | None:
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
        found = await _param_objects(ctx, rt, namespace, ref)
    if found:
        return found
    if ref.get("parameterNotFoundAction") == "Allow":
        return None
    raise refusal(
        f"{bound.names} denied request: failed to configure binding: no params found for "
        "policy binding with `Deny` parameterNotFoundAction",
        code=403,
        reason="Forbidden",
    )


async def _param_objects(
    ctx: ApiContext, rt: ResourceType, namespace: str | None, ref: Obj
) -> list[Obj]:
    """The objects ``paramRef`` names (``name``, else every one its ``selector`` matches), read
    from ``rt``'s watch cache as Kubernetes reads them from an informer: the store only until
    the cache is ready, or for a named one the cache does not hold (yet)."""
    if ref.get("name"):
        one = await ctx.cached_get(rt, namespace, str(ref["name"]))
        return [one] if one is not None else []
    selector = label_selector_from_dict(ref.get("selector") or {})
    cache = ctx.cache(rt)
    if cache is not None and cache.ready.is_set():
        events, _ = cache.snapshot(Predicate(rt=rt, namespace=namespace, labels=selector))
        return [e.obj for e in events]
    listed = (await ctx.storage(rt).list(namespace)).items
    return [p for p in listed if selector.matches((p.get("metadata") or {}).get("labels") or {})]


def _bindings(ctx: ApiContext) -> Iterator[Bound]:
    policies = {
        p["metadata"]["name"]: p for p in configurations(ctx, "validatingadmissionpolicies")
    }
    for binding in configurations(ctx, "validatingadmissionpolicybindings"):
        policy = policies.get((binding.get("spec") or {}).get("policyName"))
        if policy is not None:
            yield Bound(policy=policy, binding=binding)


def _act(request: web.Request, bound: Bound, failure: Failure, outcome: Outcome) -> None:
    actions = list(bound.binding_spec.get("validationActions") or ())
    if "Deny" in actions:
        outcome.denials.append((bound, failure))
    if "Warn" in actions:
        warn(request, [f"Validation failed for {bound.names}: {failure.message}"])
    if "Audit" in actions:
        value = {
            "message": failure.message,
            "policy": bound.binding_spec.get("policyName"),
            "binding": bound.binding["metadata"]["name"],
            "expressionIndex": failure.index,
            "validationActions": actions,
        }
        annotate(request, VALIDATION_FAILURE, json.dumps([value], separators=(",", ":")))


async def validate(
    request: web.Request, attrs: Attributes, obj: Obj | None, old: Obj | None
) -> None:
    """Evaluate every binding whose policy matches this write; act on each failure; refuse
    with the first denial."""
    if is_exempt(attrs.rt):
        return
    ctx = request.app[CONTEXT]
    bindings = list(_bindings(ctx))
    if not bindings:
        return
    labels = await namespace_labels(ctx, attrs, obj, old)
    namespace = await namespace_object(ctx, attrs)
    common = activation(
        obj=obj,
        old=old,
        request=review_request(attrs, None, None),
        authorizer=cel_authorizer(request, attrs),
        namespaceObject=namespace,
    )
    outcome = Outcome()
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
        for params in await _params(ctx, bound, attrs) or ():
            bound_vars = with_params(common, params)
            _check(
                request,
                bound,
                with_variables(bound_vars, bound.spec.get("variables") or ()),
                outcome,
            )
    for policy, by_key in outcome.annotations.items():
        for key, values in by_key.items():
            annotate(request, f"{policy}/{key}", ", ".join(values))
    if outcome.denials:
        bound, failure = outcome.denials[0]
        code = _REASON_CODES.get(failure.reason, 422)
        raise refusal(
            f"{bound.names} denied request: {failure.message}", code=code, reason=failure.reason
        )


def _check(request: web.Request, bound: Bound, bound_vars: Activation, outcome: Outcome) -> None:
    """One binding with one set of params: its match conditions, validations and annotations."""
    conditions = bound.spec.get("matchConditions")
    if conditions:
        decided = match(conditions, bound_vars, fail=bound.fails_closed)
        if decided.error is not None:
            _act(request, bound, Failure(message=decided.error), outcome)
            return
        if not decided.matches:
            return
    for failure in _failures(bound, bound_vars):
        _act(request, bound, failure, outcome)
    _audit_annotations(bound, bound_vars, outcome)
