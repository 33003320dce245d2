"""An informer against a real apiserver process converges to the exact server state through
1,000 random creates/updates/deletes — and through a SIGKILL + restart of the apiserver in the
middle of the stream — with every handler call consistent (nothing lost, nothing duplicated)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter

import pytest

from client.backoff import BackoffPolicy
from client.informer import Informer
from client.reflector import ReflectorOptions
from client.rest import ApiClient
from kubelite.testing import ComponentProcess
from tests.client.ledger import PODS, Ledger, churn, sentinel, server_state
from tests.conftest import StartApiServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# Watches end after 1 s (server-side timeoutSeconds), so re-watching from the last
# resourceVersion happens during the churn; retries are quick in real time.
FAST = ReflectorOptions(
    min_watch_timeout=1.0, backoff=BackoffPolicy(initial=0.05, cap=0.5, jitter=1.0)
)


class WatchEnds(logging.Handler):
    """Sets ``ended`` when the reflector logs that a watch ended cleanly and it re-watches.

    How many watches 1,000 writes span depends on how fast the machine writes them; awaiting
    this event between two halves of the churn makes "a watch ended and was resumed from its
    last resourceVersion, mid-churn" a fact of every run rather than of a slow one.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.ended = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().endswith("; re-watching"):
            self.ended.set()


async def run_churn(client: ApiClient, *, ops: int, seed: int, counts: Counter[str]) -> None:
    rng = random.Random(seed)
    names = [f"p{i}" for i in range(80)]
    workers = 4
    shards = [names[i::workers] for i in range(workers)]
    await asyncio.gather(
        *(
            churn(
                client,
                names=shard,
                ops=ops // workers,
                rng=random.Random(rng.random()),
                counts=counts,
            )
            for shard in shards
        )
    )


async def test_informer_converges_through_1000_random_changes(
    apiserver_process: StartApiServer,
) -> None:
    server: ComponentProcess = apiserver_process()
    async with ApiClient(server=server.url) as client:
        assert PODS is not None
        informer = Informer(client, PODS, reflector_options=FAST)
        ledger = Ledger(informer)
        task = informer.start()
        reflector_log = logging.getLogger("client.reflector")
        watch_ends = WatchEnds()
        level = reflector_log.level
        reflector_log.addHandler(watch_ends)
        reflector_log.setLevel(logging.DEBUG)
        try:
            await informer.wait_synced()
            counts: Counter[str] = Counter()
            await run_churn(client, ops=500, seed=1, counts=counts)
            # The server ends the open watch after its 1 s timeoutSeconds; the second half of
            # the churn must then reach the informer through the watch resumed after it.
            await asyncio.wait_for(watch_ends.ended.wait(), timeout=60)
            await run_churn(client, ops=500, seed=5, counts=counts)
            await sentinel(client, ledger, "sentinel")
            truth = await server_state(client)
        finally:
            reflector_log.removeHandler(watch_ends)
            reflector_log.setLevel(level)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert counts["create"] + counts["update"] + counts["delete"] == 1000
    assert counts["failed"] == 0
    assert ledger.violations == []
    assert {
        k: o["metadata"]["resourceVersion"]
        for k, o in zip(informer.keys(), informer.list(), strict=True)
    } == truth
    assert ledger.state == truth
    assert informer.reflector.lists == 1, "a healthy run never relists"
    assert informer.reflector.watches > 1, "a watch timed out and was resumed"


async def test_informer_catches_up_after_the_apiserver_is_killed_mid_stream(
    apiserver_process: StartApiServer,
) -> None:
    server = apiserver_process()
    async with ApiClient(server=server.url) as client:
        assert PODS is not None
        informer = Informer(client, PODS, reflector_options=FAST)
        ledger = Ledger(informer)
        task = informer.start()
        try:
            await informer.wait_synced()
            counts: Counter[str] = Counter()
            await run_churn(client, ops=400, seed=2, counts=counts)
            # SIGKILL the apiserver while writes are in flight and the watch is streaming, and
            # start it again on the same port and SQLite file while churn and informer run on.
            churning = asyncio.create_task(
                run_churn(client, ops=300, seed=3, counts=counts), name="churn"
            )
            await asyncio.to_thread(server.restart)
            await churning
            # Writes resume at once, while the informer is still backing off: its resumed
            # watch must replay them from the restarted server's history.
            failed_before = counts["failed"]
            await run_churn(client, ops=600, seed=4, counts=counts)
            assert counts["failed"] == failed_before
            await sentinel(client, ledger, "sentinel")
            truth = await server_state(client)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert server.starts == 2
    assert counts["failed"] <= 300, "only writes issued around the restart may fail"
    assert ledger.violations == []
    cache = {
        k: o["metadata"]["resourceVersion"]
        for k, o in zip(informer.keys(), informer.list(), strict=True)
    }
    assert cache == truth
    assert ledger.state == truth
    assert informer.reflector.lists == 1, "re-watched from the last resourceVersion, no relist"
