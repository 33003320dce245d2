"""Events expire ``--event-ttl`` after their newest timestamp; fresher ones are kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api.meta import format_time
from services.apiserver.context import CONTEXT
from services.apiserver.eventttl import sweep_once
from tests.apiserver.conftest import Api

EVENTS = "/api/v1/namespaces/default/events"


def event(name: str, *, last: datetime) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
        "reason": "Test",
        "message": name,
        "type": "Normal",
        "firstTimestamp": format_time(last),
        "lastTimestamp": format_time(last),
        "count": 1,
    }


async def test_sweep_deletes_only_expired_events(api: Api) -> None:
    now = datetime.now(UTC)
    await api.ok("POST", EVENTS, event("once", last=now))
    await api.ok("POST", EVENTS, event("again", last=now))
    # "again" recurs an hour later: its count and lastTimestamp move on
    await api.patch(
        f"{EVENTS}/again", {"count": 2, "lastTimestamp": format_time(now + timedelta(hours=1))}
    )
    ctx = api.client.app[CONTEXT]
    assert await sweep_once(ctx, ttl=3600) == 0
    assert await sweep_once(ctx, ttl=3600, now=now + timedelta(minutes=90)) == 1
    listed = await api.ok("GET", EVENTS)
    assert [e["metadata"]["name"] for e in listed["items"]] == ["again"]
    assert await sweep_once(ctx, ttl=3600, now=now + timedelta(hours=3)) == 1
    assert (await api.ok("GET", EVENTS))["items"] == []


async def test_field_selectors_on_involved_object(api: Api) -> None:
    now = datetime.now(UTC)
    await api.ok("POST", EVENTS, event("e1", last=now))
    other = event("e2", last=now)
    other["involvedObject"]["name"] = "q"
    await api.ok("POST", EVENTS, other)
    listed = await api.ok(
        "GET",
        f"{EVENTS}?fieldSelector=involvedObject.name%3Dq,involvedObject.namespace%3Ddefault",
    )
    assert [e["metadata"]["name"] for e in listed["items"]] == ["e2"]
