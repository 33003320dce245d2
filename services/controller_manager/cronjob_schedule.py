"""When a CronJob should run, and the Job it runs: the time arithmetic of Kubernetes'
``pkg/controller/cronjob/utils.go``, kept apart from the controller's API traffic.

* ``cron_schedule(cronjob)``: the parsed ``spec.schedule`` and the zone it runs in — a
  ``TZ=``/``CRON_TZ=`` prefix if the object still carries one, else ``spec.timeZone``, else UTC.
  (Kubernetes falls back to the controller-manager's local zone; kubelite fixes it to UTC so a
  schedule means the same on every host — in practice kube-controller-manager runs in UTC.)
* ``most_recent(cronjob, now, ...)``: the latest activation in (earliest, now], where earliest
  is ``status.lastScheduleTime``, else the creation time, and — when ``with_deadline`` — no
  earlier than ``now - startingDeadlineSeconds``. Like Kubernetes it estimates how many were
  missed from the gap between the first two activations (so a controller that was down for
  years does not walk every minute), flags more than 100 as ``many``, and jumps to about two
  intervals before ``now`` to find the latest. A schedule whose next two activations are less
  than a second apart (or that never fires: ``0 0 30 2 *``) is ``InvalidSchedule``.
* ``next_wake(...)``: when to look again — the activation after the most recent one (or after
  ``earliest`` if none was missed), plus 100 ms so a slightly fast clock does not wake early.
* ``job_name`` (``<cronjob>-<scheduled time in minutes since the epoch>``: deterministic, so a
  restarted controller can never create the same run twice) and ``job_from_template`` (the
  template's labels, annotations and spec, the ``cronjob-scheduled-timestamp`` annotation in
  the CronJob's zone, a controller reference).

Limits: pure functions of their arguments; minute granularity for names, as Kubernetes'.
"""

from __future__ import annotations

import copy
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from api.cron import Schedule, parse_schedule
from api.meta import parse_time
from api.registry import ResourceType
from services.controller_manager.controller_ref import new_controller_ref

__all__ = [
    "SCHEDULED_TIMESTAMP_ANNOTATION",
    "InvalidSchedule",
    "MostRecent",
    "cron_schedule",
    "format_rfc1123z",
    "format_rfc3339",
    "job_from_template",
    "job_name",
    "load_zone",
    "most_recent",
    "next_wake",
]

Obj = dict[str, Any]

SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MANY_MISSED = 100
"""Kubernetes' "more than 80 (hourly jobs over a weekend), less than lots"."""
NEXT_SCHEDULE_DELTA = timedelta(milliseconds=100)
"""Kubernetes' padding on the requeue, for clock skew between hosts."""

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class InvalidSchedule(ValueError):
    """A schedule that parses but cannot be followed."""


@dataclass(frozen=True, slots=True)
class MostRecent:
    earliest: datetime
    """Where the search started (last schedule time, creation time, or the deadline)."""
    time: datetime | None
    """The latest activation in (earliest, now], if any."""
    missed: int
    """Estimated activations in (earliest, now]; 0 when at most one."""

    @property
    def many(self) -> bool:
        return self.missed > MANY_MISSED


def _spec(cronjob: Obj) -> Obj:
    return cronjob.get("spec") or {}


def load_zone(name: str | None) -> tzinfo:
    """``spec.timeZone`` as a zone (UTC when unset); ``ValueError`` in Go's words if unknown."""
    if not name:
        return UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name}") from None


def cron_schedule(cronjob: Obj) -> tuple[Schedule, tzinfo]:
    """The schedule and its zone; ``ValueError`` (robfig's or Go's words) for a bad schedule or
    an unknown zone."""
    spec = _spec(cronjob)
    zone = load_zone(spec.get("timeZone"))
    schedule = parse_schedule(str(spec.get("schedule") or ""))
    return schedule, UTC if schedule.time_zone is not None else zone


def _earliest(cronjob: Obj) -> datetime:
    last = (cronjob.get("status") or {}).get("lastScheduleTime")
    return parse_time(str(last or cronjob["metadata"]["creationTimestamp"]))


def most_recent(
    cronjob: Obj, now: datetime, *, schedule: Schedule, zone: tzinfo, with_deadline: bool
) -> MostRecent:
    earliest = _earliest(cronjob)
    deadline = _spec(cronjob).get("startingDeadlineSeconds")
    if with_deadline and deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=int(deadline)))
    t1 = schedule.next_after(earliest, zone=zone)
    t2 = schedule.next_after(t1, zone=zone) if t1 is not None else None
    if t1 is not None and now < t1:
        return MostRecent(earliest, None, 0)
    if t1 is not None and t2 is not None and now < t2:
        return MostRecent(earliest, t1, 0)
    interval = round((t2 - t1).total_seconds()) if t1 is not None and t2 is not None else 0
    if t1 is None or interval < 1:
        raise InvalidSchedule("time difference between two schedules is less than 1 second")
    missed = int((now - t1).total_seconds()) // interval + 1
    # Start about two intervals before now and let the schedule find the latest activation:
    # exact for regular schedules, and for irregular ones ("30 6-16/4 * * 1-5") too.
    t = t1 + timedelta(seconds=(missed - 2) * interval)
    latest = None
    while (after := schedule.next_after(t, zone=zone)) is not None and after <= now:
        latest = t = after
    return MostRecent(earliest, latest, missed)


def next_wake(cronjob: Obj, now: datetime, *, schedule: Schedule, zone: tzinfo) -> datetime | None:
    """When the controller should look at ``cronjob`` again (None: the schedule never fires)."""
    try:
        recent = most_recent(cronjob, now, schedule=schedule, zone=zone, with_deadline=False)
    except InvalidSchedule:
        base = now
    else:
        base = recent.time or (recent.earliest if recent.missed == 0 else now)
    after = schedule.next_after(base, zone=zone)
    return None if after is None else after + NEXT_SCHEDULE_DELTA


def job_name(cronjob_name: str, scheduled: datetime) -> str:
    return f"{cronjob_name}-{int(scheduled.timestamp()) // 60}"


def format_rfc3339(t: datetime) -> str:
    """Go's ``time.RFC3339``: ``2024-01-02T09:00:00+09:00``, ``Z`` for UTC."""
    text = t.replace(microsecond=0).isoformat()
    return text.removesuffix("+00:00") + "Z" if t.utcoffset() == timedelta(0) else text


def format_rfc1123z(t: datetime) -> str:
    """Go's ``time.RFC1123Z`` in UTC: ``Mon, 02 Jan 2006 15:04:05 +0000``."""
    u = t.astimezone(UTC)
    return f"{_DAYS[u.weekday()]}, {u.day:02d} {_MONTHS[u.month - 1]} {u:%Y %H:%M:%S} +0000"


def job_from_template(cronjob: Obj, scheduled: datetime, *, cronjob_rt: ResourceType) -> Obj:
    """The Job to create for the activation at ``scheduled``."""
    meta = cronjob["metadata"]
    template = _spec(cronjob).get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    zone = load_zone(_spec(cronjob).get("timeZone"))
    annotations = dict(tmeta.get("annotations") or {})
    annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = format_rfc3339(scheduled.astimezone(zone))
    job_meta: Obj = {
        "name": job_name(meta["name"], scheduled),
        "namespace": meta.get("namespace"),
        "annotations": annotations,
        "ownerReferences": [new_controller_ref(cronjob, cronjob_rt)],
    }
    if tmeta.get("labels"):
        job_meta["labels"] = dict(tmeta["labels"])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }
