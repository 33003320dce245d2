"""``open_store`` accepts the documented URL forms and rejects everything else clearly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store import open_store
from store.etcd import EtcdStore
from store.memory import MemoryStore
from store.sqlite import SqliteStore


async def test_memory_url_opens_the_memory_store() -> None:
    store = open_store("memory://")
    assert isinstance(store, MemoryStore)
    await store.close()


async def test_sqlite_absolute_path_with_options(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path}/abs.db?synchronous=normal&busy_timeout_ms=100")
    assert isinstance(store, SqliteStore)
    assert (store.path, store.synchronous) == (f"{tmp_path}/abs.db", "NORMAL")
    await store.create("/registry/a", b"v")
    await store.close()
    assert (tmp_path / "abs.db").exists()


async def test_sqlite_relative_path_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkdir("state")
    store = open_store("sqlite://state/rel.db")
    assert isinstance(store, SqliteStore) and store.path == "state/rel.db"
    await store.close()
    assert (tmp_path / "state" / "rel.db").exists()


async def test_etcd_url_names_the_members_and_the_prefix_without_connecting() -> None:
    store = open_store("etcd://127.0.0.1:1,127.0.0.2:2?prefix=/cluster-a/&timeout=3")
    assert isinstance(store, EtcdStore)
    assert (store.endpoints, store.prefix) == (["127.0.0.1:1", "127.0.0.2:2"], "/cluster-a")
    await store.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://localhost", "unknown store scheme 'redis'"),
        ("/var/lib/kubelite.db", "has no scheme"),
        ("sqlite://", "sqlite URL needs a file"),
        ("sqlite:///tmp/x.db?synchronous=sometimes", "synchronous='SOMETIMES'"),
        ("sqlite:///tmp/x.db?journal=wal", "unknown sqlite:// store option(s) journal"),
        ("sqlite:///tmp/x.db?busy_timeout_ms=soon", "is not an integer"),
        ("memory://?watch_buffer=0", "must be >= 1"),
        ("memory://somewhere", "memory:// takes no location"),
        ("etcd://127.0.0.1", "etcd endpoint '127.0.0.1' is not host:port"),
        ("etcd://127.0.0.1:2379?prefix=registry", "must start with '/'"),
        ("etcd://127.0.0.1:2379?cert=/tmp/c.pem", "cert= and key= go together"),
        ("etcd://127.0.0.1:2379?lease=1", "unknown etcd:// store option(s) lease"),
    ],
)
def test_bad_urls_raise_value_error_saying_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        open_store(url)
    assert message in str(caught.value)
