"""A SQLite file that is damaged, unusable or busy is refused with one clear ``StoreFailed``
line, at open; damage met while running fails the store for good: that call, every later call
and the open watches end with ``StoreFailed`` (a ``StoreClosed``, so loops stop instead of
retrying).

The files are damaged as the report that found the defect did: 3,000 random bytes written
over an existing database, at offset 0 or across page headers further in.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from store import open_store
from store.base import StoreClosed, StoreFailed
from store.sqlite import SqliteStore
from tests.store.damage import PAGE, damage, page_headers


async def make_database(path: Path, *, keys: int = 200, size: int = 1000) -> None:
    """A closed database (WAL checkpointed away) holding ``keys`` values of ``size`` bytes."""
    store = open_store(f"sqlite:///{path}?synchronous=OFF")
    await asyncio.gather(*(store.create(f"/k/{i:05d}", b"x" * size) for i in range(keys)))
    await store.close()
    _check_checkpointed(path)


def _check_checkpointed(path: Path) -> None:
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "the data must be in the main file"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE


async def test_random_bytes_at_offset_zero_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "kubelite.db"
    await make_database(path)
    damage(path, offsets=[0])
    with pytest.raises(StoreFailed) as err:
        SqliteStore(path)
    assert str(err.value) == (
        "the file is not a SQLite database (file is not a database); move it aside (with its "
        "-wal and -shm files) or restore a backup, then start again"
    )


async def test_random_bytes_in_the_middle_are_found_by_the_check_at_open(tmp_path: Path) -> None:
    path = tmp_path / "kubelite.db"
    await make_database(path)
    pages = path.stat().st_size // PAGE
    damage(path, offsets=[pages // 2 * PAGE - 100])
    with pytest.raises(StoreFailed) as err:
        SqliteStore(path)
    message = str(err.value)
    assert message.startswith("the database is damaged (database disk image is malformed: ")
    assert message.endswith(
        "move it aside (with its -wal and -shm files) or restore a backup, then start again"
    )
    assert "\n" not in message


def test_a_directory_in_place_of_the_file_or_its_folder(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreFailed, match="the path is a directory, not a database file"):
        SqliteStore(tmp_path / "dir.db")
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreFailed, match=f"its directory {tmp_path}/file is not a directory"):
        SqliteStore(tmp_path / "file" / "kubelite.db")
    with pytest.raises(StoreFailed, match=f"its directory {tmp_path}/missing does not exist"):
        SqliteStore(tmp_path / "missing" / "kubelite.db")


async def test_a_second_opener_is_refused_in_one_line(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path / "kubelite.db")
    try:
        with pytest.raises(StoreFailed, match="already open in another process"):
            SqliteStore(tmp_path / "kubelite.db")
    finally:
        await first.close()


def test_a_lock_file_that_cannot_be_made_is_refused_in_one_line(tmp_path: Path) -> None:
    """(An unwritable file or directory is tested on the real process, run as an unprivileged
    user: these tests run as root, whom file modes do not stop.)"""
    path = tmp_path / "kubelite.db"
    (tmp_path / "kubelite.db-lock").mkdir()
    with pytest.raises(StoreFailed) as err:
        SqliteStore(path)
    assert str(err.value).startswith(f"cannot open {path}-lock (Is a directory); ")


async def test_damage_met_while_running_fails_the_store_for_good(tmp_path: Path) -> None:
    path = tmp_path / "kubelite.db"
    await make_database(path, keys=2000)
    store = SqliteStore(path)
    try:
        watch = store.watch("/k/", after_revision=await store.current_revision())
        await store.create("/k/live", b"v")
        assert (await anext(watch)).kv.key == "/k/live"  # the watch is live
        damage(path, offsets=page_headers(path, first=4, every=8))

        with pytest.raises(StoreFailed, match="the database is damaged"):
            await store.list("/k/")  # a fresh reader connection reads the damaged pages
        with pytest.raises(StoreFailed):
            await anext(watch)
        with pytest.raises(StoreFailed):
            await store.get("/k/00001")
        with pytest.raises(StoreFailed):
            await store.create("/k/new", b"v")
        with pytest.raises(StoreClosed):  # StoreFailed is a StoreClosed: loops stop on it
            await store.update("/k/00001", b"v", expected_revision=1)
    finally:
        await store.close()
