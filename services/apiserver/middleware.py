"""The error middleware: every failure leaves the server as a Kubernetes ``Status`` body.

Why: clients (kubectl, client-go, the official Python client, our own ``client/``) decode error
bodies as ``Status`` and key on ``reason`` and ``code``. Handlers raise ``api.errors``
exceptions; this middleware renders them. aiohttp's own refusals (no such route, wrong method,
body too large) are re-worded as the Status Kubernetes sends for the same case. Anything else is
a bug: it is logged with its traceback and answered 500 ``InternalError``, and the server keeps
serving.

Requests aiohttp's HTTP parser refuses (a NUL in the request line, a line or header past its
limits, garbage) never reach a handler: aiohttp answers 400 itself and logs an ERROR with a
traceback on ``aiohttp.server`` for each. A traceback per malformed request is a log flood
anyone can cause, and no bug of ours; ``log_malformed_requests`` (installed for the app's
lifetime) rewrites those records into one WARNING line naming the client and the problem.
Other records of that logger are left alone.

Limits: a failure after a streaming response (a watch) has started cannot change its status
line; the watch handler ends such streams itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler

from api.errors import (
    InternalError,
    MethodNotAllowed,
    NotFound,
    RequestEntityTooLarge,
    StatusError,
    from_status,
)
from services.apiserver.codec import MAX_BODY_BYTES, json_response

__all__ = ["log_malformed_requests", "status_errors", "status_response"]

log = logging.getLogger(__name__)


def status_response(err: StatusError) -> web.Response:
    response = json_response(err.to_status(), status=err.code)
    if err.retry_after_seconds is not None:
        response.headers["Retry-After"] = str(err.retry_after_seconds)
    return response


def _from_http(exc: web.HTTPException) -> StatusError:
    if exc.status == 404:
        return NotFound("the server could not find the requested resource")
    if exc.status == 405:
        return MethodNotAllowed("the server does not allow this method on the requested resource")
    if exc.status == 413:
        return RequestEntityTooLarge(f"Request entity too large: limit is {MAX_BODY_BYTES}")
    return from_status(
        {"code": exc.status, "message": exc.text or exc.reason}, http_code=exc.status
    )


@web.middleware
async def status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except StatusError as err:
        return status_response(err)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return status_response(_from_http(exc))
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("%s %s failed with an internal error", request.method, request.path_qs)
        return status_response(InternalError(f"Internal error occurred: {exc!r}"))


class _MalformedRequestLine(logging.Filter):
    """Turns aiohttp's ERROR-with-traceback for an unparseable request into one WARNING line."""

    def __init__(self) -> None:
        super().__init__()
        self.users = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        client = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
        problem = " ".join(str(exc.message).split())
        if len(problem) > 200:
            problem = problem[:200] + "..."
        record.msg = "refused a malformed HTTP request from %s with 400: %s"
        record.args = (client, problem)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text = None, None
        return True


_MALFORMED = _MalformedRequestLine()
_AIOHTTP_SERVER_LOG = logging.getLogger("aiohttp.server")


async def log_malformed_requests(app: web.Application) -> AsyncIterator[None]:
    """``cleanup_ctx``: the filter above on ``aiohttp.server`` while any apiserver app runs."""
    _MALFORMED.users += 1
    _AIOHTTP_SERVER_LOG.addFilter(_MALFORMED)
    try:
        yield
    finally:
        _MALFORMED.users -= 1
        if not _MALFORMED.users:
            _AIOHTTP_SERVER_LOG.removeFilter(_MALFORMED)
