"""JSON patch (RFC 6902): what ``kubectl patch --type=json`` sends.

``Content-Type: application/json-patch+json``. The body is a list of operations (``add``,
``remove``, ``replace``, ``move``, ``copy``, ``test``) addressed by JSON pointers (RFC 6901:
``/a/b~1c`` is key ``b/c``, ``~0`` is ``~``, ``-`` is one past the end of an array). Operations
apply in order to a private copy, so a failing operation leaves nothing half-applied.

Errors mirror the apiserver's patch handler (``endpoints/handlers/patch.go``):

* the document is not a list of operation objects, or an operation's ``op``/``path``/``from`` is
  not a string -> 400 ``BadRequest`` (the patch does not decode);
* more than 10 000 operations -> 413 ``RequestEntityTooLarge``;
* anything that fails while applying (unknown ``op``, a malformed pointer, a path that does not
  exist, a failed ``test``) -> 422 ``Invalid`` with Kubernetes' generic message "the server
  rejected our request due to an error in our request". Kubernetes puts no detail on the wire;
  kubelite neither, but chains a ``JSONPatchError`` carrying it (``err.__cause__``) for logs.

Like the apiserver's library, negative array indices count from the end (``/a/-1`` is the last
element). Otherwise the RFC is followed literally: leading zeros in an index and a missing
``value`` are errors.
"""

from __future__ import annotations

import re
from typing import Any

from api.errors import BadRequest, Invalid, RequestEntityTooLarge
from api.patches.values import JSONValue, clone, json_equal, json_type, render

__all__ = ["MAX_OPERATIONS", "JSONPatchError", "apply_json_patch"]

MAX_OPERATIONS = 10_000
"""The apiserver's cap on operations in one JSON patch (``maxJSONPatchOperations``)."""

REJECTED = "the server rejected our request due to an error in our request"
"""The message Kubernetes sends with every 422 from applying a JSON patch."""

_INDEX = re.compile(r"-?(0|[1-9][0-9]*)")
_BAD_ESCAPE = re.compile(r"~(?![01])")
_MISSING: Any = object()


class JSONPatchError(Exception):
    """Why an operation could not be applied (the detail behind the generic 422)."""


def apply_json_patch(target: dict[str, Any], ops: Any) -> JSONValue:
    """Apply the RFC 6902 operations ``ops`` to ``target``; return a new document.

    The document need not be an object afterwards (an op may replace the root); the caller
    checks that.

    Raises ``BadRequest`` for a malformed document, ``RequestEntityTooLarge`` beyond
    ``MAX_OPERATIONS`` and ``Invalid`` when an operation cannot be applied.
    """
    _check_shape(ops)
    doc: JSONValue = clone(target)
    for number, op in enumerate(ops):
        try:
            doc = _apply_one(doc, op)
        except JSONPatchError as err:
            raise Invalid(REJECTED) from JSONPatchError(f"operation {number} ({render(op)}): {err}")
    return doc


def _check_shape(ops: Any) -> None:
    if not isinstance(ops, list):
        raise BadRequest(
            f"json: cannot unmarshal {json_type(ops)} into Go value of type jsonpatch.Patch"
        )
    if len(ops) > MAX_OPERATIONS:
        raise RequestEntityTooLarge(
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_OPERATIONS}, got {len(ops)}"
        )
    for op in ops:
        if not isinstance(op, dict):
            raise BadRequest(
                f"json: cannot unmarshal {json_type(op)} into Go value of type jsonpatch.Operation"
            )
        for field in ("op", "path", "from"):
            if field in op and not isinstance(op[field], str):
                raise BadRequest(
                    f"error decoding patch: json: cannot unmarshal {json_type(op[field])} "
                    f"into Go struct field jsonPatchOp.{field} of type string"
                )


def _apply_one(doc: JSONValue, op: dict[str, Any]) -> JSONValue:
    kind = op.get("op", _MISSING)
    if kind is _MISSING:
        raise JSONPatchError("missing 'op'")
    path = _pointer(op, "path")
    if kind == "add":
        return _add(doc, path, clone(_value(op)))
    if kind == "remove":
        _remove(doc, path)
        return doc
    if kind == "replace":
        value = clone(_value(op))
        if not path:
            return value
        parent, key = _locate_parent(doc, path)
        if isinstance(parent, dict):
            if key not in parent:
                raise JSONPatchError(f"replace operation does not apply: doc is missing key: {key}")
            parent[key] = value
        else:
            parent[_index(key, len(parent), end_ok=False)] = value
        return doc
    if kind == "move":
        source = _pointer(op, "from")
        if source == path:
            return doc
        if path[: len(source)] == source:
            raise JSONPatchError("move operation cannot move a value into one of its children")
        value = _get(doc, source)
        _remove(doc, source)
        return _add(doc, path, value)
    if kind == "copy":
        return _add(doc, path, clone(_get(doc, _pointer(op, "from"))))
    if kind == "test":
        expected = _value(op)
        actual = _get(doc, path) if path else doc
        if not json_equal(actual, expected):
            raise JSONPatchError(f"testing value {op['path']} failed: test failed")
        return doc
    raise JSONPatchError(f"Unexpected kind: {kind}")


def _value(op: dict[str, Any]) -> JSONValue:
    if "value" not in op:
        raise JSONPatchError(f"{op.get('op')} operation requires a 'value'")
    return op["value"]


def _pointer(op: dict[str, Any], field: str) -> list[str]:
    """Parse ``op[field]`` as an RFC 6901 pointer into unescaped reference tokens."""
    if field not in op:
        raise JSONPatchError(f"{op.get('op')} operation requires a '{field}'")
    text = op[field]
    if text == "":
        return []
    if not text.startswith("/"):
        raise JSONPatchError(f"JSON pointer must be empty or start with '/': {text!r}")
    tokens = text[1:].split("/")
    for token in tokens:
        if _BAD_ESCAPE.search(token):
            raise JSONPatchError(f"invalid escape in JSON pointer {text!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _index(token: str, length: int, *, end_ok: bool) -> int:
    """An array index for ``token``; ``end_ok`` allows ``length`` itself (``-`` or an append)."""
    if token == "-":
        if end_ok:
            return length
        raise JSONPatchError("'-' refers to a nonexistent element")
    if not _INDEX.fullmatch(token) or token == "-0":
        raise JSONPatchError(f"invalid array index: {token!r}")
    index = int(token)
    if index < 0:
        index += length
    limit = length if end_ok else length - 1
    if index < 0 or index > limit:
        raise JSONPatchError(f"array index out of bounds: {token}")
    return index


def _locate_parent(doc: JSONValue, path: list[str]) -> tuple[Any, str]:
    """The container holding ``path``'s last token, and that token; the parent must exist."""
    node = doc
    for token in path[:-1]:
        node = _child(node, token)
    if not isinstance(node, dict | list):
        raise JSONPatchError(f"doc is missing path: /{'/'.join(path)}")
    return node, path[-1]


def _child(node: JSONValue, token: str) -> JSONValue:
    if isinstance(node, dict):
        if token not in node:
            raise JSONPatchError(f"doc is missing key: {token}")
        return node[token]
    if isinstance(node, list):
        return node[_index(token, len(node), end_ok=False)]
    raise JSONPatchError(f"cannot descend into a scalar at {token!r}")


def _get(doc: JSONValue, path: list[str]) -> JSONValue:
    node = doc
    for token in path:
        node = _child(node, token)
    return node


def _add(doc: JSONValue, path: list[str], value: JSONValue) -> JSONValue:
    if not path:
        return value
    parent, key = _locate_parent(doc, path)
    if isinstance(parent, dict):
        parent[key] = value
    else:
        parent.insert(_index(key, len(parent), end_ok=True), value)
    return doc


def _remove(doc: JSONValue, path: list[str]) -> None:
    if not path:
        raise JSONPatchError("remove operation cannot remove the whole document")
    parent, key = _locate_parent(doc, path)
    if isinstance(parent, dict):
        if key not in parent:
            raise JSONPatchError(f"remove operation does not apply: doc is missing key: {key}")
        del parent[key]
    else:
        del parent[_index(key, len(parent), end_ok=False)]
