"""``x-kubernetes-validations``: the CEL rules a CRD's schema attaches to its nodes, evaluated.

Why: a structural schema says what shape a custom object has; the rules say what it must mean
("minReplicas <= maxReplicas", "spec.mode may not change"). Kubernetes' apiextensions apiserver
compiles them when the CRD is written and evaluates them on every write of a custom object
(``apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go``); this module does the same
with cel-python, over the schema as a plain dict (``api.schema_validation``'s convention):

* ``rule_problems(schema, path=...)``: every rule and ``messageExpression`` of the schema
  compiled; one that does not parse is refused as Kubernetes words it (``...
  x-kubernetes-validations[0].rule: Invalid value: ...: compilation failed: ERROR: <input>:1:8:
  Syntax error``). Programs are cached by their text, so each is compiled once;
* ``rule_failures(schema, obj, old)``: every rule at every node (object, list, map value,
  scalar) evaluated with ``self`` (the node's value, null nodes skipped as Kubernetes does) and
  ``oldSelf`` (the same node of the stored object). A rule naming ``oldSelf`` is a *transition
  rule*: evaluated only when the node has an old value — never on create, and on update only
  where the node can be matched with its old self (object properties, map values, items of a
  ``map`` list by their keys; not items of ``set`` or ``atomic`` lists);
* a rule that is not ``true`` fails with ``messageExpression``'s string (if it evaluates to a
  non-empty one-line string), else ``message``, else ``failed rule: <rule>``; at ``fieldPath``
  below the node if given; as a cause of ``reason`` (``FieldValueInvalid`` by default —
  ``Invalid value: "<node type>": <message>`` — or ``FieldValueForbidden``,
  ``FieldValueRequired``, ``FieldValueDuplicate``). A rule that fails to evaluate (a missing
  key, a bad overload) is an invalid value ``<error> evaluating rule: <rule>``. Rules at the root
  report at Kubernetes' ``<nil>`` path.

Limits: rules are parsed, not type-checked, when the CRD is written (a rule naming a field the
schema lacks fails when evaluated, not when written); no cost estimates or budgets; no
``optionalOldSelf`` (ratcheting) and no Kubernetes CEL extension libraries beyond CEL's standard
functions (``quantity``, ``url``, ``isSorted`` ... are missing); ``fieldPath`` is taken as
written (``.a.b`` or ``['a']``), not checked against the schema.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.celtypes import BoolType
from celpy.evaluation import CELEvalError

from api.errors import Cause

__all__ = ["BLOCKED", "rule_failures", "rule_problems", "syntax_error"]

Schema = Mapping[str, Any]

ROOT = "<nil>"
"""How Kubernetes prints the path of a rule at the schema's root (a nil ``field.Path``)."""

BLOCKED: Cause = {
    "reason": "FieldValueInvalid",
    "message": (
        'Invalid value: "null": some validation rules were not checked because the object was '
        "invalid; correct the existing errors to complete validation"
    ),
    "field": ROOT,
}
"""What Kubernetes answers instead of evaluating rules over an object of the wrong types."""

_ENVIRONMENT = celpy.Environment()


class CompileError(Exception):
    """A rule or message expression that is not CEL."""


@dataclass(frozen=True, slots=True)
class _Compiled:
    program: celpy.Runner
    uses_old_self: bool


@functools.lru_cache(maxsize=4096)
def _compile(expression: str) -> _Compiled:
    try:
        tree = _ENVIRONMENT.compile(expression)
    except CELParseError as exc:
        raise CompileError(syntax_error(expression, exc)) from exc
    names = tree.scan_values(lambda token: token == "oldSelf")  # an identifier, not a literal
    return _Compiled(_ENVIRONMENT.program(tree), uses_old_self=any(True for _ in names))


def syntax_error(expression: str, exc: CELParseError) -> str:
    """cel-go's report of a parse error: where, then the line with a caret under the spot
    (also how admission expressions report theirs)."""
    line = int(getattr(exc, "line", None) or 1)
    column = int(getattr(exc, "column", None) or 1)
    lines = expression.splitlines() or [""]
    text = lines[min(line, len(lines)) - 1]
    return f"ERROR: <input>:{line}:{column}: Syntax error\n | {text}\n | {'.' * (column - 1)}^"


# -- compiling when the CRD is written --------------------------------------------------------


def rule_problems(schema: Schema, *, path: str) -> list[Cause]:
    """Why the rules under ``schema`` (at ``path``, a CRD's ``...openAPIV3Schema``) cannot be
    used: a rule that is missing or does not compile, a ``messageExpression`` that does not."""
    causes: list[Cause] = []
    for where, node in _nodes(schema, path):
        for index, rule in enumerate(node.get("x-kubernetes-validations") or ()):
            if isinstance(rule, Mapping):
                causes += _rule_problems(rule, f"{where}.x-kubernetes-validations[{index}]")
    return causes


def _nodes(schema: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, Mapping):
            yield from _nodes(sub, f"{path}.properties[{key}]")
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if isinstance(sub, Mapping):
            yield from _nodes(sub, f"{path}.{key}")


def _rule_problems(rule: Mapping[str, Any], where: str) -> list[Cause]:
    text = str(rule.get("rule") or "").strip()
    if not text:
        return [
            {
                "reason": "FieldValueRequired",
                "message": "Required value: rule is not specified",
                "field": f"{where}.rule",
            }
        ]
    causes: list[Cause] = []
    try:
        _compile(text)
    except CompileError as exc:
        causes.append(_bad_rule(f"{where}.rule", rule, f"compilation failed: {exc}"))
    message_expression = str(rule.get("messageExpression") or "").strip()
    if message_expression:
        try:
            _compile(message_expression)
        except CompileError as exc:
            detail = f"messageExpression compilation failed: {exc}"
            causes.append(_bad_rule(f"{where}.messageExpression", rule, detail))
    return causes


def _bad_rule(field: str, rule: Mapping[str, Any], detail: str) -> Cause:
    """Kubernetes prints the whole rule as its Go struct (``%#v``) for the bad value."""
    reason = rule.get("reason")
    shown = (
        "apiextensions.ValidationRule{"
        f"Rule:{json.dumps(str(rule.get('rule') or ''))}, "
        f"Message:{json.dumps(str(rule.get('message') or ''))}, "
        f"MessageExpression:{json.dumps(str(rule.get('messageExpression') or ''))}, "
        f"Reason:{'(*apiextensions.FieldValueErrorReason)(nil)' if reason is None else json.dumps(reason)}, "
        f"FieldPath:{json.dumps(str(rule.get('fieldPath') or ''))}, "
        "OptionalOldSelf:(*bool)(nil)}"
    )
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {shown}: {detail}",
        "field": field,
    }


# -- evaluating on every write of a custom object ---------------------------------------------


_MISSING = object()
"""A node with no old value (create, or a node that cannot be matched with its old self)."""


def rule_failures(schema: Schema, obj: Any, old: Any | None = None) -> list[Cause]:
    """Every rule of ``schema`` that ``obj`` (its update of ``old``, if given) breaks."""
    causes: list[Cause] = []
    _walk(schema, obj, _MISSING if old is None else old, "", causes)
    return causes


def _walk(schema: Schema, value: Any, old: Any, path: str, out: list[Cause]) -> None:
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or ():
        if isinstance(rule, Mapping):
            failure = _evaluate(rule, schema, value, old, path)
            if failure is not None:
                out.append(failure)
    if isinstance(value, dict):
        _walk_object(schema, value, old if isinstance(old, dict) else {}, path, out)
    elif isinstance(value, list):
        _walk_list(schema, value, old if isinstance(old, list) else [], path, out)


def _walk_object(
    schema: Schema, value: dict[str, Any], old: dict[str, Any], path: str, out: list[Cause]
) -> None:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        sub = properties.get(key)
        if isinstance(sub, Mapping):
            _walk(sub, item, old.get(key, _MISSING), f"{path}.{key}" if path else key, out)
        elif isinstance(additional, Mapping):
            _walk(additional, item, old.get(key, _MISSING), f"{path}[{key}]", out)


def _walk_list(
    schema: Schema, value: list[Any], old: list[Any], path: str, out: list[Cause]
) -> None:
    items = schema.get("items")
    if not isinstance(items, Mapping):
        return
    keys = list(schema.get("x-kubernetes-list-map-keys") or ())
    by_key: dict[str, Any] = {}
    if schema.get("x-kubernetes-list-type") == "map" and keys:
        by_key = {_map_key(item, keys): item for item in old if isinstance(item, dict)}
    for index, item in enumerate(value):
        previous = by_key.get(_map_key(item, keys), _MISSING) if by_key else _MISSING
        _walk(items, item, previous, f"{path}[{index}]", out)


def _map_key(item: Any, keys: list[str]) -> str:
    if not isinstance(item, dict):
        return ""
    return json.dumps([item.get(k) for k in keys])


def _evaluate(
    rule: Mapping[str, Any], schema: Schema, value: Any, old: Any, path: str
) -> Cause | None:
    text = str(rule.get("rule") or "").strip()
    node_type = str(schema.get("type") or "")
    where = path or ROOT
    try:
        compiled = _compile(text)
    except CompileError as exc:
        return _failure(where, node_type, f"rule compile error: compilation failed: {exc}")
    if compiled.uses_old_self and old is _MISSING:
        return None
    activation = {"self": json_to_cel(value)}
    if old is not _MISSING:
        activation["oldSelf"] = json_to_cel(old)
    try:
        result: Any = compiled.program.evaluate(activation)
    except CELEvalError as exc:
        result = exc
    if isinstance(result, CELEvalError):
        why = result.args[0] if result.args else result
        return _failure(where, node_type, f"{why} evaluating rule: {_rule_text(rule)}")
    if isinstance(result, BoolType) and bool(result):
        return None
    field = _at(path, str(rule.get("fieldPath") or ""))
    detail = _message(rule, activation) or _default_message(rule)
    return _by_reason(str(rule.get("reason") or "FieldValueInvalid"), field, node_type, detail)


def _message(rule: Mapping[str, Any], activation: dict[str, Any]) -> str:
    """``messageExpression``'s string, or empty when it fails or says nothing usable (Kubernetes
    then falls back to ``message``)."""
    expression = str(rule.get("messageExpression") or "").strip()
    if not expression:
        return ""
    try:
        result = _compile(expression).program.evaluate(activation)
    except (CompileError, CELEvalError):
        return ""
    text = result.strip() if isinstance(result, str) else ""
    return "" if "\n" in text else text


def _default_message(rule: Mapping[str, Any]) -> str:
    message = str(rule.get("message") or "").strip()
    return message or f"failed rule: {_rule_text(rule)}"


def _rule_text(rule: Mapping[str, Any]) -> str:
    return str(rule.get("message") or "").strip() or str(rule.get("rule") or "").strip()


def _at(path: str, field_path: str) -> str:
    """The node's path with the rule's ``fieldPath`` (``.a.b``, ``['a']``) below it."""
    relative = field_path.strip()
    if not relative:
        return path or ROOT
    relative = relative.replace("['", ".").replace("']", "").lstrip(".")
    return f"{path}.{relative}" if path else relative


def _by_reason(reason: str, field: str, node_type: str, detail: str) -> Cause:
    if reason == "FieldValueForbidden":
        return {"reason": reason, "message": f"Forbidden: {detail}", "field": field}
    if reason == "FieldValueRequired":
        return {"reason": reason, "message": f"Required value: {detail}", "field": field}
    if reason == "FieldValueDuplicate":
        return {
            "reason": reason,
            "message": f"Duplicate value: {json.dumps(node_type)}",
            "field": field,
        }
    return _failure(field, node_type, detail)


def _failure(field: str, node_type: str, detail: str) -> Cause:
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {json.dumps(node_type)}: {detail}",
        "field": field,
    }
