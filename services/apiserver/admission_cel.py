"""CEL in admission: what webhooks' ``matchConditions`` and ValidatingAdmissionPolicies evaluate.

Why: a webhook's ``matchConditions`` and a policy's ``matchConditions``, ``variables``,
``validations`` and ``auditAnnotations`` are CEL expressions over the same inputs. Kubernetes
evaluates them all through one filter (``staging/src/k8s.io/apiserver/pkg/admission/plugin/cel``
and ``webhook/matchconditions/matcher.go``); this module is kubelite's, with ``celpy``
(cel-python):

* ``activation``: the variables an expression sees — ``object``, ``oldObject`` (null on create;
  ``object`` null on delete), ``request`` (the AdmissionReview request's attributes), and for
  policies ``params``, ``namespaceObject`` and ``variables``;
* ``with_variables``: a policy's ``spec.variables`` composited in order under ``variables.<name>``,
  each seeing the ones before it; one that fails to evaluate fails only the expressions that
  use it (CEL's error values), as Kubernetes' lazily evaluated variables do;
* ``evaluate``: programs compiled once per text; a failure worded as Kubernetes words it,
  ``expression '<e>' resulted in error: <why>`` (``compilation error: <why>`` when it does not
  parse);
* ``match``: ``matchConditions`` as Kubernetes' matcher decides — any condition ``false`` means
  no match (whatever errors others had); otherwise an error under ``failurePolicy: Fail`` is an
  error (several joined as Kubernetes' aggregate prints them), and under ``Ignore`` no match.

Limits: no ``authorizer`` variable (nor ``authorizer.requestResource``); expressions are not
type-checked (a condition that yields a non-bool is an error when evaluated, not when the
configuration is written); no cost budget; cel-python's error texts (``<why>``) are not cel-go's.
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

__all__ = ["ExpressionFailed", "Match", "activation", "evaluate", "match", "with_variables"]

Obj = dict[str, Any]
Activation = dict[str, Any]

_ENVIRONMENT = celpy.Environment()


class ExpressionFailed(Exception):
    """An expression that did not compile, or did not evaluate (the message is Kubernetes')."""


@functools.lru_cache(maxsize=1024)
def _program(expression: str) -> celpy.Runner:
    try:
        return _ENVIRONMENT.program(_ENVIRONMENT.compile(expression))
    except CELParseError as exc:
        raise ExpressionFailed(f"compilation error: {exc}") from exc


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
    result = _raw(expression, bound)
    if isinstance(result, CELEvalError):
        raise ExpressionFailed(f"expression '{expression}' resulted in error: {_why(result)}")
    return result


def activation(*, obj: Obj | None, old: Obj | None, request: Obj, **more: Obj | None) -> Activation:
    """The variables of an admission expression: ``object``, ``oldObject``, ``request`` and, by
    keyword, ``params`` and ``namespaceObject``."""
    plain: dict[str, Any] = {"object": obj, "oldObject": old, "request": request, **more}
    plain.setdefault("params", None)
    return {name: json_to_cel(value) for name, value in plain.items()}


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
