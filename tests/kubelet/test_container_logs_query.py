"""``read_log`` applies kubectl's log query (tail, since, timestamps, limit, follow) to CRI files."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from services.kubelet.logs import LogOptions, read_log

RECORDS = [
    "2026-01-01T00:00:01.000000000Z stdout F one",
    "2026-01-01T00:00:02.000000000Z stderr F two",
    "2026-01-01T00:00:03.000000000Z stdout P thr",
    "2026-01-01T00:00:03.500000000Z stdout F ee",
    "2026-01-01T00:00:04.000000000Z stdout F",
    "2026-01-01T00:00:05.000000000Z stdout F five",
]


async def collect(path: Path, options: LogOptions, **kw: object) -> bytes:
    return b"".join([c async for c in read_log(path, options, **kw)])  # type: ignore[arg-type]


def write(tmp_path: Path, records: list[str] = RECORDS) -> Path:
    path = tmp_path / "0.log"
    path.write_text("".join(r + "\n" for r in records))
    return path


async def test_plain_read_joins_partials_and_keeps_empty_lines(tmp_path: Path) -> None:
    assert await collect(write(tmp_path), LogOptions()) == b"one\ntwo\nthree\n\nfive\n"


async def test_tail_counts_whole_lines(tmp_path: Path) -> None:
    assert await collect(write(tmp_path), LogOptions(tail_lines=3)) == b"three\n\nfive\n"
    assert await collect(write(tmp_path), LogOptions(tail_lines=0)) == b""


async def test_timestamps_prefix_each_line_once(tmp_path: Path) -> None:
    out = await collect(write(tmp_path), LogOptions(timestamps=True, tail_lines=2))
    assert out == b"2026-01-01T00:00:04.000000000Z \n2026-01-01T00:00:05.000000000Z five\n"


async def test_since_time_drops_older_records(tmp_path: Path) -> None:
    since = datetime(2026, 1, 1, 0, 0, 4, tzinfo=UTC)
    assert await collect(write(tmp_path), LogOptions(since_time=since)) == b"\nfive\n"


async def test_limit_bytes_truncates(tmp_path: Path) -> None:
    assert await collect(write(tmp_path), LogOptions(limit_bytes=6)) == b"one\ntw"


async def test_follow_streams_new_records_until_the_instance_exits(tmp_path: Path) -> None:
    path = write(tmp_path, RECORDS[:1])
    exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stream = read_log(path, LogOptions(follow=True), exited=exited)
    assert await anext(stream) == b"one\n"
    with path.open("a") as fh:
        fh.write("2026-01-01T00:00:09.000000000Z stdout F later\n")
    assert await anext(stream) == b"later\n"
    with path.open("a") as fh:
        fh.write("2026-01-01T00:00:10.000000000Z stdout F last words\n")
    exited.set_result(None)
    assert [c async for c in stream] == [b"last words\n"]


async def test_missing_file_reads_empty(tmp_path: Path) -> None:
    assert await collect(tmp_path / "nope.log", LogOptions()) == b""
