"""The SQLite store names a job that held its writer thread long (``SLOW_WRITER``): every
write waits behind it, so an apiserver whose writes all stalled at once says why in its log —
a compaction's vacuum and checkpoint, or a commit whose fsync stalled. A real store in a
temporary file; "long" is set to zero so that the real jobs of a compaction count as long.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import store.sqlite
from store import open_store


async def test_a_compaction_holding_the_writer_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(store.sqlite, "SLOW_WRITER", 0.0)
    sqlite = open_store(f"sqlite:///{tmp_path}/store.db")
    try:
        with caplog.at_level(logging.WARNING, logger="store.sqlite"):
            first = await sqlite.create("/k", b"1")
            await sqlite.update("/k", b"2", expected_revision=first.mod_revision)
            await sqlite.compact(await sqlite.current_revision())
    finally:
        await sqlite.close()
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("store: a commit of 1 write(s) held the writer for") for m in said)
    assert any(m.startswith("store: _shrink held the writer for") for m in said), said
