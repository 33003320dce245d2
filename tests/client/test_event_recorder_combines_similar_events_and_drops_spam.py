"""The event recorder correlates as client-go's does: events that differ only in message are
one "(combined from similar events)" Event from the tenth on, a source gets 25 events per
object and then one per five minutes, and the real kubectl describes the result as Kubernetes'
would — against a real apiserver app on loopback, the recorder's clock moved by hand."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from api.registry import REGISTRY
from client.events import (
    AGGREGATE_INTERVAL,
    AGGREGATE_MAX_EVENTS,
    COMBINED_PREFIX,
    SPAM_BURST,
    SPAM_QPS,
    EventRecorder,
)
from client.rest import ApiClient
from services.apiserver.app import make_app
from services.apiserver.context import ServerOptions
from tests import factories
from tests.kubectl.harness import Kubectl

EVENTS = REGISTRY.by_kind("", "Event")
RCS = REGISTRY.by_kind("", "ReplicationController")
assert EVENTS is not None
ServerFactory = Callable[..., Awaitable[TestServer]]
RC = {
    "apiVersion": "v1",
    "kind": "ReplicationController",
    "metadata": {"name": "web", "namespace": "default", "uid": "rc-1"},
}


class Clock:
    """Seconds since the epoch that move only when the test says so."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


async def events_about(client: ApiClient, name: str) -> list[dict[str, Any]]:
    assert EVENTS is not None
    body = await client.list(
        EVENTS, namespace="default", field_selector=f"involvedObject.name={name}"
    )
    return sorted(body["items"], key=lambda e: e["firstTimestamp"] + e["message"])


@pytest.fixture
async def server(aiohttp_server: ServerFactory) -> TestServer:
    return await aiohttp_server(make_app(ServerOptions(store_url="memory://")))


@pytest.fixture
async def client(server: TestServer) -> AsyncIterator[ApiClient]:
    async with ApiClient(server=str(server.make_url("")).rstrip("/")) as c:
        yield c


@pytest.fixture
def clock() -> Clock:
    return Clock(time.time() - 3600)


@pytest.fixture
async def recorder(client: ApiClient, clock: Clock) -> AsyncIterator[EventRecorder]:
    rec = EventRecorder(client, component="replication-controller", host="cm", clock=clock)
    task = rec.start()
    yield rec
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_similar_events_from_the_tenth_on_are_one_combined_event(
    client: ApiClient, recorder: EventRecorder, clock: Clock
) -> None:
    for i in range(12):
        recorder.event(RC, "Normal", "SuccessfulCreate", f"Created pod: web-{i}")
        clock.now += 1
        await recorder.flush()
    events = await events_about(client, "web")
    singles = [e for e in events if not e["message"].startswith(COMBINED_PREFIX)]
    [combined] = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert [e["message"] for e in singles] == [
        f"Created pod: web-{i}" for i in range(AGGREGATE_MAX_EVENTS - 1)
    ]
    assert all(e["count"] == 1 for e in singles)
    assert combined["message"] == "(combined from similar events): Created pod: web-11"
    assert combined["count"] == 3
    assert (combined["reason"], combined["type"]) == ("SuccessfulCreate", "Normal")
    assert combined["firstTimestamp"] < combined["lastTimestamp"]
    assert recorder.written == AGGREGATE_MAX_EVENTS - 1 + 3, "one create, then patches"

    clock.now += AGGREGATE_INTERVAL + 1  # a quiet spell: the group starts afresh
    recorder.event(RC, "Normal", "SuccessfulCreate", "Created pod: web-12")
    await recorder.flush()
    assert "Created pod: web-12" in [e["message"] for e in await events_about(client, "web")]


async def test_a_source_gets_25_events_per_object_then_one_per_five_minutes(
    client: ApiClient, recorder: EventRecorder, clock: Clock
) -> None:
    other = RC | {"metadata": {"name": "api", "namespace": "default", "uid": "rc-2"}}
    for i in range(SPAM_BURST + 5):
        recorder.event(RC, "Warning", f"Reason{i}", "something went wrong")
    recorder.event(other, "Warning", "Reason0", "something went wrong")
    await recorder.flush()
    assert len(await events_about(client, "web")) == SPAM_BURST
    assert recorder.spam_dropped == 5
    assert len(await events_about(client, "api")) == 1, "each object has its own allowance"

    recorder.event(RC, "Warning", "Late", "still wrong")
    assert recorder.spam_dropped == 6
    clock.now += 1 / SPAM_QPS  # one token back
    recorder.event(RC, "Warning", "Later", "still wrong")
    recorder.event(RC, "Warning", "Latest", "still wrong")
    await recorder.flush()
    reasons = {e["reason"] for e in await events_about(client, "web")}
    assert "Later" in reasons and "Late" not in reasons and "Latest" not in reasons
    assert recorder.spam_dropped == 7


async def test_dropped_repeats_still_count_in_the_events_next_write(
    client: ApiClient, recorder: EventRecorder, clock: Clock
) -> None:
    recorder.event(RC, "Warning", "FailedCreate", "quota exceeded")
    await recorder.flush()
    for i in range(SPAM_BURST - 1):
        recorder.event(RC, "Normal", f"Other{i}", "x")
    for _ in range(3):
        recorder.event(RC, "Warning", "FailedCreate", "quota exceeded")
    await recorder.flush()
    assert recorder.spam_dropped == 3
    clock.now += 1 / SPAM_QPS
    recorder.event(RC, "Warning", "FailedCreate", "quota exceeded")
    await recorder.flush()
    [event] = [e for e in await events_about(client, "web") if e["reason"] == "FailedCreate"]
    assert event["count"] == 5, "1 written + 3 dropped + 1 written, as client-go counts"


@pytest.mark.kubectl
async def test_kubectl_describe_shows_the_combined_event_with_its_count(
    server: TestServer, client: ApiClient, recorder: EventRecorder, clock: Clock, tmp_path: Path
) -> None:
    assert RCS is not None
    rc = await client.create(RCS, factories.rc("web", replicas=0, namespace="default"))
    for i in range(AGGREGATE_MAX_EVENTS + 2):
        recorder.event(rc, "Normal", "SuccessfulCreate", f"Created pod: web-{i}")
        clock.now += 60
        await recorder.flush()
    kubectl = Kubectl.on(str(server.make_url("")).rstrip("/"), workdir=tmp_path)
    out = (await asyncio.to_thread(kubectl, "describe", "rc", "web")).stdout
    events = out.split("Events:", 1)[1]
    assert re.search(
        r"Normal\s+SuccessfulCreate\s+\S+ \(x3 over \S+\)\s+replication-controller\s+"
        r"\(combined from similar events\): Created pod: web-11",
        events,
    ), events
    assert re.search(
        r"Normal\s+SuccessfulCreate\s+\S+\s+replication-controller\s+Created pod: web-0\n",
        events,
    ), events


async def test_the_correlation_memory_forgets_the_least_recently_seen_objects(
    client: ApiClient, clock: Clock
) -> None:
    recorder = EventRecorder(client, component="c", host="h", clock=clock, cache_size=2)
    api = RC | {"metadata": {"name": "api", "namespace": "default", "uid": "rc-2"}}
    db = RC | {"metadata": {"name": "db", "namespace": "default", "uid": "rc-3"}}
    for i in range(SPAM_BURST + 1):
        recorder.event(RC, "Warning", f"Reason{i}", "x")
    assert recorder.spam_dropped == 1
    recorder.event(api, "Warning", "Reason0", "x")
    recorder.event(db, "Warning", "Reason0", "x")  # three objects in a memory of two
    recorder.event(RC, "Warning", "Again", "x")
    assert recorder.spam_dropped == 1, "web's spent allowance was forgotten, as after a restart"
