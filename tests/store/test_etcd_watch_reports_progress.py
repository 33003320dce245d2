"""A watch given ``on_progress`` hears etcd's progress notifications: "every event under your
prefix up to revision R has reached you" — even when the latest writes were elsewhere — and hears
it in stream order, after the events it covers have been taken."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelite.testing import etcd
from store import open_store
from store.base import Store

pytestmark = pytest.mark.skipif(
    not etcd.available(), reason="no etcd binary: apt-get install etcd-server"
)


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[etcd.EtcdMember]:
    """A member that sends progress notifications every 0.2 s (etcd's default is 10 min)."""
    started = etcd.EtcdMember(
        Path(tmp_path_factory.mktemp("etcd-progress")) / "member", progress_notify_interval=0.2
    )
    started.start()
    yield started
    started.stop()


async def test_progress_covers_writes_elsewhere_after_the_events_it_covers(
    member: etcd.EtcdMember,
) -> None:
    store: Store = open_store(f"etcd://{member.endpoint}")
    seen: list[tuple[str, int]] = []
    target = 0
    reached = asyncio.Event()

    def progressed(revision: int) -> None:
        seen.append(("progress", revision))
        if target and revision >= target:
            reached.set()

    start = await store.current_revision()
    watch = store.watch("/registry/core/pods/", after_revision=start, on_progress=progressed)

    async def consume() -> None:
        async for event in watch:
            seen.append(("event", event.revision))

    consumer = asyncio.create_task(consume(), name="test-progress-consumer")
    try:
        pods = [
            (await store.create(f"/registry/core/pods/ns/p{i}", b"v")).mod_revision
            for i in range(3)
        ]
        elsewhere = await store.create("/registry/core/configmaps/ns/c", b"v")
        target = elsewhere.mod_revision
        async with asyncio.timeout(30):
            await reached.wait()
    finally:
        consumer.cancel()
        await store.close()

    assert [rev for kind, rev in seen if kind == "event"] == pods
    for position, (kind, revision) in enumerate(seen):
        if kind == "progress":  # every pod event it covers came before it
            before = {rev for k, rev in seen[:position] if k == "event"}
            assert {rev for rev in pods if rev <= revision} <= before
