"""The one error tree of kubelite, each error mapped to one Kubernetes ``Status``.

Every failure that reaches a client is one of these, rendered as a ``Status`` body with the
reason and HTTP code Kubernetes uses for the same situation, so ``kubectl`` prints
``Error from server (NotFound): pods "demo" not found`` exactly as it would against a real
cluster. The client side maps ``Status`` bodies back to the same classes (``from_status``),
so code on both ends of the wire catches the same exception types.

``StatusError`` is the root. Handlers raise; one middleware turns the exception into a body.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AlreadyExists",
    "BadRequest",
    "Cause",
    "Conflict",
    "Expired",
    "Forbidden",
    "InternalError",
    "Invalid",
    "MethodNotAllowed",
    "NotAcceptable",
    "NotFound",
    "RequestEntityTooLarge",
    "ServiceUnavailable",
    "StatusError",
    "Timeout",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
    "from_status",
]

Cause = dict[str, str]
"""A ``details.causes`` entry: ``{"reason": ..., "message": ..., "field": ...}``."""


class StatusError(Exception):
    """Root of the tree: an error that has a Kubernetes ``Status`` rendering."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"
    always_details: ClassVar[bool] = False
    """Whether the body carries ``details`` even when empty (as Kubernetes' constructor does)."""

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        group: str | None = None,
        causes: list[Cause] | None = None,
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.name = name
        self.group = group
        self.causes = list(causes or [])
        self.retry_after_seconds = retry_after_seconds

    def to_status(self) -> dict[str, Any]:
        """The ``Status`` body Kubernetes sends for this error, fields in its wire order.

        kube-apiserver encodes ``metav1.Status`` with Go's encoder, which emits struct fields in
        declaration order (kind, apiVersion, metadata, status, message, reason, details, code)
        and drops ``details`` only when the pointer is nil. Errors built by apimachinery's
        ``NewNotFound``, ``NewConflict``, ``NewInvalid``, ``NewForbidden`` ... always carry
        details, if only ``{}`` (``always_details``); kubectl dereferences them (``debug``
        reads ``details.name`` of a 404). ``NewBadRequest``, ``NewResourceExpired`` and the
        like carry none unless there is something in them.
        """
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = self.causes
        if self.retry_after_seconds:
            details["retryAfterSeconds"] = self.retry_after_seconds
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if details or self.always_details:
            body["details"] = details
        body["code"] = self.code
        return body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class BadRequest(StatusError):
    code, reason = 400, "BadRequest"


class Unauthorized(StatusError):
    code, reason = 401, "Unauthorized"


class Forbidden(StatusError):
    code, reason = 403, "Forbidden"
    always_details = True


class NotFound(StatusError):
    code, reason = 404, "NotFound"
    always_details = True

    @classmethod
    def of(cls, resource: str, name: str, *, group: str = "") -> NotFound:
        """``pods "demo" not found`` — ``resource`` is the plural (``pods``), as Kubernetes says it."""
        qualified = f"{resource}.{group}" if group else resource
        return cls(f'{qualified} "{name}" not found', kind=resource, name=name, group=group or None)


class MethodNotAllowed(StatusError):
    code, reason = 405, "MethodNotAllowed"
    always_details = True


class NotAcceptable(StatusError):
    code, reason = 406, "NotAcceptable"


class AlreadyExists(StatusError):
    code, reason = 409, "AlreadyExists"
    always_details = True

    @classmethod
    def of(cls, resource: str, name: str, *, group: str = "") -> AlreadyExists:
        qualified = f"{resource}.{group}" if group else resource
        return cls(
            f'{qualified} "{name}" already exists', kind=resource, name=name, group=group or None
        )


class Conflict(StatusError):
    code, reason = 409, "Conflict"
    always_details = True

    @classmethod
    def of(
        cls, resource: str, name: str, *, group: str = "", detail: str | None = None
    ) -> Conflict:
        qualified = f"{resource}.{group}" if group else resource
        detail = detail or (
            "the object has been modified; please apply your changes to the latest version and try again"
        )
        return cls(
            f'Operation cannot be fulfilled on {qualified} "{name}": {detail}',
            kind=resource,
            name=name,
            group=group or None,
        )


class Expired(StatusError):
    """410: the resourceVersion asked for is older than the retained history."""

    code, reason = 410, "Expired"


class RequestEntityTooLarge(StatusError):
    code, reason = 413, "RequestEntityTooLarge"


class UnsupportedMediaType(StatusError):
    code, reason = 415, "UnsupportedMediaType"


class Invalid(StatusError):
    """422: the object failed validation; ``causes`` name the fields."""

    code, reason = 422, "Invalid"
    always_details = True

    @classmethod
    def of(cls, kind: str, name: str, causes: list[Cause], *, group: str = "") -> Invalid:
        """``Pod "demo" is invalid: spec.containers[0].image: Required value`` — ``kind`` is the Kind."""
        qualified = f"{kind}.{group}" if group else kind
        parts = [
            f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes
        ]
        summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
        return cls(
            f'{qualified} "{name}" is invalid: {summary}',
            kind=kind,
            name=name,
            group=group or None,
            causes=causes,
        )


class TooManyRequests(StatusError):
    code, reason = 429, "TooManyRequests"
    always_details = True


class InternalError(StatusError):
    code, reason = 500, "InternalError"
    always_details = True


class ServiceUnavailable(StatusError):
    code, reason = 503, "ServiceUnavailable"


class Timeout(StatusError):
    code, reason = 504, "Timeout"
    always_details = True


_BY_REASON: dict[str, type[StatusError]] = {
    cls.reason: cls
    for cls in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        AlreadyExists,
        Conflict,
        Expired,
        RequestEntityTooLarge,
        UnsupportedMediaType,
        Invalid,
        TooManyRequests,
        InternalError,
        ServiceUnavailable,
        Timeout,
    )
}
_BY_CODE: dict[int, type[StatusError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    406: NotAcceptable,
    409: Conflict,
    410: Expired,
    413: RequestEntityTooLarge,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    503: ServiceUnavailable,
    504: Timeout,
}


def from_status(body: dict[str, Any], *, http_code: int | None = None) -> StatusError:
    """Turn a ``Status`` body (from the wire or a watch ``ERROR`` event) back into an exception.

    The reason picks the class; a missing or unknown reason falls back to the HTTP code.
    ``Gone`` (the older spelling of a 410) maps to ``Expired`` as client-go treats both alike.
    """
    reason = str(body.get("reason") or "")
    code = int(body.get("code") or http_code or 500)
    if reason == "Gone":
        reason = "Expired"
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or InternalError
    details = body.get("details") or {}
    err = cls(
        str(body.get("message") or reason or f"HTTP {code}"),
        kind=details.get("kind"),
        name=details.get("name"),
        group=details.get("group"),
        causes=details.get("causes"),
        retry_after_seconds=details.get("retryAfterSeconds"),
    )
    return err
