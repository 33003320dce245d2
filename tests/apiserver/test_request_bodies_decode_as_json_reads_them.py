"""A request body decodes to exactly what ``json`` reads (``codec.decode_document``), though
most bodies take orjson's faster path: integers past 64 bits stay exact integers (orjson would
make them floats), surrogate escapes are mended as before, and what orjson refuses — a BOM,
``1e400`` — is read by ``json`` or refused with its error, as before. A decoded body's copy
(``codec.clone``, for a write tried more than once) is equal, of the same types, and shares
nothing with it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api.errors import BadRequest
from services.apiserver.codec import clone, decode_document


def _decoded(body: bytes) -> Any:
    return decode_document(body, media_type="application/json")


@pytest.mark.parametrize(
    "body",
    [
        b'{"metadata":{"name":"p","labels":{"app":"caf\xc3\xa9"}},"spec":{"n":-0,"f":0.1}}',
        b'{"n":18446744073709551616,"m":-9223372036854775809,"k":9223372036854775807}',
        b'{"label":"1234567890123456789012","x":1}',
        b'{"a":1,"a":2,"e":"\\u0000\\n","big":1e400,"tiny":1.5e-400}',
        b'\xef\xbb\xbf{"bom":true}',
        b' [1, {"b": null}] \n',
    ],
)
def test_a_body_decodes_to_what_json_reads(body: bytes) -> None:
    got, expected = _decoded(body), json.loads(body)
    assert json.dumps(got) == json.dumps(expected)
    assert [type(v) for v in _leaves(got)] == [type(v) for v in _leaves(expected)]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_a_lone_surrogate_escape_is_mended_and_nan_refused() -> None:
    assert _decoded(b'{"a":"x\\ud800y"}') == {"a": "x\ufffdy"}
    with pytest.raises(BadRequest):
        _decoded(b'{"a":NaN}')


@pytest.mark.parametrize(
    "body",
    [
        b'{"metadata":{"name":"p","labels":{"app":"caf\xc3\xa9"}},"spec":{"n":-0,"f":0.1}}',
        b'{"n":18446744073709551616,"list":[{"k":9223372036854775807}]}',
    ],
)
def test_a_body_is_cloned_equal_and_apart(body: bytes) -> None:
    original = _decoded(body)
    copied = clone(original)
    assert json.dumps(copied) == json.dumps(original)
    assert [type(v) for v in _leaves(copied)] == [type(v) for v in _leaves(original)]
    next(v for v in copied.values() if isinstance(v, dict | list)).clear()
    assert json.dumps(original) == json.dumps(_decoded(body))
