"""The CronJob time arithmetic, as robfig/cron and Kubernetes' cronjob utils compute it: the
next activation (macros, day-of-month/day-of-week combination, time zones and DST, ``@every``),
the most recent missed activation with and without ``startingDeadlineSeconds``, the >100 missed
estimate, the requeue instant, and the Job a CronJob makes (name, annotation, owner)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from api.cron import parse_schedule
from services.controller_manager.cronjob import CRONJOBS
from services.controller_manager.cronjob_schedule import (
    SCHEDULED_TIMESTAMP_ANNOTATION,
    InvalidSchedule,
    cron_schedule,
    format_rfc1123z,
    job_from_template,
    job_name,
    most_recent,
    next_wake,
)
from tests.factories import cron_job


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def nxt(spec: str, after: str, zone: str = "UTC") -> datetime | None:
    return parse_schedule(spec).next_after(at(after), zone=ZoneInfo(zone))


def stored(spec: str, *, created: str, last: str | None = None, **fields: object) -> dict:
    """A CronJob as the controller reads it from its cache."""
    obj = cron_job("c", schedule=spec, **fields)
    obj["metadata"].update(namespace="default", uid="u-1", creationTimestamp=created)
    if last is not None:
        obj["status"] = {"lastScheduleTime": last}
    return obj


@pytest.mark.parametrize(
    ("spec", "after", "expected"),
    [
        ("*/1 * * * *", "2024-03-01T12:00:00.500+00:00", "2024-03-01T12:01:00+00:00"),
        ("*/1 * * * *", "2024-03-01T12:00:00+00:00", "2024-03-01T12:01:00+00:00"),
        ("*/15 * * * *", "2024-03-01T12:01:00+00:00", "2024-03-01T12:15:00+00:00"),
        ("@hourly", "2024-03-01T12:01:00+00:00", "2024-03-01T13:00:00+00:00"),
        ("@daily", "2024-03-01T12:01:00+00:00", "2024-03-02T00:00:00+00:00"),
        ("@midnight", "2024-03-01T12:01:00+00:00", "2024-03-02T00:00:00+00:00"),
        ("@weekly", "2024-03-01T12:01:00+00:00", "2024-03-03T00:00:00+00:00"),  # a Sunday
        ("@monthly", "2024-03-01T12:01:00+00:00", "2024-04-01T00:00:00+00:00"),
        ("@yearly", "2024-03-01T12:01:00+00:00", "2025-01-01T00:00:00+00:00"),
        ("@annually", "2024-03-01T12:01:00+00:00", "2025-01-01T00:00:00+00:00"),
        # both day fields restricted: either matches (Friday 8th before the 13th)
        ("0 0 13 * 5", "2024-03-01T12:00:00+00:00", "2024-03-08T00:00:00+00:00"),
        # a wildcard day of month: the weekday alone decides
        ("0 0 * * fri", "2024-03-01T12:00:00+00:00", "2024-03-08T00:00:00+00:00"),
        ("0 0 29 2 *", "2024-03-01T00:00:00+00:00", "2028-02-29T00:00:00+00:00"),
        ("@every 90s", "2024-03-01T12:00:00.700+00:00", "2024-03-01T12:01:30+00:00"),
        ("@every 200ms", "2024-03-01T12:00:00+00:00", "2024-03-01T12:00:01+00:00"),
    ],
)
def test_next_activation(spec: str, after: str, expected: str) -> None:
    assert nxt(spec, after) == at(expected)


def test_a_schedule_that_never_fires_has_no_next() -> None:
    assert nxt("0 0 30 2 *", "2024-01-01T00:00:00+00:00") is None


def test_time_zone_and_daylight_saving() -> None:
    assert nxt("0 9 * * *", "2024-03-01T12:00:00+00:00", "Asia/Tokyo") == at(
        "2024-03-02T00:00:00+00:00"
    )
    # 02:30 does not exist in New York on 2024-03-10: skipped to the next day
    assert nxt("30 2 * * *", "2024-03-10T00:00:00+00:00", "America/New_York") == at(
        "2024-03-11T06:30:00+00:00"
    )
    # 01:30 happens twice on 2024-11-03 (EDT, then EST)
    first = nxt("30 1 * * *", "2024-11-03T04:00:00+00:00", "America/New_York")
    assert first == at("2024-11-03T05:30:00+00:00")
    assert parse_schedule("30 1 * * *").next_after(first, zone=ZoneInfo("America/New_York")) == at(
        "2024-11-03T06:30:00+00:00"
    )


def test_most_recent_activation_and_missed_estimate() -> None:
    every_minute = stored("*/1 * * * *", created="2024-03-01T12:00:10Z")
    sched, zone = cron_schedule(every_minute)

    def recent(cj: dict, now: str, *, deadline: bool = True) -> tuple[datetime | None, int]:
        r = most_recent(cj, at(now), schedule=sched, zone=zone, with_deadline=deadline)
        return r.time, r.missed

    assert recent(every_minute, "2024-03-01T12:00:59+00:00") == (None, 0)
    assert recent(every_minute, "2024-03-01T12:01:00+00:00") == (at("2024-03-01T12:01:00Z"), 0)
    assert recent(every_minute, "2024-03-01T12:05:30+00:00") == (at("2024-03-01T12:05:00Z"), 5)
    # the last schedule time, not the creation time, is where the search starts
    ran = stored("*/1 * * * *", created="2024-03-01T12:00:10Z", last="2024-03-01T12:05:00Z")
    assert recent(ran, "2024-03-01T12:05:30+00:00") == (None, 0)
    # a week away: the most recent one, flagged as many
    r = most_recent(ran, at("2024-03-08T12:05:30+00:00"), schedule=sched, zone=zone,
                    with_deadline=True)  # fmt: skip
    assert r.time == at("2024-03-08T12:05:00Z") and r.many
    # a deadline of 20 s: 12:05 is out of reach at 12:05:30, 12:06 in reach at 12:06:10
    late = stored("*/1 * * * *", created="2024-03-01T12:00:10Z", startingDeadlineSeconds=20)
    assert recent(late, "2024-03-01T12:05:30+00:00") == (None, 0)
    assert recent(late, "2024-03-01T12:05:30+00:00", deadline=False)[0] == at("2024-03-01T12:05Z")
    assert recent(late, "2024-03-01T12:06:10+00:00") == (at("2024-03-01T12:06:00Z"), 0)


def test_irregular_schedule_finds_the_latest_weekday_run() -> None:
    cj = stored("30 6-16/4 * * 1-5", created="2024-03-01T00:00:00Z")  # Friday
    sched, zone = cron_schedule(cj)
    r = most_recent(cj, at("2024-03-06T12:00:00+00:00"), schedule=sched, zone=zone,
                    with_deadline=True)  # fmt: skip
    assert r.time == at("2024-03-06T10:30:00Z")


def test_unfollowable_schedule_is_invalid() -> None:
    cj = stored("0 0 30 2 *", created="2024-03-01T00:00:00Z")
    sched, zone = cron_schedule(cj)
    with pytest.raises(InvalidSchedule, match="less than 1 second"):
        most_recent(cj, at("2024-03-06T12:00:00+00:00"), schedule=sched, zone=zone,
                    with_deadline=True)  # fmt: skip


def test_next_wake_is_the_following_activation_plus_padding() -> None:
    cj = stored("*/1 * * * *", created="2024-03-01T12:00:10Z")
    sched, zone = cron_schedule(cj)
    pad = timedelta(milliseconds=100)
    assert next_wake(cj, at("2024-03-01T12:00:20+00:00"), schedule=sched, zone=zone) == (
        at("2024-03-01T12:01:00Z") + pad
    )
    assert next_wake(cj, at("2024-03-01T12:05:30+00:00"), schedule=sched, zone=zone) == (
        at("2024-03-01T12:06:00Z") + pad
    )


def test_job_from_template() -> None:
    cj = stored("0 9 * * *", created="2024-03-01T00:00:00Z", timeZone="Asia/Tokyo",
                labels={"team": "a"})  # fmt: skip
    cj["spec"]["jobTemplate"]["metadata"]["annotations"] = {"note": "x"}
    scheduled = at("2024-03-02T00:00:00Z")
    job = job_from_template(cj, scheduled, cronjob_rt=CRONJOBS)
    assert job["metadata"]["name"] == job_name("c", scheduled) == f"c-{1709337600 // 60}"
    assert job["metadata"]["labels"] == {"team": "a"}
    assert job["metadata"]["annotations"] == {
        "note": "x",
        SCHEDULED_TIMESTAMP_ANNOTATION: "2024-03-02T09:00:00+09:00",
    }
    assert job["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "CronJob", "name": "c", "uid": "u-1",
         "controller": True, "blockOwnerDeletion": True},
    ]  # fmt: skip
    assert job["spec"] == cj["spec"]["jobTemplate"]["spec"]
    utc = stored("0 9 * * *", created="2024-03-01T00:00:00Z")
    stamp = job_from_template(utc, scheduled, cronjob_rt=CRONJOBS)["metadata"]["annotations"]
    assert stamp[SCHEDULED_TIMESTAMP_ANNOTATION] == "2024-03-02T00:00:00Z"
    assert format_rfc1123z(scheduled) == "Sat, 02 Mar 2024 00:00:00 +0000"
