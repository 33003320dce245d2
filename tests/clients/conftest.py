"""Fixtures of the client-library tests: one real apiserver process per session that lightkube
and kubernetes_asyncio drive over HTTP; tests keep apart by names and CRD groups."""

from __future__ import annotations

import pytest

from kubelite.testing import ComponentProcess, Processes


@pytest.fixture(scope="session")
def clients_apiserver(session_processes: Processes) -> ComponentProcess:
    """A real apiserver process over the memory store, its plain-HTTP port on loopback."""
    return session_processes.apiserver(store="memory://")
