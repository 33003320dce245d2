"""One fixture, every backend: each conformance test runs once per store URL scheme.

``open_backend(**options)`` opens a fresh store of the current backend (options become URL query
parameters, e.g. ``watch_buffer=8``) and closes it after the test; ``store`` is one opened with
the defaults.

etcd: one real member for the whole session (``etcd_member``), and a fresh key prefix per test
(``?prefix=/t-<random>``), so each test sees an empty store and none sees another's keys. An
etcd revision counts every write to the member, so a test's store starts at whatever revision
the member has reached: ``origin`` is that revision (0 on memory and SQLite) and tests assert
revisions relative to it. Tests run one at a time, so no other test writes to that etcd during
a test, and a revision taken at its start stays the one its writes count from. Without an etcd binary the etcd cases are skipped, saying why
(``make test`` installs it).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from kubelite.testing import etcd
from store import open_store
from store.base import Store

BACKENDS = ["memory", "sqlite", "etcd"]

StoreOpener = Callable[..., Store]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def etcd_member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[etcd.EtcdMember]:
    """One etcd member for the session's etcd tests (skipped without an etcd binary)."""
    if not etcd.available():
        pytest.skip("no etcd binary on the PATH: apt-get install etcd-server (make test does)")
    member = etcd.EtcdMember(tmp_path_factory.mktemp("etcd") / "member")
    member.start()
    yield member
    member.stop()


@pytest.fixture
def backend_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., str]:
    if backend == "etcd":
        member: etcd.EtcdMember = request.getfixturevalue("etcd_member")
        prefix = f"/t-{uuid.uuid4().hex[:12]}"

    def url(**options: object) -> str:
        if backend == "etcd":
            return f"etcd://{member.endpoint}?{urlencode({'prefix': prefix, **options})}"
        query = f"?{urlencode(options)}" if options else ""
        if backend == "memory":
            return f"memory://{query}"
        return f"sqlite://{tmp_path / 'store.db'}{query}"

    return url


@pytest.fixture
async def open_backend(backend_url: Callable[..., str]) -> AsyncIterator[StoreOpener]:
    opened: list[Store] = []

    def open_(**options: object) -> Store:
        store = open_store(backend_url(**options))
        opened.append(store)
        return store

    yield open_
    for store in reversed(opened):
        await store.close()


@pytest.fixture
async def store(open_backend: StoreOpener) -> Store:
    return open_backend()


@pytest.fixture
async def origin(store: Store) -> int:
    """The revision ``store`` is at before the test writes: its first write takes ``origin + 1``."""
    return await store.current_revision()
