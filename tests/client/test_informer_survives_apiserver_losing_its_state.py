"""A memory-store apiserver restarted from nothing has "forgotten" the informer's
resourceVersion (its revisions start again from 1). The reflector must not wait for a
resourceVersion that will not come for a long time, nor keep stale objects: it relists, and the
informer converges to the new, smaller world, emitting deletes for what vanished."""

from __future__ import annotations

import asyncio

import pytest

from client.backoff import BackoffPolicy
from client.informer import Informer
from client.reflector import ReflectorOptions
from client.rest import ApiClient
from tests.client.ledger import PODS, Ledger, pod, sentinel, server_state
from tests.conftest import StartApiServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

# The apiserver answers a watch from a resourceVersion ahead of its store, after a short wait,
# with an ERROR carrying 504 ResourceVersionTooLarge (as Kubernetes does); the reflector relists.

FAST = ReflectorOptions(min_watch_timeout=30.0, backoff=BackoffPolicy(initial=0.05, cap=0.3))


async def test_informer_converges_after_a_memory_apiserver_restarts_empty(
    apiserver_process: StartApiServer,
) -> None:
    server = apiserver_process(store="memory://")
    async with ApiClient(server=server.url) as client:
        assert PODS is not None
        for i in range(20):
            await client.create(PODS, pod(f"old{i}"))
        for n in range(30):  # push the informer's resourceVersion well above a fresh server's
            await client.patch(
                PODS, "old0", {"metadata": {"labels": {"gen": str(n)}}}, namespace="default"
            )
        informer = Informer(client, PODS, reflector_options=FAST)
        ledger = Ledger(informer)
        task = informer.start()
        try:
            await informer.wait_synced()
            await asyncio.to_thread(server.restart)  # back with revision ~1 and no pods
            await client.create(PODS, pod("new0"))
            await sentinel(client, ledger, "sentinel", within=10)
            truth = await server_state(client)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert set(truth) == {"default/new0", "default/sentinel"}
    assert sorted(ledger.deleted) == sorted(f"default/old{i}" for i in range(20))
    assert {
        k: o["metadata"]["resourceVersion"]
        for k, o in zip(informer.keys(), informer.list(), strict=True)
    } == truth
