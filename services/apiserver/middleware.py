"""The error middleware: every failure leaves the server as a Kubernetes ``Status`` body.

Why: clients (kubectl, client-go, the official Python client, our own ``client/``) decode error
bodies as ``Status`` and key on ``reason`` and ``code``. Handlers raise ``api.errors``
exceptions; this middleware renders them. aiohttp's own refusals (no such route, wrong method,
body too large) are re-worded as the Status Kubernetes sends for the same case. Anything else is
a bug: it is logged with its traceback and answered 500 ``InternalError``, and the server keeps
serving.

Limits: a failure after a streaming response (a watch) has started cannot change its status
line; the watch handler ends such streams itself.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
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

__all__ = ["status_errors", "status_response"]

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
