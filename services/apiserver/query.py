"""The query parameters of list, watch and delete requests, parsed and checked once.

Why: ``watch``, ``resourceVersion``, ``resourceVersionMatch``, ``limit``, ``continue``,
``timeoutSeconds``, ``allowWatchBookmarks`` and ``sendInitialEvents`` interact (a continue token
forbids a resourceVersion, ``sendInitialEvents`` needs ``resourceVersionMatch=NotOlderThan`` ...).
Kubernetes refuses the bad combinations with 400s; this module does the same in one place, and
owns the continue token (opaque base64 JSON of the list revision and the last key returned).

Numbers are read as Go's ``strconv`` reads them: ASCII digits with an optional sign, within
64 bits (else 400, never an overflow further down). A ``limit`` past ``MAX_LIMIT`` is read as
``MAX_LIMIT`` and a ``timeoutSeconds`` past ``MAX_TIMEOUT_SECONDS`` as that: no store holds more
objects, and no watch outlives its process. The continue token is checked field by field (its
version, an integer revision, a string start key) before it is believed.

Limits: unknown parameters are ignored (``timeout``, ``fieldManager``, ``fieldValidation``,
``pretty`` — accepted and without effect), as Kubernetes ignores parameters it does not use.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from multidict import MultiMapping

from api.errors import BadRequest
from api.registry import ResourceType
from services.apiserver.predicate import Predicate

__all__ = [
    "EXACT",
    "MAX_LIMIT",
    "MAX_TIMEOUT_SECONDS",
    "NOT_OLDER_THAN",
    "ContinueToken",
    "ListOptions",
    "parse_bool",
    "parse_revision",
    "query_flag",
]

NOT_OLDER_THAN = "NotOlderThan"
EXACT = "Exact"


def parse_bool(raw: str | None, *, name: str) -> bool | None:
    """Go's ``strconv.ParseBool``: 1/t/T/TRUE/true/True and 0/f/F/FALSE/false/False."""
    if raw is None or raw == "":
        return None
    if raw in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if raw in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise BadRequest(
        f'invalid value for {name}: strconv.ParseBool: parsing "{raw}": invalid syntax'
    )


def query_flag(raw: str | None) -> bool:
    """A boolean query parameter as Kubernetes' parameter codec reads ``force`` and ``watch``
    (``Convert_Slice_string_To_bool``): absent, ``0`` and ``false`` in any case are false;
    anything else is true — ``True`` as Python clients (kubernetes_asyncio) send it, even empty."""
    return raw is not None and raw != "0" and raw.lower() != "false"


INT64_MAX = 2**63 - 1

MAX_LIMIT = 2**31 - 1
"""The largest page size acted upon; a larger ``limit`` means the same (no store holds more)."""

MAX_TIMEOUT_SECONDS = 2**31 - 1
"""The longest watch timeout acted upon (68 years); larger values would overflow loop timers."""

_DECIMAL = re.compile(r"[+-]?[0-9]+")
_UNSIGNED = re.compile(r"[0-9]+")


def _parse_int(raw: str | None, *, name: str) -> int | None:
    """Go's ``strconv.ParseInt(raw, 10, 64)``: 400 for anything else, as Kubernetes answers."""
    if raw is None or raw == "":
        return None
    if not _DECIMAL.fullmatch(raw):
        raise BadRequest(
            f"invalid value for {name}: strconv.ParseInt: parsing {_go_quote(raw)}: invalid syntax"
        )
    value = _to_int(raw)
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise BadRequest(
            f"invalid value for {name}: strconv.ParseInt: parsing {_go_quote(raw)}: "
            "value out of range"
        )
    return value


def _to_int(digits: str) -> int:
    """``int(digits)`` for a ``_DECIMAL`` match, saturated past 64 bits (Python refuses to
    convert strings of over 4,300 digits, and nothing here needs the exact value)."""
    if len(digits.lstrip("+-").lstrip("0")) > 19:
        return -(INT64_MAX + 2) if digits.startswith("-") else INT64_MAX + 1
    return int(digits)


def _go_quote(raw: str) -> str:
    """``raw`` quoted for a message (JSON escapes, so NULs and newlines stay visible)."""
    return json.dumps(raw[:64] + ("..." if len(raw) > 64 else ""))


def parse_revision(raw: str) -> int:
    """A resourceVersion as the store revision it names; 400 if it is not one of ours."""
    if not _UNSIGNED.fullmatch(raw) or _to_int(raw) > INT64_MAX:
        raise BadRequest(f"invalid resource version: {_go_quote(raw)}")
    return int(raw)


@dataclass(frozen=True, slots=True)
class ContinueToken:
    revision: int
    start_after: str

    def encode(self) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": self.revision, "start": self.start_after})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> ContinueToken:
        """The token a list handed out; 400 for anything else, whatever it holds."""
        try:
            padded = token + "=" * (-len(token) % 4)
            data: Any = json.loads(base64.urlsafe_b64decode(padded.encode()))
        except (binascii.Error, ValueError, UnicodeError, RecursionError):
            raise BadRequest("continue key is not valid: invalid continue token") from None
        if not isinstance(data, dict) or data.get("v") != "meta.k8s.io/v1":
            raise BadRequest(
                "continue key is not valid: server does not recognize this encoded key"
            )
        revision, start = data.get("rv"), data.get("start")
        if type(revision) is not int or not 1 <= revision <= INT64_MAX:
            raise BadRequest(
                "continue key is not valid: incorrect encoded start resourceVersion "
                "(version meta.k8s.io/v1)"
            )
        if not isinstance(start, str) or not start or not _storable(start):
            raise BadRequest(
                "continue key is not valid: encoded start key empty or malformed "
                "(version meta.k8s.io/v1)"
            )
        return cls(revision=revision, start_after=start)


def _storable(key: str) -> bool:
    """A key a store can compare: UTF-8 encodable (no lone surrogates) and without NULs."""
    if "\x00" in key:
        return False
    try:
        key.encode()
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class ListOptions:
    predicate: Predicate
    watch: bool = False
    resource_version: str = ""
    resource_version_match: str = ""
    limit: int = 0
    continue_token: ContinueToken | None = None
    timeout_seconds: int | None = None
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None
    include_object: str = "Metadata"

    @classmethod
    def parse(
        cls, query: MultiMapping[str], rt: ResourceType, *, namespace: str | None
    ) -> ListOptions:
        predicate = Predicate.parse(
            rt,
            namespace=namespace,
            label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""),
        )
        watch = bool(parse_bool(query.get("watch"), name="watch"))
        rv = query.get("resourceVersion", "")
        match = query.get("resourceVersionMatch", "")
        limit = min(max(_parse_int(query.get("limit"), name="limit") or 0, 0), MAX_LIMIT)
        raw_continue = query.get("continue", "")
        timeout = _parse_int(query.get("timeoutSeconds"), name="timeoutSeconds")
        if timeout is not None:
            timeout = min(timeout, MAX_TIMEOUT_SECONDS)
        bookmarks = bool(parse_bool(query.get("allowWatchBookmarks"), name="allowWatchBookmarks"))
        initial = parse_bool(query.get("sendInitialEvents"), name="sendInitialEvents")
        include_object = query.get("includeObject", "Metadata") or "Metadata"
        if include_object not in ("None", "Metadata", "Object"):
            raise BadRequest(f'includeObject: Unsupported value: "{include_object}"')

        if rv:
            parse_revision(rv)
        if match not in ("", NOT_OLDER_THAN, EXACT):
            raise BadRequest(
                f'resourceVersionMatch: Unsupported value: "{match}": supported values: '
                '"Exact", "NotOlderThan"'
            )
        token: ContinueToken | None = None
        if watch:
            if match and not initial:
                raise BadRequest(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
                    "unless sendInitialEvents is provided"
                )
            if initial is not None and match != NOT_OLDER_THAN:
                raise BadRequest(
                    "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                    "resourceVersionMatch to NotOlderThan"
                )
        else:
            if initial is not None:
                raise BadRequest(
                    "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
                )
            if match and not rv:
                raise BadRequest(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
                    "resourceVersion is provided"
                )
            if match == EXACT and rv == "0":
                raise BadRequest(
                    'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
                    'resourceVersion "0"'
                )
            if raw_continue:
                if rv and rv != "0":
                    raise BadRequest(
                        "resourceVersion: Forbidden: specifying resource version is not allowed "
                        "when using continue"
                    )
                if match:
                    raise BadRequest(
                        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when "
                        "continue is provided"
                    )
                token = ContinueToken.decode(raw_continue)
        return cls(
            predicate=predicate,
            watch=watch,
            resource_version=rv,
            resource_version_match=match,
            limit=limit,
            continue_token=token,
            timeout_seconds=timeout,
            allow_watch_bookmarks=bookmarks,
            send_initial_events=initial,
            include_object=include_object,
        )
