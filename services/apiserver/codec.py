"""Request bodies in, JSON responses out: the apiserver's only serialisation code.

Why: every handler needs the same decisions — which content types a body may have, how big it
may be, what a malformed body answers — and Kubernetes makes them the same way everywhere. This
module owns them so a bad body gets the same ``Status`` from every endpoint.

What it owns:
* ``read_object`` / ``read_patch``: read a request body (at most ``MAX_BODY_BYTES``, else 413
  ``RequestEntityTooLarge``), decode JSON or YAML objects (415 for other media types, 400 for
  malformed input or a body that is not an object), and patch bodies by their patch content type.
  Lone UTF-16 surrogates in strings are read as U+FFFD, as Go's decoder reads them.
* ``json_response`` / ``dumps``: compact JSON with ``Content-Type: application/json`` whatever the
  client asked for (protobuf-preferring clients accept JSON, as they do from a real apiserver).
  Each response body ends with a newline, as kube-apiserver's (Go's ``json.Encoder.Encode``
  appends one; some clients compare bodies as text).

Bodies never stall the event loop for long:
* YAML aliases are refused past go-yaml's limit ("document contains excessive aliasing": once
  over 100 alias-driven decodes and 1,000 decodes in all, at most 99% of the decodes may come
  from aliases, falling linearly to 10% between 400,000 and 4,000,000 decodes), checked on the
  composed node graph before anything is built, so a 529-byte billion-laughs body costs about a
  thousand node visits and answers 400 — the work per body is bounded by its size.
* bodies over ``INLINE_DECODE_BYTES`` are decoded on a two-thread executor (``_DECODER``), so a
  3 MiB YAML document (pure-Python PyYAML: seconds) yields the loop to other requests while it
  is parsed; at most two such decodes run at once, the rest wait their turn.

Protobuf object bodies are decoded by ``services.apiserver.protobuf``.

Limits: no protobuf responses or patches, no CBOR (``application/apply-patch+cbor`` is a 415);
YAML bodies hold one document. A decode in a thread
is not interrupted when its client goes away; it finishes (bounded, as above) and is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import enum
import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import yaml
from aiohttp import web

from api.errors import BadRequest, RequestEntityTooLarge, UnsupportedMediaType
from services.apiserver import protobuf

__all__ = [
    "JSON_CONTENT_TYPE",
    "MAX_BODY_BYTES",
    "REQUEST_BODY",
    "PatchType",
    "clone",
    "dumps",
    "dumps_kept",
    "json_response",
    "read_object",
    "read_patch",
]

MAX_BODY_BYTES = 3 * 1024 * 1024
"""Kubernetes' own request body limit (``MaxRequestBodyBytes``, 3 MiB)."""

JSON_CONTENT_TYPE = "application/json"

_OBJECT_TYPES = ("application/json", "application/yaml", "application/x-yaml", "text/yaml", "")
_OBJECT_ACCEPTED = "application/json, application/yaml, application/vnd.kubernetes.protobuf"


class PatchType(enum.StrEnum):
    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"
    """Server-side apply: the body is the manager's whole configuration (YAML or JSON)."""


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes, the one encoding used on the wire and in the store.

    orjson does it 5x faster than ``json``, and every object written, listed or watched passes
    here. It refuses integers past 64 bits; those few bodies go through ``json`` (Kubernetes
    itself reads such numbers back as floats, as ``loads`` does).
    """
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def dumps_kept(obj: Any) -> bytes:
    """``dumps`` for bytes that are kept (the watch cache's objects, stored values).

    orjson returns its output in the buffer it grew while writing (4 KiB for a 1 KiB pod's
    JSON); a copy of exactly the JSON's size costs a fraction of a microsecond and gives the
    rest back — held for every cached object, that slack more than doubled the cache's memory.
    """
    return bytes(memoryview(dumps(obj)))


def loads(data: bytes | str) -> Any:
    """Parse JSON this server wrote (stored values, cached events): orjson's speed."""
    return orjson.loads(data)


def clone(value: Any) -> Any:
    """A deep copy of a decoded JSON value (a request body a write may try more than once),
    through orjson: about six times faster than ``copy.deepcopy`` for a pod. A value orjson
    cannot write as it is (an integer past 64 bits) is copied by ``copy.deepcopy``."""
    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:
        return copy.deepcopy(value)


def json_response(
    obj: Any, *, status: int = 200, content_type: str = JSON_CONTENT_TYPE
) -> web.Response:
    """``obj`` as a response body ending in a newline, as kube-apiserver's encoder writes it."""
    return web.Response(
        body=dumps(obj) + b"\n", status=status, headers={"Content-Type": content_type}
    )


REQUEST_BODY: web.RequestKey[bytes] = web.RequestKey("request_body", bytes)
"""Where the body read is left on the request as JSON, as the client sent it (before any
defaulting): the audit log's requestObject. ``read_object`` re-encodes YAML and protobuf."""


async def read_body(request: web.Request) -> bytes:
    """The raw body, refused with 413 past ``MAX_BODY_BYTES`` without buffering all of it.

    It is also kept on the request under ``REQUEST_BODY``.
    """
    length = request.content_length
    if length is not None and length > MAX_BODY_BYTES:
        raise _too_large()
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.read(64 * 1024)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        chunks.append(chunk)
    body = request[REQUEST_BODY] = b"".join(chunks)
    return body


def _too_large() -> RequestEntityTooLarge:
    return RequestEntityTooLarge(f"Request entity too large: limit is {MAX_BODY_BYTES}")


def _media_type(request: web.Request) -> str:
    raw = request.headers.get("Content-Type", "")
    return raw.split(";", 1)[0].strip().lower()


INLINE_DECODE_BYTES = 16 * 1024
"""Bodies up to this size are decoded on the event loop (well under a millisecond as JSON, a few
as YAML); larger ones go to ``_DECODER``."""

_DECODER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="apiserver-body-decode")
"""Decodes large bodies off the event loop; two workers, so big bodies queue instead of piling up
threads (the GIL lets the loop run between the decoder's time slices)."""


async def decode_body(body: bytes, *, media_type: str) -> Any:
    """``decode_document`` for a request: large bodies are decoded off the event loop."""
    if len(body) <= INLINE_DECODE_BYTES:
        return decode_document(body, media_type=media_type)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        _DECODER, lambda: decode_document(body, media_type=media_type)
    )


def decode_document(body: bytes, *, media_type: str) -> Any:
    """Decode one JSON or YAML document; 400 for malformed input."""
    if not body.strip():
        raise BadRequest("the request body is empty: an object is required")
    if media_type in ("", JSON_CONTENT_TYPE) or media_type.endswith("+json"):
        if not _NOT_FOR_ORJSON.search(body):
            with contextlib.suppress(orjson.JSONDecodeError):
                return orjson.loads(body)
        try:
            value = json.loads(body, parse_constant=_no_constants)
            if _SURROGATE_ESCAPE.search(body):
                value = _without_lone_surrogates(value)
            return value
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            if media_type and media_type != JSON_CONTENT_TYPE:
                raise BadRequest(f"error decoding patch: {exc}") from None
            # A body without a content type may still be YAML (as kubectl's PUT .../scale sends none).
            if media_type:
                raise BadRequest(f"error decoding JSON: {exc}") from None
    try:
        docs = [d for d in _load_yaml_documents(body) if d is not None]
        if len(docs) != 1:
            raise BadRequest(f"expected one YAML document in the request body, found {len(docs)}")
        return _as_json(docs[0], path="")
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        raise BadRequest(f"error decoding YAML: {_one_line(exc)}") from None


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_NOT_FOR_ORJSON = re.compile(rb"\\u[dD][89a-fA-F]|[0-9]{19}")
"""What orjson would read otherwise than ``json`` (a surrogate escape, which the slow path
mends; a number of 19 digits or more, beyond 64 bits, which orjson turns into a float): such
a body — and any orjson refuses (a BOM, ``1e400``) — takes the ``json`` path, so every body
decodes to what ``json`` gives, most of them five times faster."""
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(value: Any) -> Any:
    """Lone UTF-16 surrogates (``"\\ud800"`` alone) as U+FFFD, as Go's JSON decoder reads them:
    such strings cannot be encoded as UTF-8, so they could be neither stored nor sent back."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    return value


def _load_yaml_documents(body: bytes) -> list[Any]:
    """``yaml.load_all`` with go-yaml's aliasing limit checked on each node graph first."""
    loader = _JsonishLoader(body)
    try:
        documents = []
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                break
            _check_aliasing(node)
            documents.append(loader.construct_document(node))
        return documents
    finally:
        loader.dispose()


_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000


def _allowed_alias_ratio(decodes: int) -> float:
    """go-yaml's share of decodes that may come from aliases: 99% for small documents, 10% for
    huge ones, falling linearly in between."""
    if decodes <= _ALIAS_RATIO_LOW:
        return 0.99
    if decodes >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decodes - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def _check_aliasing(root: yaml.Node) -> None:
    """400 when expanding ``root``'s aliases would be mostly alias work (see the docstring).

    Walks the node graph in document order as the decoder will expand it (an alias is the same
    node object reached again), counting every visit and the visits made under an alias, and
    stops at go-yaml's limit. A self-referencing anchor expands only through aliases, so it trips
    the same limit.
    """
    seen: set[int] = set()
    decodes = aliased = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, under_alias = stack.pop()
        if not under_alias and id(node) in seen:
            under_alias = True
        seen.add(id(node))
        decodes += 1
        if under_alias:
            aliased += 1
        if aliased > 100 and decodes > 1000 and aliased / decodes > _allowed_alias_ratio(decodes):
            raise BadRequest("error decoding YAML: yaml: document contains excessive aliasing")
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, under_alias) for child in reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack.append((value, under_alias))
                stack.append((key, under_alias))


class _JsonishLoader(yaml.SafeLoader):
    """``SafeLoader`` that leaves timestamps as strings, as Kubernetes' YAML-to-JSON step does."""


_JsonishLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _as_json(value: Any, *, path: str) -> Any:
    """Map a YAML value onto JSON: keys become strings; anything JSON cannot hold is a 400."""
    if isinstance(value, dict):
        return {
            _without_lone_surrogates(str(k)): _as_json(v, path=f"{path}.{k}")
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_as_json(v, path=f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise BadRequest(f"error decoding YAML: {path.lstrip('.')}: {value} is not a JSON number")
    if isinstance(value, str):
        return _without_lone_surrogates(value)
    if value is None or isinstance(value, int | float | bool):
        return value
    raise BadRequest(
        f"error decoding YAML: {path.lstrip('.')}: a {type(value).__name__} has no JSON form"
    )


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


async def read_object(request: web.Request) -> dict[str, Any]:
    """The request body as an object (JSON, YAML or protobuf); 413/415/400 as Kubernetes does."""
    media_type = _media_type(request)
    if media_type == protobuf.CONTENT_TYPE:  # kubectl >= 1.32's typed clients
        decoded = protobuf.decode_object(await read_body(request))
        request[REQUEST_BODY] = dumps(decoded)
        return decoded
    if media_type not in _OBJECT_TYPES:
        raise UnsupportedMediaType(
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{_OBJECT_ACCEPTED}"
        )
    body = await read_body(request)
    obj = await decode_body(body, media_type=media_type)
    if media_type != JSON_CONTENT_TYPE:
        request[REQUEST_BODY] = dumps(obj)
    if not isinstance(obj, dict):
        raise BadRequest(
            f"the request body must be an object, not {_json_type(obj)}",
        )
    return obj


async def read_patch(request: web.Request) -> tuple[PatchType, Any]:
    """The patch type (from ``Content-Type``) and the decoded patch document."""
    media_type = _media_type(request)
    try:
        patch_type = PatchType(media_type)
    except ValueError:
        raise UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(p.value for p in PatchType)
        ) from None
    body = await read_body(request)
    doc = await decode_body(body, media_type=media_type)
    # a JSON patch's shape is checked where it is applied (api.patches.jsonpatch), in Go's words
    if patch_type is not PatchType.JSON and not isinstance(doc, dict):
        raise BadRequest(f"the patch must be a JSON object, not {_json_type(doc)}")
    return patch_type, doc


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return type(value).__name__
