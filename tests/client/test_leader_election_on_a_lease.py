"""Two electors on one Lease against a real apiserver (in this process, so virtual time can
drive the lease clock): only one leads; when the leader dies the other takes over once the
lease has run out; a clean shutdown hands over at once; a leader cut off from the apiserver
steps down within its renew deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestServer

from api.registry import REGISTRY
from client.leader_election import JITTER_FACTOR, LeaderElectionConfig, LeaderElector
from client.rest import ApiClient
from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions
from tests.client.partition_proxy import PartitionProxy

pytestmark = [pytest.mark.looptime, pytest.mark.timeout(60)]

LEASES = REGISTRY.by_kind("coordination.k8s.io", "Lease")
ServerFactory = Callable[..., Awaitable[TestServer]]

DURATION, DEADLINE, RETRY = 15.0, 10.0, 2.0
WORST_POLL = RETRY * (1 + JITTER_FACTOR)  # the longest wait between a candidate's attempts


class Candidate:
    def __init__(self, client: ApiClient, identity: str, *, release: bool) -> None:
        self.identity = identity
        self.leading = asyncio.Event()
        self.stopped = asyncio.Event()
        self.started_at: float | None = None
        self.ended_at: float | None = None  # when the leader's work was cancelled
        self.elector = LeaderElector(
            client,
            LeaderElectionConfig(
                lease_name="kube-scheduler",
                identity=identity,
                lease_duration=DURATION,
                renew_deadline=DEADLINE,
                retry_period=RETRY,
                release_on_cancel=release,
            ),
            on_started_leading=self._lead,
            on_stopped_leading=self.stopped.set,
        )
        self.task = asyncio.create_task(self.elector.run(), name=f"elector {identity}")

    async def _lead(self) -> None:
        self.started_at = asyncio.get_running_loop().time()
        self.leading.set()
        try:
            await asyncio.Event().wait()  # lead until cancelled
        finally:
            self.ended_at = asyncio.get_running_loop().time()

    async def crash(self) -> None:
        """Stop without releasing: what SIGKILL does to a leader."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def apiserver(aiohttp_server: ServerFactory) -> str:
    server = await aiohttp_server(make_app(ServerOptions(store_url="memory://")))
    return str(server.make_url("")).rstrip("/")


async def lease_holder(client: ApiClient) -> str:
    assert LEASES is not None
    lease = await client.get(LEASES, "kube-scheduler", namespace="kube-system")
    return str(lease["spec"].get("holderIdentity") or "")


async def test_only_one_leads_and_the_other_takes_over_after_the_leader_dies(
    aiohttp_server: ServerFactory,
) -> None:
    loop = asyncio.get_running_loop()
    async with ApiClient(server=await apiserver(aiohttp_server)) as client:
        a = Candidate(client, "a", release=False)
        await a.leading.wait()
        b = Candidate(client, "b", release=False)
        await asyncio.sleep(120)  # two minutes of virtual time: b campaigns ~40 times
        assert not b.leading.is_set()
        assert a.elector.is_leader and b.elector.leader == "a"
        assert await lease_holder(client) == "a"

        await a.crash()
        killed_at = loop.time()
        last_renewed = a.elector.last_renewed
        assert last_renewed is not None
        await b.leading.wait()
        assert b.started_at is not None
        took = b.started_at - killed_at
        # Safety: b never acts before the lease a last renewed has run out (by b's clock).
        assert b.started_at >= last_renewed + DURATION
        # Liveness: b sees a's last renewal within one poll, waits the lease out, and takes
        # over on its next poll.
        assert took <= DURATION + 2 * WORST_POLL
        assert await lease_holder(client) == "b"
        lease = await client.get(LEASES, "kube-scheduler", namespace="kube-system")  # type: ignore[arg-type]
        assert lease["spec"]["leaseTransitions"] == 1
        await b.crash()
    print(f"takeover {took:.1f}s after the leader died (lease {DURATION}s)")


async def test_a_clean_shutdown_releases_the_lease_for_a_fast_handover(
    aiohttp_server: ServerFactory,
) -> None:
    loop = asyncio.get_running_loop()
    async with ApiClient(server=await apiserver(aiohttp_server)) as client:
        a = Candidate(client, "a", release=True)
        await a.leading.wait()
        b = Candidate(client, "b", release=True)
        await asyncio.sleep(30)
        a.task.cancel()  # SIGTERM-style: run() releases the lease on its way out
        await asyncio.gather(a.task, return_exceptions=True)
        assert a.stopped.is_set()
        released_at = loop.time()
        await b.leading.wait()
        assert b.started_at is not None
        assert b.started_at - released_at <= WORST_POLL
        b.task.cancel()
        await asyncio.gather(b.task, return_exceptions=True)
        assert await lease_holder(client) == ""


async def test_a_leader_that_cannot_renew_steps_down_within_the_renew_deadline(
    aiohttp_server: ServerFactory,
) -> None:
    loop = asyncio.get_running_loop()
    url = await apiserver(aiohttp_server)
    port = int(url.rsplit(":", 1)[1])
    proxy = await PartitionProxy(upstream_port=port).start()
    async with ApiClient(server=proxy.url) as client:
        a = Candidate(client, "a", release=True)
        await a.leading.wait()
        await asyncio.sleep(11)
        await proxy.cut()
        cut_at = loop.time()
        await a.stopped.wait()
        await a.task  # run() returns after losing the lease (and failing to release it)
        # The next renewal is due within RETRY; it keeps failing until DEADLINE has passed.
        # Measured when the leader's work is cancelled, not after the best-effort release.
        assert a.ended_at is not None
        stopped_after = a.ended_at - cut_at
        assert stopped_after <= RETRY + DEADLINE
        assert stopped_after < DURATION, "stepped down before anyone may take over"
    await proxy.close()
