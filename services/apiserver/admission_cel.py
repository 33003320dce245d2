"""CEL in admission: what webhooks' ``matchConditions`` and ValidatingAdmissionPolicies evaluate.

Why: a webhook's ``matchConditions`` and a policy's ``matchConditions``, ``variables``,
``validations`` and ``auditAnnotations`` are CEL expressions over the same inputs. Kubernetes
evaluates them all through one filter (``staging/src/k8s.io/apiserver/pkg/admission/plugin/cel``
and ``webhook/matchconditions/matcher.go``); this module is kubelite's, with ``celpy``
(cel-python):

* ``activation``: the variables an expression sees — ``object``, ``oldObject`` (null on create;
  ``object`` null on delete), ``request`` (the AdmissionReview request's attributes),
  ``authorizer`` (``cel_authorizer``'s library), and for policies ``params``,
  ``namespaceObject`` and ``variables``;
* ``with_params``: a policy's ``params`` added to an activation built once per request;
* ``with_variables``: a policy's ``spec.variables`` composited in order under ``variables.<name>``,
  each seeing the ones before it; one that fails to evaluate fails only the expressions that
  use it (CEL's error values), as Kubernetes' lazily evaluated variables do;
* ``evaluate``: programs compiled once per text; a failure worded as Kubernetes words it,
  ``expression '<e>' resulted in error: <why>`` (``compilation error: <why>`` when it does not
  parse);
* ``match``: ``matchConditions`` as Kubernetes' matcher decides — any condition ``false`` means
  no match (whatever errors others had); otherwise an error under ``failurePolicy: Fail`` is an
  error (several joined as Kubernetes' aggregate prints them), and under ``Ignore`` no match;
* ``configuration_problems``: what Kubernetes' validation refuses in a webhook configuration or
  a policy when it is written — at most 64 ``matchConditions``, each with a qualified, unique
  ``name`` and an expression that compiles; a policy's variables, validations, message
  expressions and audit annotation values that do not compile (422 causes worded as
  Kubernetes', ``compilation failed: ERROR: <input>:1:8: Syntax error ...``).

Limits: expressions are
parsed, not type-checked, when written (a condition that yields a non-bool, or names a field
that is not there, is an error when evaluated); no cost budget; cel-python's evaluation error
texts (``<why>``) are not cel-go's.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.celtypes import BoolType, MapType, StringType
from celpy.evaluation import CELEvalError

from api.errors import Cause
from api.names import is_qualified_name
from api.validation import duplicate, invalid, required
from api.validation_rules import syntax_error
from services.apiserver.cel_authorizer import FUNCTIONS, AuthorizerValue

__all__ = [
    "ExpressionFailed",
    "Match",
    "activation",
    "configuration_problems",
    "evaluate",
    "match",
    "with_params",
    "with_variables",
]

Obj = dict[str, Any]
Activation = dict[str, Any]

_ENVIRONMENT = celpy.Environment()

MAX_MATCH_CONDITIONS = 64
"""Kubernetes' limit on a webhook's (or policy's) ``matchConditions``."""


class ExpressionFailed(Exception):
    """An expression that did not compile, or did not evaluate (the message is Kubernetes')."""


@functools.lru_cache(maxsize=1024)
def _compiled(expression: str) -> celpy.Runner | str:
    """The program of ``expression``, or why it does not compile: a failure is kept too, so a
    stored expression that does not parse is not parsed again by every request."""
    try:
        return _ENVIRONMENT.program(_ENVIRONMENT.compile(expression), functions=FUNCTIONS)
    except CELParseError as exc:
        return _compile_failure(expression, exc)


def _program(expression: str) -> celpy.Runner:
    compiled = _compiled(expression)
    if isinstance(compiled, str):
        raise ExpressionFailed(compiled)
    return compiled


def _compile_failure(expression: str, exc: CELParseError) -> str:
    return f"compilation failed: {syntax_error(expression, exc)}"


def _compile_problem(expression: str) -> str | None:
    """Why ``expression`` does not compile, as Kubernetes says it; None when it does."""
    try:
        _program(expression)
    except ExpressionFailed as exc:
        return str(exc)
    return None


def _raw(expression: str, bound: Activation) -> Any:
    """The value, or the ``CELEvalError`` it evaluated to (raised or returned by celpy)."""
    try:
        return _program(expression).evaluate(bound)
    except CELEvalError as exc:
        return exc


def _why(error: CELEvalError) -> str:
    return str(error.args[0] if error.args else error)


def evaluate(expression: str, bound: Activation) -> Any:
    """The value of ``expression``; ``ExpressionFailed`` when it does not compile or evaluate."""
    try:
        result = _raw(expression, bound)
    except ExpressionFailed as exc:
        raise ExpressionFailed(f"compilation error: {exc}") from exc
    if isinstance(result, CELEvalError):
        raise ExpressionFailed(f"expression '{expression}' resulted in error: {_why(result)}")
    return result


def activation(
    *,
    obj: Obj | None,
    old: Obj | None,
    request: Obj,
    authorizer: AuthorizerValue,
    **more: Obj | None,
) -> Activation:
    """The variables of an admission expression: ``object``, ``oldObject``, ``request``,
    ``authorizer`` and, by keyword, ``params`` and ``namespaceObject``."""
    plain: dict[str, Any] = {"object": obj, "oldObject": old, "request": request, **more}
    plain.setdefault("params", None)
    bound = {name: json_to_cel(value) for name, value in plain.items()}
    bound["authorizer"] = authorizer
    return bound


def with_params(bound: Activation, params: Obj | None) -> Activation:
    """``bound`` with ``params`` (one evaluation of a policy per params object; the rest of
    the activation, converted once per request, is shared)."""
    return {**bound, "params": json_to_cel(params)}


def with_variables(bound: Activation, variables: Iterable[Mapping[str, Any]]) -> Activation:
    """``bound`` plus ``variables``: each ``{name, expression}`` in order, under
    ``variables.<name>``; a failed one holds its error for the expressions that use it."""
    values = MapType({})
    out = {**bound, "variables": values}
    for variable in variables:
        expression = str(variable.get("expression") or "")
        try:
            value = _raw(expression, out)
        except ExpressionFailed as exc:
            value = CELEvalError(str(exc), ValueError, None)
        values[StringType(str(variable.get("name") or ""))] = value
    return out


@dataclass(frozen=True, slots=True)
class Match:
    """What ``matchConditions`` decided: whether the webhook or policy applies, or the error
    that refuses the request (``failurePolicy: Fail``)."""

    matches: bool
    error: str | None = None


def match(conditions: Iterable[Mapping[str, Any]], bound: Activation, *, fail: bool) -> Match:
    """``matcher.Match``: see the module docstring."""
    errors: list[str] = []
    for condition in conditions:
        expression = str(condition.get("expression") or "")
        try:
            result = evaluate(expression, bound)
        except ExpressionFailed as exc:
            errors.append(str(exc))
            continue
        if not isinstance(result, BoolType):
            errors.append(f"expression '{expression}' resulted in a non-bool value")
        elif not result:
            return Match(matches=False)
    if errors:
        if not fail:
            return Match(matches=False)
        return Match(
            matches=False, error=errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        )
    return Match(matches=True)


# -- checks when a configuration is written --------------------------------------------------


def configuration_problems(kind: str, obj: Obj) -> list[Cause]:
    """The expressions a webhook configuration or ValidatingAdmissionPolicy (``kind``) may not
    be written with (empty for other kinds)."""
    if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        causes: list[Cause] = []
        for i, hook in enumerate(_dicts(obj.get("webhooks"))):
            causes += _match_condition_problems(
                hook.get("matchConditions"), path=f"webhooks[{i}].matchConditions"
            )
        return causes
    if kind == "ValidatingAdmissionPolicy":
        spec = obj.get("spec")
        return _policy_problems(spec if isinstance(spec, dict) else {})
    return []


def _dicts(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _expression_problem(field: str, expression: Any) -> list[Cause]:
    text = str(expression or "").strip()
    if not text:
        return [required(field)]
    problem = _compile_problem(text)
    return [invalid(field, text, problem)] if problem else []


def _match_condition_problems(conditions: Any, *, path: str) -> list[Cause]:
    """``validateMatchConditions``: how many, and each one's name and expression."""
    listed = _dicts(conditions)
    causes: list[Cause] = []
    if len(listed) > MAX_MATCH_CONDITIONS:
        causes.append(
            {
                "reason": "FieldValueTooMany",
                "message": f"Too many: {len(listed)}: must have at most {MAX_MATCH_CONDITIONS} items",
                "field": path,
            }
        )
    seen: set[str] = set()
    for i, condition in enumerate(listed):
        causes += _expression_problem(f"{path}[{i}].expression", condition.get("expression"))
        name = str(condition.get("name") or "")
        if not name:
            causes.append(required(f"{path}[{i}].name"))
            continue
        causes += [invalid(f"{path}[{i}].name", name, why) for why in is_qualified_name(name)]
        if name in seen:
            causes.append(duplicate(f"{path}[{i}].name", name))
        seen.add(name)
    return causes


def _policy_problems(spec: Obj) -> list[Cause]:
    causes = _match_condition_problems(spec.get("matchConditions"), path="spec.matchConditions")
    for i, variable in enumerate(_dicts(spec.get("variables"))):
        if not variable.get("name"):
            causes.append(required(f"spec.variables[{i}].name"))
        causes += _expression_problem(f"spec.variables[{i}].expression", variable.get("expression"))
    for i, rule in enumerate(_dicts(spec.get("validations"))):
        if str(rule.get("expression") or "").strip():  # a missing one is api.validation's
            causes += _expression_problem(f"spec.validations[{i}].expression", rule["expression"])
        if str(rule.get("messageExpression") or "").strip():
            field = f"spec.validations[{i}].messageExpression"
            causes += _expression_problem(field, rule["messageExpression"])
    for i, annotation in enumerate(_dicts(spec.get("auditAnnotations"))):
        field = f"spec.auditAnnotations[{i}].valueExpression"
        causes += _expression_problem(field, annotation.get("valueExpression"))
    return causes
