"""A work queue built under a ``WorkQueueMetrics`` provider reports client-go's ``workqueue_*``
metrics as client-go counts them; one built outside any provider reports nowhere."""

from __future__ import annotations

from client.workqueue import WorkQueue
from client.workqueue_metrics import WorkQueueMetrics
from component.metrics import Metrics


def value(metrics: Metrics, name: str, queue: str = "widgets") -> float:
    return metrics.registry.get_sample_value(name, {"name": queue}) or 0.0


async def test_adds_depth_waits_work_and_retries_are_counted_per_queue() -> None:
    metrics = Metrics()
    with WorkQueueMetrics(metrics).providing():
        queue: WorkQueue[str] = WorkQueue(name="widgets")
    quiet: WorkQueue[str] = WorkQueue(name="unmeasured")

    queue.add("a")
    queue.add("a")  # already queued: not an add
    queue.add("b")
    quiet.add("a")
    assert value(metrics, "workqueue_adds_total") == 2
    assert value(metrics, "workqueue_depth") == 2

    key = await queue.get()
    assert value(metrics, "workqueue_depth") == 1
    assert value(metrics, "workqueue_queue_duration_seconds_count") == 1
    assert value(metrics, "workqueue_longest_running_processor_seconds") >= 0
    queue.add(key)  # dirtied while processing: an add, queued again once done
    queue.done(key)
    assert value(metrics, "workqueue_adds_total") == 3
    assert value(metrics, "workqueue_work_duration_seconds_count") == 1
    assert value(metrics, "workqueue_unfinished_work_seconds") == 0

    queue.add_rate_limited("c")
    assert value(metrics, "workqueue_retries_total") == 1
    queue.shut_down()

    page = metrics.render()
    assert 'name="unmeasured"' not in page
    assert 'workqueue_depth{name="widgets"} 2.0' in page  # b, and a again
