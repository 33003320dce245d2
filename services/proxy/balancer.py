"""Choosing the endpoint of a new connection: random or round-robin, with ClientIP affinity.

Why: every frontend (TCP or UDP) makes the same choice the same way, and it is worth testing
with a seeded random source and a clock the test moves, apart from any socket.

``Balancer(route, mode=..., clock=..., rng=...)``; ``pick(client_ip, avoid=...)`` returns an
endpoint ``(ip, port)`` or None when the route has none (the caller refuses the connection).
``update(route)`` swaps the route in place: the very next ``pick`` sees the new endpoints, and
an endpoint that left is never returned again.

* ``random`` (kube-proxy's iptables mode: a uniform draw per connection) or ``round-robin``
  (its IPVS mode's default ``rr``: in turn, over the endpoints in address order).
* ``sessionAffinity: ClientIP``: a client IP's first pick is remembered; later picks within
  ``timeout`` seconds of the last one return the same endpoint while it is still usable (each
  pick refreshes the timer, as iptables' ``recent`` match does). An entry whose endpoint left,
  or that expired, is forgotten and the client picks afresh. Expired entries are dropped as a
  client comes back, and swept when the table grows past ``AFFINITY_SWEEP_AT``.
* ``avoid``: endpoints a caller already failed to reach for this connection (a retry picks
  among the others; with affinity the sticky endpoint is dropped when it fails).

Not here: weights, least-connections, topology.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection
from typing import Literal

from services.proxy.service_table import Route

__all__ = ["AFFINITY_SWEEP_AT", "MODES", "Balancer", "Mode"]

Mode = Literal["random", "round-robin"]
MODES: tuple[Mode, ...] = ("random", "round-robin")
Address = tuple[str, int]

AFFINITY_SWEEP_AT = 4096
"""Affinity entries kept before a pick sweeps out the expired ones (bounds memory when many
clients come once and never again)."""


class Balancer:
    def __init__(
        self,
        route: Route,
        *,
        mode: Mode = "random",
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.mode = mode
        self._clock = clock
        self._rng = rng or random.Random()
        self._next = 0
        self._sticky: dict[str, tuple[Address, float]] = {}
        self.route = route
        self._usable: frozenset[Address] = frozenset(route.endpoints)

    def update(self, route: Route) -> None:
        """From now on, pick among ``route``'s endpoints (and with its affinity)."""
        self.route = route
        self._usable = frozenset(route.endpoints)
        if route.affinity_timeout is None:
            self._sticky.clear()

    @property
    def has_endpoints(self) -> bool:
        return bool(self.route.endpoints)

    def pick(self, client_ip: str, *, avoid: Collection[Address] = ()) -> Address | None:
        """The endpoint for a new connection from ``client_ip``; None when there is none."""
        timeout = self.route.affinity_timeout
        if timeout is None:
            return self._choose(avoid)
        now = self._clock()
        held = self._sticky.get(client_ip)
        if held is not None:
            address, last = held
            if now - last <= timeout and address in self._usable and address not in avoid:
                self._sticky[client_ip] = (address, now)
                return address
        chosen = self._choose(avoid)
        if chosen is None:
            self._sticky.pop(client_ip, None)
            return None
        if len(self._sticky) >= AFFINITY_SWEEP_AT:
            self._sweep(now, timeout)
        self._sticky[client_ip] = (chosen, now)
        return chosen

    def _choose(self, avoid: Collection[Address]) -> Address | None:
        endpoints = self.route.endpoints
        if avoid:
            endpoints = tuple(e for e in endpoints if e not in avoid)
        if not endpoints:
            return None
        if self.mode == "random":
            return endpoints[self._rng.randrange(len(endpoints))]
        self._next = (self._next + 1) % len(endpoints)
        return endpoints[self._next]

    def _sweep(self, now: float, timeout: float) -> None:
        self._sticky = {
            client: (address, last)
            for client, (address, last) in self._sticky.items()
            if now - last <= timeout and address in self._usable
        }
