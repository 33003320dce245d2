"""What an apiserver answer means to the client: decoded bodies, typed errors, retry hints.

Why a module of its own: the apiserver answers errors with Kubernetes ``Status`` bodies; turning
them back into the typed errors of ``api.errors`` (``NotFound``, ``Conflict``, ``Expired``,
``TooManyRequests``, ...) is the same for plain requests and for watch openings, and so is
reading how long the server asks the client to wait.

What it owns: ``ApiUnreachable`` (no HTTP answer at all), ``decode_body`` (JSON, else text),
``error_from`` (a ``StatusError`` from any error answer, ``Status`` body or not) and
``retry_after`` (``Retry-After`` header, else ``details.retryAfterSeconds``, capped).

What it does not guarantee: a non-``Status`` error body is kept only as the first 500
characters of its text.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from api.errors import StatusError, from_status
from client import codec

__all__ = ["MAX_RETRY_AFTER", "ApiUnreachable", "decode_body", "error_from", "retry_after"]

MAX_RETRY_AFTER = 30.0
"""The longest wait a server's retry hint can impose, in seconds."""


class ApiUnreachable(ConnectionError):
    """The request did not get an HTTP answer (refused, reset, timed out)."""


def decode_body(payload: bytes, content_type: str) -> Any:
    """The decoded JSON of a success answer, or its text; ``{}`` for an empty one."""
    if not payload:
        return {}
    if "json" in content_type:
        return codec.loads(payload)
    return payload.decode("utf-8", errors="replace")


def error_from(code: int, payload: bytes, content_type: str) -> StatusError:
    """The typed error of an answer with status ``code`` >= 400."""
    body: Any = None
    if payload and "json" in content_type:
        try:
            body = codec.loads(payload)
        except ValueError:
            body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return from_status(body, http_code=code)
    text = payload.decode("utf-8", errors="replace").strip()[:500]
    return from_status({"code": code, "message": text or f"HTTP {code}"}, http_code=code)


def retry_after(resp: aiohttp.ClientResponse, error: StatusError) -> float | None:
    """Seconds the server asks to wait before retrying, if it says, within 0..MAX_RETRY_AFTER."""
    header = resp.headers.get("Retry-After")
    seconds: float | None = None
    if header:
        try:
            seconds = float(header)
        except ValueError:
            seconds = None
    if seconds is None and error.retry_after_seconds is not None:
        seconds = float(error.retry_after_seconds)
    return None if seconds is None else min(max(seconds, 0.0), MAX_RETRY_AFTER)
