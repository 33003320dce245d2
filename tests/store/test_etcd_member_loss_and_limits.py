"""etcd only: acknowledged writes survive a SIGKILL of the etcd member, the store rides out the
restart, an unreachable etcd is a StoreUnavailable (not a hang), and an oversized write is
refused with etcd's own words."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelite.testing import etcd
from store import open_store
from store.base import RequestTooLarge, Store, StoreUnavailable

pytestmark = pytest.mark.skipif(
    not etcd.available(), reason="no etcd binary on the PATH: apt-get install etcd-server"
)


@pytest.fixture
def member(tmp_path: Path) -> Iterator[etcd.EtcdMember]:
    """An etcd member of this test's own: these tests kill it."""
    started = etcd.EtcdMember(tmp_path / "member")
    started.start()
    yield started
    started.stop()


async def test_sigkill_of_etcd_mid_stream_loses_no_acknowledged_write(
    member: etcd.EtcdMember,
) -> None:
    store: Store = open_store(f"etcd://{member.endpoint}?timeout=5")
    acknowledged: list[str] = []
    enough = asyncio.Event()

    async def write() -> None:
        for i in itertools.count():
            key = f"/registry/core/pods/ns/p{i}"
            try:
                await store.create(key, b"v")
            except StoreUnavailable:
                return  # the write in flight when etcd died: may or may not have landed
            acknowledged.append(key)
            if len(acknowledged) == 300:
                enough.set()

    try:
        start = await store.current_revision()
        writer = asyncio.create_task(write(), name="test-etcd-writer")
        async with asyncio.timeout(120):
            await enough.wait()
            await asyncio.to_thread(member.kill)
            await writer
            await asyncio.to_thread(member.start)
            # the same store reconnects: its reads retry until the member serves again
            present = {kv.key for kv in (await store.list("/registry/core/pods/")).items}
        missing = [key for key in acknowledged if key not in present]
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:3]}"
        assert len(present) - len(acknowledged) <= 1  # at most the write in flight
        assert await store.current_revision() == start + len(present)
    finally:
        await store.close()


async def test_an_unreachable_etcd_is_store_unavailable_after_the_timeout(
    member: etcd.EtcdMember,
) -> None:
    store: Store = open_store(f"etcd://{member.endpoint}?timeout=1")
    try:
        await store.create("/registry/core/pods/ns/a", b"v")
        await asyncio.to_thread(member.kill)
        with pytest.raises(StoreUnavailable) as caught:
            await store.get("/registry/core/pods/ns/a")
        assert not caught.value.timed_out  # nobody listening: refused, not timed out
        assert member.endpoint in str(caught.value)
    finally:
        await store.close()


async def test_a_second_endpoint_serves_when_the_first_is_down(member: etcd.EtcdMember) -> None:
    dead = etcd.EtcdMember(member.data_dir.with_name("never-started"))
    dead.client_port = 1  # nothing listens on port 1 of loopback
    store: Store = open_store(f"etcd://{dead.endpoint},{member.endpoint}?timeout=10")
    try:
        created = await store.create("/registry/core/pods/ns/a", b"v")
        assert await store.get("/registry/core/pods/ns/a") == created
    finally:
        await store.close()


async def test_a_write_over_the_request_limit_is_refused_with_etcds_words(
    member: etcd.EtcdMember,
) -> None:
    store: Store = open_store(f"etcd://{member.endpoint}")
    try:
        before = await store.current_revision()
        with pytest.raises(RequestTooLarge, match="request is too large"):
            await store.create("/registry/core/configmaps/ns/big", b"x" * (2 * 1024 * 1024))
        assert await store.get("/registry/core/configmaps/ns/big") is None
        small = await store.create("/registry/core/configmaps/ns/small", b"x")
        assert small.mod_revision == before + 1  # the refused write took no revision
    finally:
        await store.close()
