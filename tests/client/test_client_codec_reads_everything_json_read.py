"""The client's JSON codec (orjson) reads and writes what ``json`` did, with its documented
differences: wider integers come back as floats, as the apiserver's codec reads them."""

import json

import pytest

from client import codec


def test_round_trips_a_pod_compactly_keeping_non_ascii() -> None:
    pod = {"metadata": {"name": "web", "labels": {"app": "café"}}, "spec": {"replicas": 3}}
    data = codec.dumps(pod)
    assert data == json.dumps(pod, separators=(",", ":"), ensure_ascii=False).encode()
    assert codec.loads(data) == pod


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a":"\\ud800"}', {"a": "\ud800"}),  # a lone surrogate: json reads it, orjson not
        ('{"a":NaN}', {"a": float("nan")}),
    ],
)
def test_falls_back_to_json_for_what_orjson_refuses(text: str, expected: dict[str, object]) -> None:
    got = codec.loads(text.encode())
    assert json.dumps(got) == json.dumps(expected)


def test_integers_past_64_bits_read_as_floats_and_write_exactly() -> None:
    assert codec.loads(b"18446744073709551616") == float(2**64)
    assert codec.dumps({"n": 2**70}) == b'{"n":1180591620717411303424}'
    assert codec.dumps({1: "x"}) == b'{"1":"x"}'


def test_a_lone_surrogate_is_written_escaped_as_json_writes_it() -> None:
    assert codec.dumps({"a": "\ud800"}) == b'{"a":"\\ud800"}'
    assert codec.loads(codec.dumps({"a": "\ud800"})) == {"a": "\ud800"}


def test_not_json_raises_value_error() -> None:
    with pytest.raises(ValueError):
        codec.loads(b"{not json")
