"""JSON in and out of the client: request bodies, answers and watch lines.

Why: every component spends much of its CPU reading JSON — each pod event of every watch, each
answer to a write — and writing request bodies (the 1,000-pod bench's profiles: ``json``
decoding was 10-19% of the kubelet, scheduler and controller-manager). orjson does both several
times faster than the standard library, and the apiserver already writes with it
(``services.apiserver.codec``), so the client reads and writes the same way.

What it owns: ``dumps`` (compact JSON bytes, non-ASCII kept as UTF-8 as Go's encoder does) and
``loads`` (bytes or text to Python values).

What it does not guarantee: the bytes are not those of ``json.dumps`` (no ``\\uXXXX`` escapes;
the same JSON). An integer past 64 bits is read as a float, as the apiserver's codec and
Kubernetes' own JSON decoding read it; writing one, a non-string key or a lone UTF-16 surrogate
falls back to ``json`` (ASCII with ``\\u`` escapes, as the client wrote everything before).
Text orjson refuses (NaN literals, lone UTF-16 surrogates) is read by ``json``, so nothing that
decoded before fails now; what neither reads raises ``ValueError`` (``json.JSONDecodeError``).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps", "loads"]


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes of ``obj``."""
    try:
        return orjson.dumps(obj)
    except TypeError:  # an integer past 64 bits, a non-str key, a lone surrogate: the slow path
        return json.dumps(obj, separators=(",", ":")).encode()  # ASCII, surrogates as escapes


def loads(data: bytes | str) -> Any:
    """The value of one JSON document."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # raises the same kind of error when it is not JSON at all
