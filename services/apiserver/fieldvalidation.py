"""``fieldValidation``: what a write does with fields no Kubernetes type declares.

Why: Kubernetes decodes a request body into Go structs, so a field the struct lacks — a typo
(``imagee``), a field in the wrong place, a field from a newer release — cannot be stored. Since
1.27 the client chooses what the server says about it with ``?fieldValidation=``:

* ``Strict``: the write fails. A create or update answers 400 BadRequest,
  ``Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field
  "spec.containers[0].imagee"``; a patch answers 422 Invalid on the field ``patch`` (the
  patched document as the value, as the Go handlers word it). kubectl sends ``Strict`` on
  ``apply``, ``create`` and ``replace`` unless told ``--validate=warn|ignore|false``.
* ``Warn`` — also the default when the parameter is absent: the write succeeds without the
  unknown fields and the response carries one ``Warning: 299 - "unknown field \\"...\\""``
  header per field, which kubectl prints as ``Warning: unknown field "..."``.
* ``Ignore``: the unknown fields are dropped silently.

Any other value is a 422 naming the request's options kind (``CreateOptions.meta.k8s.io``).

What "unknown" means here: a key that the pydantic model of the kind (``rt.model``) does not
declare under its wire name (the alias, e.g. ``nodeName``; the snake_case spelling pydantic
would also accept is unknown, as Kubernetes' JSON is case-sensitive). The walk follows the
models' annotations through nested models, lists and maps of models; it never looks inside a
field typed as a plain ``dict``/``Any`` (labels, annotations, nodeSelector, resource lists, and
the free-form parts the models leave open, such as cloud volume sources). ``api/`` declares
every field Kubernetes declares on the kinds kubelite serves, so a kubectl-generated or
``kubectl get -o yaml`` manifest passes ``Strict``.

A custom kind's unknown fields are those its CRD's schema does not declare
(``api.schema_validation.unknown_fields``): dropping them is Kubernetes' pruning.

Limits: only create, update (PUT) and patch of the main resource; subresource writes
(``/status``, ``/scale``, ``/binding``) keep what they are sent. Duplicate JSON keys are not
detected (the body is already decoded). On a patch, unknown fields already present in the
stored object (written before this check existed) are neither reported nor dropped.
"""

from __future__ import annotations

import enum
import json
import logging
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from api.errors import BadRequest, Invalid, StatusError
from api.registry import ResourceType
from api.schema_validation import unknown_fields as schema_unknown_fields
from services.apiserver.codec import PatchType

__all__ = [
    "Directive",
    "Unknown",
    "add_warnings",
    "check_object",
    "check_patched",
    "directive_of",
    "unknown_fields",
]

log = logging.getLogger("kubelite.apiserver.fieldvalidation")

Obj = dict[str, Any]
R = typing.TypeVar("R", bound=web.StreamResponse)


class Directive(enum.StrEnum):
    IGNORE = "Ignore"
    WARN = "Warn"
    STRICT = "Strict"


_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}


def directive_of(request: web.Request) -> Directive:
    """The request's ``fieldValidation`` (absent or empty: ``Warn``); 422 for anything else."""
    value = request.query.get("fieldValidation", "")
    if value == "":
        return Directive.WARN
    try:
        return Directive(value)
    except ValueError:
        supported = ", ".join(f'"{v}"' for v in sorted(["", *Directive]))
        raise Invalid.of(
            _OPTIONS_KIND.get(request.method, "CreateOptions"),
            "",
            [
                {
                    "reason": "FieldValueNotSupported",
                    "message": f'Unsupported value: "{value}": supported values: {supported}',
                    "field": "fieldValidation",
                }
            ],
            group="meta.k8s.io",
        ) from None


# -- the walk ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Model:
    model: type[BaseModel]


@dataclass(frozen=True, slots=True)
class _Each:
    """A list (``index`` True) or a map of values of ``item``'s shape."""

    item: _Shape
    index: bool


_Shape = _Model | _Each | None
"""What a field holds: a model to walk into, a list/map of something, or a leaf (None)."""


def _shape(annotation: Any) -> _Shape:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _shape(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        shapes = [_shape(a) for a in typing.get_args(annotation) if a is not type(None)]
        walked = [s for s in shapes if s is not None]
        return walked[0] if len(walked) == 1 else None
    if origin is list:
        item = _shape(typing.get_args(annotation)[0])
        return None if item is None else _Each(item, index=True)
    if origin is dict:
        item = _shape(typing.get_args(annotation)[1])
        return None if item is None else _Each(item, index=False)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _Model(annotation)
    return None


@cache
def _fields(model: type[BaseModel]) -> Mapping[str, _Shape]:
    """Wire name -> shape, for every field ``model`` declares."""
    return {
        (info.alias or name): _shape(info.annotation) for name, info in model.model_fields.items()
    }


@dataclass(frozen=True, slots=True)
class Unknown:
    """One unknown field: its path as Kubernetes prints it, and where it sits (to drop it)."""

    path: str
    parent: Obj
    key: str

    @property
    def message(self) -> str:
        return f'unknown field "{self.path}"'


def unknown_fields(model: type[BaseModel], obj: Obj) -> list[Unknown]:
    """Every key of ``obj`` (recursively) that ``model`` does not declare, in document order.
    Bodies almost never have one, so a first walk only looks (no paths spelled out); the
    walk that names them runs when there is something to name."""
    shape = _Model(model)
    return list(_walk(shape, obj, "")) if _has_unknown(shape, obj) else []


def _has_unknown(shape: _Shape, value: Any) -> bool:
    """Whether ``_walk`` would find anything."""
    if isinstance(shape, _Model):
        if not isinstance(value, dict):
            return False
        known = _fields(shape.model)
        for key, sub in value.items():
            if key not in known:
                return True
            child = known[key]
            if child is not None and _has_unknown(child, sub):
                return True
    elif isinstance(shape, _Each):
        if shape.index and isinstance(value, list):
            return any(_has_unknown(shape.item, item) for item in value)
        if not shape.index and isinstance(value, dict):
            return any(_has_unknown(shape.item, item) for item in value.values())
    return False


def _walk(shape: _Shape, value: Any, path: str) -> Iterator[Unknown]:
    if isinstance(shape, _Model):
        if not isinstance(value, dict):
            return  # a type error: validation answers it
        known = _fields(shape.model)
        for key, sub in value.items():
            where = f"{path}.{key}" if path else key
            if key not in known:
                yield Unknown(where, value, key)
            elif (child := known[key]) is not None:
                yield from _walk(child, sub, where)
    elif isinstance(shape, _Each):
        if shape.index and isinstance(value, list):
            for i, item in enumerate(value):
                yield from _walk(shape.item, item, f"{path}[{i}]")
        elif not shape.index and isinstance(value, dict):
            for key, item in value.items():
                yield from _walk(shape.item, item, f"{path}[{key}]")


def _drop(rt: ResourceType, obj: Obj, unknown: list[Unknown], directive: Directive) -> None:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
    # a component writing a field Kubernetes does not know loses it: say so where it shows
    log.info(
        "%s %s: dropped unknown field(s) %s (fieldValidation=%s)",
        rt.kind,
        name or "(unnamed)",
        ", ".join(u.path for u in unknown),
        directive,
    )
    for u in unknown:
        u.parent.pop(u.key, None)


def _strict_error(unknown: list[Unknown]) -> str:
    return "strict decoding error: " + ", ".join(u.message for u in unknown)


# -- what the handlers call ----------------------------------------------------------------------


def _unknown_in(rt: ResourceType, obj: Obj) -> list[Unknown]:
    """The unknown fields of a body of ``rt``: by its model, or by its schema for a custom kind
    (dropping them is the pruning of Kubernetes' structural schemas)."""
    if rt.custom is None:
        return unknown_fields(rt.model, obj)
    return [Unknown(u.path, u.parent, u.key) for u in schema_unknown_fields(rt.custom.schema, obj)]


def check_object(rt: ResourceType, obj: Obj, *, directive: Directive) -> list[str]:
    """A create or update body: 400 under ``Strict``; otherwise drop the unknown fields and
    return the warnings to send (none under ``Ignore``)."""
    unknown = _unknown_in(rt, obj)
    if not unknown:
        return []
    if directive is Directive.STRICT:
        raise BadRequest(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            + _strict_error(unknown)
        )
    warnings = [u.message for u in unknown] if directive is Directive.WARN else []
    _drop(rt, obj, unknown, directive)
    return warnings


def check_patched(
    rt: ResourceType,
    patched: Obj,
    *,
    current: Obj,
    directive: Directive,
    patch_type: PatchType,
    patch: Any,
) -> list[str]:
    """A patch's result (before it is written): 422 on ``patch`` under ``Strict``; otherwise
    as ``check_object``. Unknown fields already in ``current`` are left alone."""
    before = {u.path for u in _unknown_in(rt, current)}
    unknown = [u for u in _unknown_in(rt, patched) if u.path not in before]
    if not unknown:
        return []
    if directive is Directive.STRICT:
        # the Go handlers print the decoded patch map (strategic) or the patched JSON (others)
        shown = (
            _go_value(patch)
            if patch_type is PatchType.STRATEGIC
            else json.dumps(patched, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        )
        raise _invalid_patch(shown, _strict_error(unknown))
    warnings = [u.message for u in unknown] if directive is Directive.WARN else []
    _drop(rt, patched, unknown, directive)
    return warnings


def _invalid_patch(value: str, detail: str) -> StatusError:
    """``errors.NewInvalid(schema.GroupKind{}, "", {field.Invalid("patch", value, detail)})``."""
    cause = {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {_go_quote(value)}: {detail}",
        "field": "patch",
    }
    return Invalid(f' "" is invalid: patch: {cause["message"]}', causes=[cause])


def add_warnings(response: R, warnings: list[str]) -> R:
    """One ``Warning: 299 - "<text>"`` header per distinct warning (RFC 7234, as Kubernetes)."""
    for text in dict.fromkeys(warnings):
        response.headers.add("Warning", f"299 - {_go_quote(text)}")
    return response


def _go_quote(text: str) -> str:
    """Go's ``%q``: a double-quoted string with ``"`` and ``\\`` escaped."""
    return json.dumps(text, ensure_ascii=False)


def _go_value(value: Any) -> str:
    """Go's ``%+v`` of a decoded JSON value (``map[a:1 b:[x y]]``, keys sorted)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value).replace("e+0", "e+").replace("e-0", "e-")
    return str(value)
