"""The watch cache's own cost per delivered event, apart from the writes that make the events and
the sockets that carry them.

Why: the suite's ``watch/fan-out`` rows are events/s through a real apiserver, and at 10 and 100
watchers they are bounded by the pod creates that feed the watchers (``keeping up`` is 1.00), so
they cannot show what the fan-out itself costs. This measures it in one process: pods are
written to a ``MemoryStore`` through ``ObjectStorage``; the watch cache feeds W watchers, each
with the apiserver's ``DirectWriter`` onto a transport that only counts the bytes it is given
(no syscalls); the figure is CPU time (``time.process_time``) per event, less the same run with
one watcher, over the W - 1 extra deliveries. ``--selector node`` gives every watcher
``fieldSelector=spec.nodeName=nodeN`` (what a kubelet watches) and each pod one of those nodes:
then an event reaches one watcher, and the CPU per event should not grow with W.

Run: ``python -m bench.watch_fanout_cpu [--events 400] [--watchers 100,1000] [--rounds 3]``.
Prints a table; not a test and not in the suite. CPU time is less disturbed by other work on
the machine than wall time, not immune to it: compare runs made back to back.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from api.registry import REGISTRY
from bench.api import pod_body
from services.apiserver.predicate import Predicate
from services.apiserver.storage import ObjectStorage
from services.apiserver.watch import DirectWriter
from services.apiserver.watchcache import WatchCache
from store.memory import MemoryStore

PODS = REGISTRY.require("", "Pod")


class CountingTransport(asyncio.Transport):
    """A connection that is never closing, never backed up, and keeps only a byte count."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)


async def cpu_per_event(*, watchers: int, events: int, by_node: bool) -> tuple[float, int]:
    """CPU seconds per event (writes, feeding and fan-out) and the bytes the watchers got."""
    store = MemoryStore()
    cache = WatchCache(store, PODS)
    feeding = asyncio.create_task(cache.run(), name="bench watch cache")
    await cache.ready.wait()
    storage = ObjectStorage(store, PODS)
    transports = []
    for n in range(watchers):
        if by_node:
            predicate = Predicate.parse(
                PODS, namespace=None, field_selector=f"spec.nodeName=node{n}"
            )
        else:
            predicate = Predicate.parse(PODS, namespace="default")
        watcher = cache.watch_from(predicate, after=cache.revision)
        assert watcher is not None
        transport = CountingTransport()
        transports.append(transport)
        watcher.direct = DirectWriter(transport, watcher)
    bodies = []
    for i in range(events):
        body = pod_body(i)
        body["metadata"]["namespace"] = "default"
        body["spec"]["nodeName"] = f"node{i % watchers}"
        bodies.append(body)
    start = time.process_time()
    revision = 0
    for body in bodies:
        created = await storage.create(body)
        revision = int(created["metadata"]["resourceVersion"])
    await cache.wait_until(revision)
    await asyncio.sleep(0)  # the direct writers' flushes, scheduled with call_soon
    used = time.process_time() - start
    cache.stop()
    feeding.cancel()
    return used / events, sum(t.written for t in transports)


async def run(args: argparse.Namespace) -> str:
    lines = [
        f"watch cache CPU per event, {args.events} pod events, best of {args.rounds} rounds",
        f"{'watchers':>8} {'selector':>9} {'us/event':>9} {'us/delivery':>12} {'MiB sent':>9}",
    ]

    async def best(watchers: int, by_node: bool) -> tuple[float, int]:
        runs = [
            await cpu_per_event(watchers=watchers, events=args.events, by_node=by_node)
            for _ in range(args.rounds)
        ]
        return min(runs)

    one, _ = await best(1, by_node=False)
    lines.append(f"{1:>8} {'namespace':>9} {one * 1e6:>9.1f} {'':>12} {'':>9}")
    for watchers in args.watchers:
        for by_node in (False, True):
            per_event, sent = await best(watchers, by_node)
            deliveries = 1 if by_node else watchers
            per_delivery = (
                f"{(per_event - one) / (deliveries - 1) * 1e6:>12.2f}" if deliveries > 1 else ""
            )
            label = "node" if by_node else "namespace"
            lines.append(
                f"{watchers:>8} {label:>9} {per_event * 1e6:>9.1f} {per_delivery:>12} "
                f"{sent / 2**20:>9.1f}"
            )
    lines.append(
        "us/delivery: (us/event - us/event with one watcher) over the extra deliveries; "
        "node: each watcher watches spec.nodeName=nodeN, so an event reaches one of them"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.watch_fanout_cpu", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--events", type=int, default=400, help="pod events per run (400)")
    parser.add_argument(
        "--watchers",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[100, 1000],
        help="watcher counts (default 100,1000)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs per figure; best kept (3)")
    args = parser.parse_args(argv)
    import uvloop

    print(uvloop.run(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
