"""Reading a Kubernetes watch stream: chunked NDJSON in, typed events out.

Why: a watch response is ``Transfer-Encoding: chunked``, one JSON object per line, for as long
as the server keeps it open. aiohttp's line iteration gives up on lines over 128 KiB (a pod
with a large annotation or a ConfigMap easily exceeds it), so this module reads raw chunks and
splits lines itself, with no limit but ``max_line_bytes`` (64 MiB: far beyond any object an
apiserver accepts, small enough to stop a runaway stream).

What it owns:

* ``split_lines(chunks)``: bytes chunks -> complete lines, however the chunks cut them;
* ``parse_event(line)``: one line -> ``WatchEvent`` (ADDED, MODIFIED, DELETED, BOOKMARK), or
  raises the typed ``StatusError`` an ``ERROR`` event carries (410 -> ``Expired``);
* ``WatchStream``: an async iterator (and async context manager) over one HTTP response.

What it does not do: reconnect, resume or relist — the reflector decides that. A stream that
ends cleanly (the server's ``timeoutSeconds``) just stops iterating; one cut mid-line raises
``StreamTruncated`` (a ``ConnectionError``), as does a broken connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

import aiohttp

from api.errors import StatusError, from_status
from client import codec

__all__ = [
    "EventType",
    "StreamTruncated",
    "WatchEvent",
    "WatchStream",
    "parse_event",
    "split_lines",
]

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})

MAX_LINE_BYTES = 64 * 1024 * 1024


class StreamTruncated(ConnectionError):
    """The watch connection broke, or ended in the middle of an event."""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


async def split_lines(
    chunks: AsyncIterator[bytes], *, max_line_bytes: int = MAX_LINE_BYTES
) -> AsyncIterator[bytes]:
    """Yield each complete non-blank line (without ``\\n``); a final unterminated line too.

    The unterminated tail is yielded as-is: the caller decides whether it is a complete event
    (some servers omit the last newline) or a truncated one.
    """
    pending = bytearray()
    async for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if pending:
                pending += chunk[start:end]
                line = bytes(pending)
                pending.clear()
            else:
                line = chunk[start:end]
            start = end + 1
            if line.strip():
                yield line
        pending += chunk[start:]
        if len(pending) > max_line_bytes:
            raise StreamTruncated(f"watch event longer than {max_line_bytes} bytes")
    if pending.strip():
        yield bytes(pending)


def parse_event(line: bytes) -> WatchEvent:
    """One watch line -> event; an ``ERROR`` event is raised as its ``StatusError``."""
    doc = codec.loads(line)
    if not isinstance(doc, dict):
        raise ValueError(f"watch event is not an object: {line[:200]!r}")
    kind = doc.get("type")
    obj = doc.get("object")
    if not isinstance(obj, dict):
        raise ValueError(f"watch event without an object: {line[:200]!r}")
    if kind == "ERROR":
        raise from_status(obj)
    if kind not in _TYPES:
        raise ValueError(f"unknown watch event type {kind!r}")
    return WatchEvent(type=kind, object=obj)


class WatchStream:
    """Events of one watch request. Use ``async with client.watch(...) as stream``.

    ``opener`` performs the request when the stream is entered (or first iterated) and returns
    the response; HTTP errors are raised by it as ``StatusError``. Leaving the ``async with``
    (or ``close()``) releases the connection.
    """

    def __init__(self, opener: Callable[[], Awaitable[aiohttp.ClientResponse]]) -> None:
        self._opener = opener
        self._response: aiohttp.ClientResponse | None = None
        self._events: AsyncIterator[WatchEvent] | None = None

    async def open(self) -> WatchStream:
        if self._response is None:
            self._response = await self._opener()
        return self

    async def __aenter__(self) -> WatchStream:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._response is not None:
            self._response.close()

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        if self._events is None:
            self._events = self._iterate()
        return self._events

    async def _iterate(self) -> AsyncIterator[WatchEvent]:
        await self.open()
        assert self._response is not None
        lines = split_lines(self._response.content.iter_any())
        try:
            async for line in lines:
                try:
                    event = parse_event(line)
                except StatusError:
                    raise
                except ValueError as exc:  # json.JSONDecodeError is a ValueError
                    if self._response.content.at_eof():
                        raise StreamTruncated(f"watch stream ended mid-event: {exc}") from exc
                    raise
                yield event
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            raise StreamTruncated(f"watch connection broken: {exc}") from exc
        finally:
            self.close()
