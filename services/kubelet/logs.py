"""Reading container logs the way ``kubectl logs`` asks for them.

A container instance's log is a CRI-format file written by its shim: one record per line,
``<RFC3339Nano> <stdout|stderr> <F|P> <content>``, where ``P`` marks a partial line that the
next record continues. ``read_log`` turns that back into the container's output and applies
the query of ``GET .../log``: ``tailLines`` (last N lines), ``sinceSeconds``/``sinceTime``
(records at or after that instant), ``timestamps`` (each line prefixed with its RFC3339Nano
time, as the kubelet does), ``limitBytes`` (stop after N bytes) and ``follow`` (keep reading as
the file grows until the instance has exited and the file is drained).

Following polls the file every ``FOLLOW_POLL_SECONDS`` (the kubelet uses fsnotify; a short poll
of a local file is the portable equivalent) and wakes at once when the instance exits. Timestamps
from one writer have a fixed width, so they compare as strings. Not supported: ``--since`` for
a file written by something other than the shim (no timestamps to compare).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

__all__ = ["FOLLOW_POLL_SECONDS", "LogOptions", "format_log_time", "read_log"]

FOLLOW_POLL_SECONDS = 0.1
CHUNK = 64 * 1024


def format_log_time(t: datetime) -> str:
    """RFC3339Nano with nine digits, the shim's format."""
    t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{t.microsecond * 1000:09d}Z"


@dataclass(frozen=True, slots=True)
class LogOptions:
    follow: bool = False
    tail_lines: int | None = None
    since_seconds: int | None = None
    since_time: datetime | None = None
    timestamps: bool = False
    limit_bytes: int | None = None

    def since(self) -> str | None:
        """The earliest record time to show, as a comparable timestamp string."""
        moments = []
        if self.since_seconds is not None:
            moments.append(datetime.now(UTC) - timedelta(seconds=self.since_seconds))
        if self.since_time is not None:
            moments.append(self.since_time)
        return format_log_time(max(moments)) if moments else None


class _Decoder:
    """CRI records -> output bytes, joining partial records into lines."""

    def __init__(self, *, timestamps: bool, since: str | None) -> None:
        self.timestamps = timestamps
        self.since = since
        self._in_partial = False

    def decode(self, record: bytes) -> bytes:
        parts = record.split(b" ", 3)
        if len(parts) < 4:
            if len(parts) == 3:  # an empty line: "<ts> stdout F"
                parts.append(b"")
            else:
                return b""
        ts, _stream, tag, content = parts
        if self.since is not None and ts.decode(errors="replace") < self.since:
            return b""
        head = ts + b" " if self.timestamps and not self._in_partial else b""
        partial = tag == b"P"
        self._in_partial = partial
        return head + content + (b"" if partial else b"\n")


def _tail(records: list[bytes], n: int) -> list[bytes]:
    """The records that make up the last ``n`` lines (partial records belong to the next F)."""
    if n <= 0:
        return []
    full_seen = 0
    for i in range(len(records) - 1, -1, -1):
        parts = records[i].split(b" ", 3)
        if len(parts) >= 3 and parts[2] == b"F":
            full_seen += 1
            if full_seen > n:
                return records[i + 1 :]
    return records


async def read_log(
    path: Path | None,
    options: LogOptions,
    *,
    exited: Awaitable[object] | None = None,
) -> AsyncGenerator[bytes, None]:
    """Yield the log's output in chunks. ``exited`` resolves when the instance has ended;
    without it (or once it resolved) the read stops at end of file."""
    if path is None:
        return
    decoder = _Decoder(timestamps=options.timestamps, since=options.since())
    remaining = options.limit_bytes
    exit_task: asyncio.Future[object] | None = None
    if options.follow and exited is not None:
        exit_task = asyncio.ensure_future(exited)
    try:
        fh: IO[bytes] = await asyncio.to_thread(open, path, "rb")
    except FileNotFoundError:
        return
    try:
        pending = b""
        first = True
        while True:
            if first and options.tail_lines is not None:
                data = await asyncio.to_thread(fh.read)
                records = data.split(b"\n")
                pending = records.pop()  # an unterminated record waits for its newline
                records = _tail(records, options.tail_lines)
            else:
                data = await asyncio.to_thread(fh.read, CHUNK)
                records = (pending + data).split(b"\n")
                pending = records.pop()
            first = False
            out = b"".join(decoder.decode(r) for r in records if r)
            if out:
                if remaining is not None:
                    out = out[:remaining]
                    remaining -= len(out)
                yield out
                if remaining is not None and remaining <= 0:
                    return
            if data and len(data) >= CHUNK:
                continue  # more is already on disk
            if exit_task is None:
                return
            if exit_task.done():
                # one more read after the exit: the shim wrote its last lines before exiting
                exit_task = None
                continue
            await asyncio.wait({exit_task}, timeout=FOLLOW_POLL_SECONDS)
    finally:
        fh.close()
        if exit_task is not None and not exit_task.done():
            exit_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await exit_task
