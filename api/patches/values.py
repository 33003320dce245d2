"""Plain JSON values: the data every patch function reads and builds.

A patch target, a patch and a result are what ``json.loads`` produces: ``dict`` (string keys),
``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``. This module owns the three things the
patch algorithms need to do with such values and that Python's built-ins get subtly wrong for
JSON:

* ``clone`` copies a value in one pass. It is much cheaper than ``copy.deepcopy`` (no memo, no
  reduce protocol) because it knows the value is a tree of plain JSON containers.
* ``json_equal`` compares as JSON does: ``1 == 1.0`` but ``true != 1`` (Python says otherwise).
* ``identity`` turns a scalar into a hashable key that keeps JSON types apart, the way Go's
  ``interface{}`` comparison does in the upstream strategic-merge code: ``"80"``, ``80``, ``80.0``
  and ``true`` are four different merge keys.

Limits: values are assumed to be trees (no shared or cyclic containers are detected).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["JSONValue", "clone", "identity", "json_equal", "json_type", "render"]

JSONValue = Any
"""What ``json.loads`` returns; kept as ``Any`` because the containers nest arbitrarily."""


def clone(value: JSONValue) -> JSONValue:
    """A copy of ``value`` that shares no container with it."""
    if type(value) is dict:
        return {k: clone(v) for k, v in value.items()}
    if type(value) is list:
        return [clone(v) for v in value]
    if isinstance(value, dict):  # a dict subclass: copy into a plain dict
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def json_equal(a: JSONValue, b: JSONValue) -> bool:
    """Equality as RFC 6902 ``test`` defines it: numbers by value, booleans never equal numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return False
        return all(json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def identity(value: JSONValue) -> tuple[type, Any]:
    """A hashable key for ``value`` that distinguishes JSON types (``1``, ``1.0``, ``true``)."""
    if isinstance(value, dict | list):
        # Merge keys are scalars in every real schema; a container still gets a stable key.
        return (type(value), json.dumps(value, sort_keys=True, separators=(",", ":")))
    return (type(value), value)


def render(value: JSONValue) -> str:
    """Compact JSON for error messages (never raises)."""
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def json_type(value: Any) -> str:
    """The JSON type name Go's decoder uses in its errors ("cannot unmarshal array into ...")."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__
