"""``bench.watch_fanout_cpu`` measures what it says: namespace watchers each get every event
through the apiserver's direct writer, node watchers only their node's (a third of the bytes
with three nodes)."""

from __future__ import annotations

from bench.watch_fanout_cpu import cpu_per_event


async def test_every_namespace_watcher_gets_every_event_and_a_node_watcher_its_own() -> None:
    _, everyone = await cpu_per_event(watchers=3, events=6, by_node=False)
    _, by_node = await cpu_per_event(watchers=3, events=6, by_node=True)
    assert everyone > 0
    assert everyone == 3 * by_node
