"""One priority level's seats and queues: shuffle sharding and fair queuing (APF's queueset).

Why: a priority level has a fixed number of seats (its share of the server's concurrency). A
request takes a seat at once when one is free and nobody waits; otherwise it waits in one of
the level's queues, or is refused (``Rejected``) so the client backs off. Which queue, and who
goes next, decide whether one noisy client can starve the others — the job of
``k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset``:

* **shuffle sharding**: a flow (schema + distinguisher) is hashed and dealt a *hand* of
  ``handSize`` distinct queues out of ``queues``; the request joins the shortest queue of its
  hand (fewest requests waiting plus executing). A heavy flow fills its own hand's queues;
  another flow shares all of its hand with it only rarely;
* **queue length limit**: a request whose chosen queue already holds ``queueLengthLimit``
  waiting requests is refused (``queue-full``);
* **fair queuing**: when a seat frees, the queue whose head request has the smallest virtual
  start time goes next. Each request is stamped, on arrival, ``max(its queue's last finish,
  the virtual clock)`` and finishes one unit later; the virtual clock is the start of the last
  request dispatched (start-time fair queuing). A queue that has been idle re-enters at the
  current virtual time, so it neither banks credit nor pays for others' backlog;
* a request that waits longer than ``wait_limit`` seconds leaves its queue and is refused
  (``time-out``); a level that rejects instead of queuing (``limitResponse: Reject``) refuses
  any request arriving while all its seats are taken (``concurrency-limit``).

Simplified on purpose, and where Kubernetes differs: every request costs one seat and one unit
of virtual work (Kubernetes estimates seats from the request — more for big LISTs — and
corrects the virtual finish with the measured execution time); no seats are lent or borrowed
between levels; a new configuration re-deals the waiting requests into the new queues in their
arrival order.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "CONCURRENCY_LIMIT",
    "QUEUE_FULL",
    "TIME_OUT",
    "QueueSet",
    "Queuing",
    "Rejected",
    "deal",
    "flow_hash",
]

QUEUE_FULL: Final = "queue-full"
TIME_OUT: Final = "time-out"
CONCURRENCY_LIMIT: Final = "concurrency-limit"
"""The ``reason`` label values of ``apiserver_flowcontrol_rejected_requests_total``."""


class Rejected(Exception):
    """The request gets no seat; ``reason`` is one of the three above."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Queuing:
    """A level's ``limitResponse.queuing``."""

    queues: int
    hand_size: int
    queue_length_limit: int


def flow_hash(flow: tuple[str, str]) -> int:
    """A stable 64-bit hash of (schema name, distinguisher)."""
    digest = hashlib.blake2b("\x00".join(flow).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def deal(hash_value: int, *, deck: int, hand: int) -> list[int]:
    """``hand`` distinct queue indexes out of ``deck``, chosen by ``hash_value`` read as a
    mixed-radix number (Kubernetes' ``shufflesharding.Dealer``, with its own card order)."""
    remaining = list(range(deck))
    cards = []
    for i in range(min(hand, deck)):
        hash_value, index = divmod(hash_value, deck - i)
        cards.append(remaining.pop(index))
    return cards


@dataclass(eq=False, slots=True)
class _Waiter:
    flow: tuple[str, str]
    start: float
    ready: asyncio.Future[None]
    queue: _Queue | None = None


@dataclass(eq=False, slots=True)
class _Queue:
    waiting: deque[_Waiter] = field(default_factory=deque)
    executing: int = 0
    last_finish: float = 0.0


class QueueSet:
    """Seats and queues of one priority level (``queuing`` None: Reject when full)."""

    def __init__(
        self,
        *,
        seats: int,
        queuing: Queuing | None,
        wait_limit: float = 15.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``clock`` times the waits reported; by default the event loop's (monotonic) clock,
        the one ``wait_limit`` is enforced on, so virtual time moves both."""
        self.seats = seats
        self.queuing = queuing
        self.wait_limit = wait_limit
        self.clock = clock
        self.executing = 0
        self.waiting = 0
        self._virtual_time = 0.0
        self._queues = [_Queue() for _ in range(queuing.queues if queuing else 1)]

    def _now(self) -> float:
        return self.clock() if self.clock is not None else asyncio.get_running_loop().time()

    def configure(self, *, seats: int, queuing: Queuing | None) -> None:
        """Take a new configuration; waiting requests are re-dealt into the new queues."""
        if (seats, queuing) == (self.seats, self.queuing):
            return
        self.seats = seats
        if queuing != self.queuing:
            waiters = sorted((w for q in self._queues for w in q.waiting), key=lambda w: w.start)
            self.queuing = queuing
            self._queues = [_Queue() for _ in range(queuing.queues if queuing else 1)]
            self.waiting = 0
            for waiter in waiters:
                if queuing is None:
                    waiter.ready.set_exception(Rejected(CONCURRENCY_LIMIT))
                else:
                    self._enqueue(waiter, self._choose(waiter.flow))
        self._dispatch()

    def _choose(self, flow: tuple[str, str]) -> _Queue:
        """The shortest queue of the flow's hand."""
        assert self.queuing is not None
        hand = deal(flow_hash(flow), deck=len(self._queues), hand=self.queuing.hand_size)
        return min((self._queues[i] for i in hand), key=lambda q: len(q.waiting) + q.executing)

    def _enqueue(self, waiter: _Waiter, queue: _Queue) -> None:
        waiter.queue = queue
        waiter.start = max(queue.last_finish, self._virtual_time)
        queue.last_finish = waiter.start + 1.0
        queue.waiting.append(waiter)
        self.waiting += 1

    def _dispatch(self) -> None:
        """Give free seats to the waiting heads with the smallest virtual start."""
        while self.executing < self.seats and self.waiting:
            queue = min((q for q in self._queues if q.waiting), key=lambda q: q.waiting[0].start)
            waiter = queue.waiting.popleft()
            self.waiting -= 1
            self._virtual_time = max(self._virtual_time, waiter.start)
            queue.executing += 1
            self.executing += 1
            waiter.ready.set_result(None)

    def _withdraw(self, waiter: _Waiter) -> None:
        queue = waiter.queue
        if queue is not None and waiter in queue.waiting:
            queue.waiting.remove(waiter)
            self.waiting -= 1

    @contextlib.asynccontextmanager
    async def seat(self, flow: tuple[str, str]) -> AsyncIterator[float]:
        """Hold a seat for the ``with`` block; yields the seconds waited for it.

        Raises ``Rejected`` when the request gets none (see the module docstring)."""
        if self.queuing is None:
            if self.executing >= self.seats:
                raise Rejected(CONCURRENCY_LIMIT)
            queue = self._queues[0]
            queue.executing += 1
            self.executing += 1
            waited = 0.0
        else:
            queue = self._choose(flow)
            if len(queue.waiting) >= self.queuing.queue_length_limit:
                raise Rejected(QUEUE_FULL)
            arrived = self._now()
            waiter = _Waiter(flow, 0.0, asyncio.get_running_loop().create_future())
            self._enqueue(waiter, queue)
            self._dispatch()
            if not waiter.ready.done():
                try:
                    await asyncio.wait_for(asyncio.shield(waiter.ready), self.wait_limit)
                except TimeoutError:
                    if not waiter.ready.done():  # else granted just as the time ran out
                        self._withdraw(waiter)
                        raise Rejected(TIME_OUT) from None
                except asyncio.CancelledError:
                    self._release_or_withdraw(waiter)
                    raise
            waiter.ready.result()  # Rejected when a new configuration stopped queuing
            queue = waiter.queue or queue
            waited = self._now() - arrived
        try:
            yield waited
        finally:
            queue.executing -= 1
            self.executing -= 1
            self._dispatch()

    def _release_or_withdraw(self, waiter: _Waiter) -> None:
        """A cancelled wait: leave the queue, or give back a seat granted meanwhile."""
        if waiter.ready.done() and not waiter.ready.exception() and waiter.queue is not None:
            waiter.queue.executing -= 1
            self.executing -= 1
            self._dispatch()
        else:
            self._withdraw(waiter)
