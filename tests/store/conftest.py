"""One fixture, every backend: each conformance test runs once per store URL scheme.

``open_backend(**options)`` opens a fresh store of the current backend (options become URL query
parameters, e.g. ``watch_buffer=8``) and closes it after the test; ``store`` is one opened with
the defaults. The etcd backend joins by adding its scheme to ``BACKENDS`` and a URL below.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from urllib.parse import urlencode

import pytest

from store import open_store
from store.base import Store

BACKENDS = ["memory", "sqlite"]

StoreOpener = Callable[..., Store]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend_url(backend: str, tmp_path: Path) -> Callable[..., str]:
    def url(**options: object) -> str:
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
