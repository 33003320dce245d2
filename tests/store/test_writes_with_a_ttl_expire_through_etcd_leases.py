"""A write may carry a ``ttl`` (the apiserver's Events do): every backend stores it like any other
write; etcd attaches it to a lease — one lease shared by the writes with the same ttl, granted
for the ttl plus Kubernetes' reuse window — and deletes the key when the lease expires, a DELETED
event with its last value, with no sweeper involved."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import aiohttp
import pytest

from kubelite.testing import etcd
from store.base import EventType, Store
from store.etcd import EtcdStore
from store.etcd_keys import to_etcd


async def test_a_write_with_a_ttl_is_stored_like_any_other(store: Store) -> None:
    created = await store.create("/registry/core/events/ns/a", b"v1", ttl=3600)
    assert await store.get("/registry/core/events/ns/a") == created
    updated = await store.update(
        "/registry/core/events/ns/a", b"v2", expected_revision=created.mod_revision, ttl=3600
    )
    assert await store.get("/registry/core/events/ns/a") == updated
    assert updated.value == b"v2"


async def _gateway(member: etcd.EtcdMember, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://{member.endpoint}{path}", json=body) as resp,
    ):
        answer: dict[str, Any] = await resp.json(content_type=None)
        return answer


async def _lease_of(member: etcd.EtcdMember, store: EtcdStore, key: str) -> str | None:
    """The lease ID etcd holds ``key`` under (None: no lease), read straight from etcd."""
    etcd_key = base64.b64encode((store.prefix + to_etcd(key)).encode()).decode()
    (kv,) = (await _gateway(member, "/v3/kv/range", {"key": etcd_key}))["kvs"]
    lease: str | None = kv.get("lease")
    return lease


@pytest.fixture
def etcd_store(store: Store) -> EtcdStore:
    assert isinstance(store, EtcdStore)
    return store


etcd_only = pytest.mark.parametrize("backend", ["etcd"])
"""Leases are etcd's: these run on the etcd backend only."""


@etcd_only
async def test_etcd_puts_writes_with_one_ttl_under_one_lease(
    etcd_store: EtcdStore, etcd_member: etcd.EtcdMember
) -> None:
    first = await etcd_store.create("/registry/core/events/ns/a", b"v", ttl=3600)
    await etcd_store.create("/registry/core/events/ns/b", b"v", ttl=3600)
    await etcd_store.create("/registry/core/configmaps/ns/c", b"v")

    lease = await _lease_of(etcd_member, etcd_store, "/registry/core/events/ns/a")
    assert lease is not None
    assert await _lease_of(etcd_member, etcd_store, "/registry/core/events/ns/b") == lease
    assert await _lease_of(etcd_member, etcd_store, "/registry/core/configmaps/ns/c") is None
    granted = await _gateway(etcd_member, "/v3/lease/timetolive", {"ID": lease})
    assert int(granted["grantedTTL"]) == 3600 + 60  # the ttl plus the reuse window (60 s max)

    # an update renews the key's ttl from its own write; one without a ttl detaches the lease
    moved = await etcd_store.update(
        "/registry/core/events/ns/a", b"v2", expected_revision=first.mod_revision, ttl=3600
    )
    assert await _lease_of(etcd_member, etcd_store, "/registry/core/events/ns/a") is not None
    await etcd_store.update(
        "/registry/core/events/ns/a", b"v3", expected_revision=moved.mod_revision
    )
    assert await _lease_of(etcd_member, etcd_store, "/registry/core/events/ns/a") is None


@etcd_only
async def test_etcd_deletes_a_key_when_its_lease_expires(etcd_store: EtcdStore) -> None:
    start = await etcd_store.current_revision()
    created = await etcd_store.create("/registry/core/events/ns/short", b"last words", ttl=1)
    watch = etcd_store.watch("/registry/core/events/", after_revision=start)
    try:
        async with asyncio.timeout(60):  # etcd's shortest lease is about 2 s
            added = await anext(watch)
            expired = await anext(watch)
    finally:
        await watch.aclose()
    assert (added.type, added.kv) == (EventType.ADDED, created)
    assert expired.type == EventType.DELETED
    assert (expired.kv.key, expired.kv.value) == ("/registry/core/events/ns/short", b"last words")
    assert await etcd_store.get("/registry/core/events/ns/short") is None
