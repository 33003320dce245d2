"""Structural OpenAPI v3 schemas: validation, defaulting and pruning of plain JSON objects.

Why: a CustomResourceDefinition describes its kind with an OpenAPI v3 schema, and Kubernetes'
apiextensions apiserver serves the kind from that schema alone — it prunes the fields the schema
does not declare, fills in ``default`` values, and validates the rest (kube-openapi's validator,
then the ``x-kubernetes-list-type`` checks), answering 422 with one cause per bad field worded
as Kubernetes words it::

    spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"

This module is that engine, over any schema given as a plain dict — nothing here knows a kind,
so a built-in kind could be served from its schema the same way.

What it owns:

* ``validate(schema, obj)``: types (``integer`` accepts integral floats, as Go's JSON decoding
  does), ``nullable``, ``required``, ``enum``, ``pattern``, the string formats Kubernetes checks
  (``uuid``, ``date``, ``date-time``, ``byte``, ``ipv4`` ...), ``int32``/``int64`` ranges,
  ``minimum``/``maximum`` (exclusive too), ``multipleOf``, ``min/maxLength``, ``min/maxItems``,
  ``uniqueItems``, ``min/maxProperties``, ``additionalProperties`` schemas,
  ``x-kubernetes-int-or-string``, ``x-kubernetes-embedded-resource`` (``apiVersion`` and ``kind``
  required), ``x-kubernetes-list-type`` ``set``/``map`` uniqueness (``x-kubernetes-list-map-keys``)
  and ``allOf``/``anyOf``/``oneOf``/``not`` value checks;
* ``apply_defaults(schema, obj)``: ``default`` values, outside in, a null in a non-nullable field
  with a default replaced by it (structural defaulting);
* ``unknown_fields(schema, obj)`` and ``prune(schema, obj)``: the keys the schema does not declare
  (``x-kubernetes-preserve-unknown-fields`` keeps them; the root and embedded resources keep
  ``apiVersion``, ``kind`` and ``metadata``);
* ``structural_problems(schema)``: the checks that make a schema structural (a ``type`` on every
  node that does not preserve unknown fields or take an int-or-string), worded as the CRD
  validation words them.

Limits: ``$ref`` is not followed (CRD schemas may not use it); ``x-kubernetes-validations`` (CEL)
are ``api.validation_rules``'; ``metadata`` of the root is left to the apiserver's ObjectMeta rules; error
order follows the schema's property order, where Go's follows its own map walk.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from typing import Any

from api.errors import Cause

__all__ = [
    "UnknownField",
    "apply_defaults",
    "defaulted",
    "json_type",
    "prune",
    "structural_problems",
    "unknown_fields",
    "validate",
]

Schema = Mapping[str, Any]

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_RESOURCE_KEYS = ("apiVersion", "kind", "metadata")
"""What the root of a custom object, and every embedded resource, keeps whatever its schema says."""


# -- causes, worded as apimachinery's field errors ----------------------------------------------


def _go_value(value: Any) -> str:
    """A bad value as ``field.Error`` prints it: strings ``%q``, numbers and booleans bare."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return _go_map(value) if isinstance(value, dict) else json.dumps(value, separators=(",", ":"))


def _go_map(value: Mapping[str, Any]) -> str:
    """Go's ``%#v`` of a ``map[string]interface {}`` (keys sorted, as fmt prints maps)."""
    inner = ", ".join(f"{json.dumps(k)}:{_go_value(value[k])}" for k in sorted(value))
    return "map[string]interface {}{" + inner + "}"


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {_go_value(value)}: {detail}",
        "field": path,
    }


def _type_invalid(path: str, found: str, wanted: str) -> Cause:
    return {
        "reason": "FieldValueTypeInvalid",
        "message": f'Invalid value: "{found}": {path} in body must be of type {wanted}: "{found}"',
        "field": path,
    }


def _required(path: str) -> Cause:
    return {"reason": "FieldValueRequired", "message": "Required value", "field": path}


def _not_supported(path: str, value: Any, allowed: list[Any]) -> Cause:
    shown = ", ".join(_go_value(v) for v in allowed)
    return {
        "reason": "FieldValueNotSupported",
        "message": f"Unsupported value: {_go_value(value)}: supported values: {shown}",
        "field": path,
    }


def _duplicate(path: str, value: Any) -> Cause:
    return {
        "reason": "FieldValueDuplicate",
        "message": f"Duplicate value: {_go_value(value)}",
        "field": path,
    }


# -- types ------------------------------------------------------------------------------------


def json_type(value: Any) -> str:
    """The OpenAPI type name of a decoded JSON value (``integer`` for integral numbers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(wanted: str, found: str) -> bool:
    return wanted == found or (wanted == "number" and found == "integer")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# -- string formats Kubernetes checks (apiextensions' strfmt registry) -------------------------

_UUID = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)
_HOSTNAME = re.compile(
    r"^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$"
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$")
_DURATION = re.compile(r"^[-+]?(\d+(\.\d*)?(ns|us|µs|ms|s|m|h|d|w))+$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_BSON_OBJECT_ID = re.compile(r"^[0-9a-fA-F]{24}$")


def _is_date_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return "T" in text.upper() or " " in text


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def _is_byte(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def _is_ip(text: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


def _is_uuid_version(version: int) -> Any:
    def check(text: str) -> bool:
        if not _UUID.match(text):
            return False
        return uuid.UUID(text).version == version

    return check


_FORMATS: dict[str, Any] = {
    "uuid": lambda t: bool(_UUID.match(t)),
    "uuid3": _is_uuid_version(3),
    "uuid4": _is_uuid_version(4),
    "uuid5": _is_uuid_version(5),
    "date": _is_date,
    "date-time": _is_date_time,
    "datetime": _is_date_time,
    "byte": _is_byte,
    "ipv4": lambda t: _is_ip(t, 4),
    "ipv6": lambda t: _is_ip(t, 6),
    "cidr": _is_cidr,
    "hostname": lambda t: len(t) <= 255 and bool(_HOSTNAME.match(t)),
    "email": lambda t: bool(_EMAIL.match(t)),
    "mac": lambda t: bool(_MAC.match(t)),
    "duration": lambda t: bool(_DURATION.match(t)),
    "hexcolor": lambda t: bool(_HEXCOLOR.match(t)),
    "bsonobjectid": lambda t: bool(_BSON_OBJECT_ID.match(t)),
}
"""String formats and their checks; other formats (``password``, ``uri`` ...) are not checked."""


@lru_cache(maxsize=512)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


# -- validation -------------------------------------------------------------------------------


def validate(schema: Schema, obj: Any, *, path: str = "") -> list[Cause]:
    """Every way ``obj`` breaks ``schema``, as field causes (empty: valid).

    At the root (``path`` empty) ``apiVersion``, ``kind`` and ``metadata`` are the apiserver's
    and are skipped.
    """
    causes: list[Cause] = []
    _validate(schema, obj, path, causes, root=not path)
    return causes


def _validate(
    schema: Schema, value: Any, path: str, out: list[Cause], *, root: bool = False
) -> None:
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            out.append(_type_invalid(path, "null", str(schema["type"])))
        return
    if schema.get("x-kubernetes-int-or-string"):
        found = json_type(value)
        if found not in ("integer", "string"):
            out.append(_type_invalid(path, found, "integer,string"))
            return
    elif not _check_type(schema, value, path, out):
        return
    _check_value(schema, value, path, out)
    if isinstance(value, dict):
        _validate_object(schema, value, path, out, root=root)
    elif isinstance(value, list):
        _validate_array(schema, value, path, out)


def _check_type(schema: Schema, value: Any, path: str, out: list[Cause]) -> bool:
    wanted = schema.get("type")
    if not wanted:
        return True
    found = json_type(value)
    if not _type_ok(str(wanted), found):
        out.append(_type_invalid(path, found, str(wanted)))
        return False
    return True


def _check_value(schema: Schema, value: Any, path: str, out: list[Cause]) -> None:
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        out.append(_not_supported(path, value, enum))
    if isinstance(value, str):
        _check_string(schema, value, path, out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(schema, value, path, out)
    elif isinstance(value, list):
        _check_counts(schema, len(value), path, out, unit="items")
    elif isinstance(value, dict):
        _check_counts(schema, len(value), path, out, unit="properties")
    for sub in schema.get("allOf") or ():
        _validate(sub, value, path, out)
    _check_alternatives(schema, value, path, out)


def _check_alternatives(schema: Schema, value: Any, path: str, out: list[Cause]) -> None:
    any_of = schema.get("anyOf")
    if any_of and not any(not validate(s, value, path=path or ".") for s in any_of):
        out.append(_invalid(path, value, f"{path} in body must match at least one schema in anyOf"))
    one_of = schema.get("oneOf")
    if one_of and sum(not validate(s, value, path=path or ".") for s in one_of) != 1:
        out.append(
            _invalid(path, value, f"{path} in body must validate one and only one schema (oneOf)")
        )
    not_schema = schema.get("not")
    if not_schema and not validate(not_schema, value, path=path or "."):
        out.append(_invalid(path, value, f"{path} in body should not validate the schema (not)"))


def _check_string(schema: Schema, value: str, path: str, out: list[Cause]) -> None:
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and len(value) > max_length:
        out.append(
            {
                "reason": "FieldValueTooLong",
                "message": f"Too long: may not be more than {max_length} bytes",
                "field": path,
            }
        )
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and len(value) < min_length:
        out.append(
            _invalid(path, value, f"{path} in body should be at least {min_length} chars long")
        )
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and not _pattern(pattern).search(value):
        out.append(_invalid(path, value, f"{path} in body should match '{pattern}'"))
    fmt = schema.get("format")
    check = _FORMATS.get(str(fmt)) if schema.get("type") == "string" else None
    if check is not None and not check(value):
        out.append(
            _invalid(path, value, f"{path} in body must be of type {fmt}: {_go_value(value)}")
        )


def _check_number(schema: Schema, value: float, path: str, out: list[Cause]) -> None:
    fmt = schema.get("format")
    bounds = {"int32": _INT32, "int64": _INT64}.get(str(fmt))
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        out.append(
            _invalid(path, value, f"{path} in body must be of type {fmt}: {_go_value(value)}")
        )
    maximum = schema.get("maximum")
    if isinstance(maximum, int | float):
        if schema.get("exclusiveMaximum") and value >= maximum:
            out.append(
                _invalid(path, value, f"{path} in body should be less than {_number(maximum)}")
            )
        elif value > maximum:
            out.append(
                _invalid(
                    path,
                    value,
                    f"{path} in body should be less than or equal to {_number(maximum)}",
                )
            )
    minimum = schema.get("minimum")
    if isinstance(minimum, int | float):
        if schema.get("exclusiveMinimum") and value <= minimum:
            out.append(
                _invalid(path, value, f"{path} in body should be greater than {_number(minimum)}")
            )
        elif value < minimum:
            out.append(
                _invalid(
                    path,
                    value,
                    f"{path} in body should be greater than or equal to {_number(minimum)}",
                )
            )
    multiple = schema.get("multipleOf")
    if isinstance(multiple, int | float) and multiple > 0 and not _is_multiple(value, multiple):
        out.append(
            _invalid(path, value, f"{path} in body should be a multiple of {_number(multiple)}")
        )


def _is_multiple(value: float, factor: float) -> bool:
    quotient = value / factor
    return abs(quotient - round(quotient)) < 1e-9


def _check_counts(schema: Schema, count: int, path: str, out: list[Cause], *, unit: str) -> None:
    most, least = schema.get(f"max{unit.capitalize()}"), schema.get(f"min{unit.capitalize()}")
    if isinstance(most, int) and count > most:
        if unit == "items":
            out.append(
                {
                    "reason": "FieldValueTooMany",
                    "message": f"Too many: {count}: must have at most {most} items",
                    "field": path,
                }
            )
        else:
            out.append(
                _invalid(path, count, f"{path} in body should have at most {most} properties")
            )
    if isinstance(least, int) and count < least:
        out.append(_invalid(path, count, f"{path} in body should have at least {least} {unit}"))


def _validate_object(
    schema: Schema, value: dict[str, Any], path: str, out: list[Cause], *, root: bool
) -> None:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    skipped = _RESOURCE_KEYS if root else ()
    for name in schema.get("required") or ():
        if name not in value and name not in skipped:
            out.append(_required(_child(path, name)))
    if schema.get("x-kubernetes-embedded-resource"):
        for name in ("apiVersion", "kind"):
            if not value.get(name):
                out.append(_required(_child(path, name)))
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        if key in skipped:
            continue
        sub = properties.get(key)
        if sub is None and isinstance(additional, Mapping):
            sub = additional
        if sub is not None:
            _validate(sub, item, _child(path, key), out)


def _validate_array(schema: Schema, value: list[Any], path: str, out: list[Cause]) -> None:
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            _validate(items, item, f"{path}[{index}]", out)
    list_type = schema.get("x-kubernetes-list-type")
    if schema.get("uniqueItems") and list_type is None and _has_duplicates(value):
        out.append(_invalid(path, value, f"{path} in body shouldn't contain duplicates"))
    if list_type == "set":
        seen: list[Any] = []
        for index, item in enumerate(value):
            if item in seen:
                out.append(_duplicate(f"{path}[{index}]", item))
            else:
                seen.append(item)
    elif list_type == "map":
        keys = list(schema.get("x-kubernetes-list-map-keys") or ())
        seen_keys: list[dict[str, Any]] = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = {k: item[k] for k in keys if k in item}
            if key in seen_keys:
                out.append(_duplicate(f"{path}[{index}]", key))
            else:
                seen_keys.append(key)


def _has_duplicates(value: list[Any]) -> bool:
    seen: list[Any] = []
    for item in value:
        if item in seen:
            return True
        seen.append(item)
    return False


# -- defaulting -------------------------------------------------------------------------------


def apply_defaults(schema: Schema, obj: Any) -> None:
    """Fill in ``default`` values in place, outside in: a missing property with a default gets
    it (then its own defaults), and so does a null in a non-nullable one; list items and map
    values get their items' defaults."""
    if isinstance(obj, dict):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        for key, sub in properties.items():
            has_default = "default" in sub
            if has_default and (key not in obj or (obj[key] is None and not sub.get("nullable"))):
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                apply_defaults(sub, obj[key])
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for key, item in obj.items():
                if key not in properties:
                    apply_defaults(additional, item)
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for item in obj:
                apply_defaults(items, item)


_ABSENT = object()


def defaulted(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` with ``schema``'s defaults, as ``apply_defaults`` fills them in, but copying
    only the objects and lists on the way to a filled-in default (copy on write): for reads of
    stored objects, which must not be changed."""
    if isinstance(value, dict):
        out = value
        properties: Mapping[str, Any] = schema.get("properties") or {}
        for key, sub in properties.items():
            current = value.get(key, _ABSENT)
            missing = current is _ABSENT or (current is None and not sub.get("nullable"))
            if "default" in sub and missing:
                new = defaulted(sub, copy.deepcopy(sub["default"]))
            elif current is _ABSENT:
                continue
            else:
                new = defaulted(sub, current)
            if new is not current:
                out = out if out is not value else dict(value)
                out[key] = new
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for key, item in value.items():
                if key not in properties:
                    new = defaulted(additional, item)
                    if new is not item:
                        out = out if out is not value else dict(value)
                        out[key] = new
        return out
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        new_items = [defaulted(items, item) for item in value]
        if any(new is not old for new, old in zip(new_items, value, strict=True)):
            return new_items
    return value


# -- pruning ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UnknownField:
    """A key no schema declares: its path as Kubernetes prints it, and its parent (to drop it)."""

    path: str
    parent: dict[str, Any]
    key: str


def unknown_fields(schema: Schema, obj: Any) -> list[UnknownField]:
    """Every key of ``obj`` the schema does not declare, in document order. The root's
    ``apiVersion``, ``kind`` and ``metadata`` are always known."""
    return list(_unknown(schema, obj, "", root=True))


def _unknown(
    schema: Schema, value: Any, path: str, *, root: bool = False
) -> Iterator[UnknownField]:
    if isinstance(value, dict):
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        properties: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        for key, item in value.items():
            if embedded and key in _RESOURCE_KEYS:
                continue
            sub = properties.get(key)
            if sub is None and isinstance(additional, Mapping):
                sub = additional
            if sub is None and additional is not True and not preserve:
                yield UnknownField(_child(path, key), value, key)
            elif sub is not None:
                yield from _unknown(sub, item, _child(path, key))
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                yield from _unknown(items, item, f"{path}[{index}]")


def prune(schema: Schema, obj: Any) -> list[str]:
    """Drop, in place, every field ``unknown_fields`` finds; returns their paths."""
    found = unknown_fields(schema, obj)
    for field in found:
        field.parent.pop(field.key, None)
    return [field.path for field in found]


# -- structural schemas -----------------------------------------------------------------------


def structural_problems(schema: Schema, *, path: str) -> list[Cause]:
    """Why ``schema`` (at ``path``) is not structural, as CRD validation words it: every node
    says its ``type`` unless it preserves unknown fields or is an int-or-string; ``default`` is
    not allowed at the root; ``properties`` and ``additionalProperties`` exclude each other."""
    causes: list[Cause] = []
    _structural(schema, path, causes, root=True)
    return causes


def _structural(schema: Schema, path: str, out: list[Cause], *, root: bool = False) -> None:
    exempt = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get(
        "x-kubernetes-int-or-string"
    )
    if not schema.get("type") and not exempt:
        out.append(_required(f"{path}.type"))
    if root and schema.get("type") not in (None, "object"):
        out.append(_invalid(f"{path}.type", schema.get("type"), 'must be "object" at the root'))
    if isinstance(schema.get("additionalProperties"), Mapping) and schema.get("properties"):
        out.append(
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: additionalProperties and properties are mutual exclusive",
                "field": f"{path}.additionalProperties",
            }
        )
    for key, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, Mapping):
            _structural(sub, f"{path}.properties[{key}]", out)
    items = schema.get("items")
    if isinstance(items, Mapping):
        _structural(items, f"{path}.items", out)
    elif schema.get("type") == "array":
        out.append(_required(f"{path}.items"))
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        _structural(additional, f"{path}.additionalProperties", out)
