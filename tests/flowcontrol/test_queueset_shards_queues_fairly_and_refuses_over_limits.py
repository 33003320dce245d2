"""One priority level's ``QueueSet``: seats, shuffle-sharded queues, fair order, refusals.

Each request is a real task taking a seat with ``async with queues.seat(flow)``; it holds the
seat until the test releases it, so who runs, who waits and in what order is decided by the
queue set alone. ``arrive`` returns once the request's task has asked for its seat (it notes
its arrival in the same step as it joins a queue), and a seat handed over is awaited
(``started``), never slept for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from services.apiserver.flowcontrol_queueset import (
    CONCURRENCY_LIMIT,
    QUEUE_FULL,
    TIME_OUT,
    QueueSet,
    Queuing,
    Rejected,
    deal,
    flow_hash,
)


class Requests:
    """Requests of a queue set as tasks: each records when it got its seat, then holds it
    until ``finish(name)``."""

    def __init__(self, queues: QueueSet) -> None:
        self.queues = queues
        self.order: list[str] = []
        self.waited: dict[str, float] = {}
        self._done: dict[str, asyncio.Event] = {}
        self._started = asyncio.Condition()
        self.tasks: dict[str, asyncio.Task[None]] = {}

    async def arrive(self, name: str, flow: str) -> None:
        """Send a request of ``flow``; return once it holds a seat or waits in a queue."""
        self._done[name] = asyncio.Event()
        arrived = asyncio.Event()
        self.tasks[name] = asyncio.create_task(self._run(name, (flow, ""), arrived), name=name)
        await arrived.wait()

    async def _run(self, name: str, flow: tuple[str, str], arrived: asyncio.Event) -> None:
        arrived.set()  # the seat is asked for in this same step, before any suspension
        async with self.queues.seat(flow) as waited:
            self.waited[name] = waited
            async with self._started:
                self.order.append(name)
                self._started.notify_all()
            await self._done[name].wait()

    async def started(self, n: int) -> list[str]:
        async with self._started:
            await self._started.wait_for(lambda: len(self.order) >= n)
        return self.order[:n]

    def finish(self, name: str) -> None:
        self._done[name].set()


def queuing(queues: int = 8, hand: int = 2, limit: int = 10) -> Queuing:
    return Queuing(queues=queues, hand_size=hand, queue_length_limit=limit)


@pytest.fixture
def finished() -> Iterator[list[Requests]]:
    made: list[Requests] = []
    yield made
    for requests in made:
        for task in requests.tasks.values():
            task.cancel()


def test_a_hand_is_distinct_queues_and_the_same_for_the_same_flow() -> None:
    for value in (0, 1, 2**63 + 12345, flow_hash(("service-accounts", "alice"))):
        hand = deal(value, deck=128, hand=6)
        assert len(set(hand)) == 6 and all(0 <= card < 128 for card in hand)
    assert flow_hash(("a", "b")) == flow_hash(("a", "b")) != flow_hash(("a", "c"))
    hands = {tuple(deal(flow_hash(("s", f"user{i}")), deck=128, hand=6)) for i in range(50)}
    assert len(hands) == 50


async def test_a_light_flow_is_served_before_a_heavy_flows_backlog(
    finished: list[Requests],
) -> None:
    requests = Requests(QueueSet(seats=1, queuing=queuing(queues=16, hand=1)))
    finished.append(requests)
    hands = [deal(flow_hash((f, "")), deck=16, hand=1) for f in ("heavy", "light")]
    assert hands[0] != hands[1]  # the two flows' hands share no queue
    for i in range(4):
        await requests.arrive(f"heavy{i}", "heavy")
    await requests.arrive("light", "light")
    assert await requests.started(1) == ["heavy0"]
    for expected in (["heavy0", "light"], ["heavy0", "light", "heavy1"]):
        requests.finish(requests.order[-1])
        assert await requests.started(len(expected)) == expected
    assert requests.queues.executing == 1 and requests.queues.waiting == 2


async def test_a_full_queue_refuses_and_a_reject_level_refuses_at_once(
    finished: list[Requests],
) -> None:
    requests = Requests(QueueSet(seats=1, queuing=queuing(queues=1, hand=1, limit=2)))
    finished.append(requests)
    for name in ("a", "b", "c"):
        await requests.arrive(name, "f")
    assert (requests.queues.executing, requests.queues.waiting) == (1, 2)
    with pytest.raises(Rejected) as refused:
        async with requests.queues.seat(("f", "")):
            pass
    assert refused.value.reason == QUEUE_FULL

    rejecting = Requests(QueueSet(seats=1, queuing=None))
    finished.append(rejecting)
    await rejecting.arrive("only", "f")
    with pytest.raises(Rejected) as refused:
        async with rejecting.queues.seat(("f", "")):
            pass
    assert refused.value.reason == CONCURRENCY_LIMIT


@pytest.mark.looptime
async def test_a_request_waiting_past_the_wait_limit_leaves_its_queue(
    finished: list[Requests],
) -> None:
    loop = asyncio.get_running_loop()
    queues = QueueSet(seats=1, queuing=queuing(), wait_limit=15.0)
    requests = Requests(queues)
    finished.append(requests)
    await requests.arrive("holder", "f")
    with pytest.raises(Rejected) as refused:
        async with queues.seat(("f", "")):
            pass
    assert refused.value.reason == TIME_OUT
    assert loop.time() == pytest.approx(15.0)  # virtual: refused at the limit, not before
    assert queues.waiting == 0

    await requests.arrive("patient", "f")
    await asyncio.sleep(3)
    requests.finish("holder")
    assert await requests.started(2) == ["holder", "patient"]
    assert requests.waited == {"holder": 0.0, "patient": pytest.approx(3.0)}


async def test_more_seats_dispatch_the_waiting_and_a_seat_is_given_back_on_finish(
    finished: list[Requests],
) -> None:
    queues = QueueSet(seats=1, queuing=queuing())
    requests = Requests(queues)
    finished.append(requests)
    for name in ("a", "b", "c"):
        await requests.arrive(name, name)
    assert (queues.executing, queues.waiting) == (1, 2)
    queues.configure(seats=3, queuing=queuing(queues=4, hand=1))
    assert sorted(await requests.started(3)) == ["a", "b", "c"]
    for name in ("a", "b", "c"):
        requests.finish(name)
    await asyncio.gather(*requests.tasks.values())
    assert (queues.executing, queues.waiting) == (0, 0)
