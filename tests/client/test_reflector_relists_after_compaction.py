"""A reflector cut off from the apiserver while the history it would resume from is compacted
away gets 410 Expired when it comes back, relists, and the informer emits exactly the DELETEDs
(and ADDs and UPDATEs) of what changed while it was away."""

from __future__ import annotations

import asyncio

import pytest

from api.errors import Expired
from client.backoff import BackoffPolicy
from client.informer import Informer
from client.reflector import ReflectorOptions
from client.rest import ApiClient
from kubelite.testing.waiting import apoll_until
from tests.client.ledger import PODS, Ledger, pod, sentinel, server_state
from tests.client.partition_proxy import PartitionProxy
from tests.conftest import StartApiServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

FAST = ReflectorOptions(
    min_watch_timeout=30.0, backoff=BackoffPolicy(initial=0.05, cap=0.3, jitter=1.0)
)


async def wait_until_compacted(client: ApiClient, resource_version: str) -> None:
    """Probe a watch from ``resource_version`` until the server answers 410: the compactor
    runs on its own interval and announces nothing, so this polls (``apoll_until``)."""
    assert PODS is not None

    async def compacted() -> bool:
        try:
            async with client.watch(
                PODS, resource_version=resource_version, timeout_seconds=1
            ) as w:
                async for _event in w:
                    break  # history still there: the watch replays it
        except Expired:
            return True
        return False

    await apoll_until(
        compacted, what=f"resourceVersion {resource_version} compacted", within=60, every=0.05
    )


async def test_relist_after_410_emits_deletes_for_objects_gone_meanwhile(
    apiserver_process: StartApiServer,
) -> None:
    server = apiserver_process(
        args=[
            "--compaction-window",
            "20",
            "--compaction-interval",
            "0.1",
            "--watch-cache-size",
            "10",
        ]
    )
    proxy = await PartitionProxy(upstream_port=server.port).start()
    async with ApiClient(server=server.url) as admin, ApiClient(server=proxy.url) as client:
        assert PODS is not None
        for i in range(30):
            await admin.create(PODS, pod(f"p{i}"))
        informer = Informer(client, PODS, reflector_options=FAST)
        ledger = Ledger(informer)
        task = informer.start()
        try:
            await informer.wait_synced()
            await sentinel(admin, ledger, "before")
            assert len(ledger.state) == 31 and informer.reflector.lists == 1
            resume_from = informer.last_sync_resource_version

            await proxy.cut()  # the informer's watch dies; its reconnects are refused
            ledger.calls.clear()
            for i in range(10):
                await admin.delete(PODS, f"p{i}", namespace="default", grace_period_seconds=0)
            for i in range(10, 15):
                await admin.patch(
                    PODS, f"p{i}", {"metadata": {"labels": {"gen": "1"}}}, namespace="default"
                )
            for i in range(30, 35):
                await admin.create(PODS, pod(f"p{i}"))
            for n in range(40):  # push the compaction window well past resume_from
                await admin.patch(
                    PODS, "p29", {"metadata": {"labels": {"gen": str(n)}}}, namespace="default"
                )
            await wait_until_compacted(admin, resume_from)

            await proxy.heal()
            await sentinel(admin, ledger, "after")
            truth = await server_state(admin)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await proxy.close()
    assert ledger.violations == []
    assert sorted(ledger.deleted[-10:]) == sorted(f"default/p{i}" for i in range(10))
    assert ledger.calls["delete"] == 10
    assert ledger.calls["add"] == 5 + 1  # p30..p34 and the sentinel
    assert ledger.calls["update"] == 5 + 1  # p10..p14 and p29 (once: its newest state)
    assert informer.reflector.lists == 2, "the 410 forced exactly one relist"
    assert ledger.state == truth
    assert {o["metadata"]["name"] for o in informer.list()} == {k.split("/")[1] for k in truth}
