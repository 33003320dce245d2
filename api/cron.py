"""Cron schedules as a CronJob's ``spec.schedule`` states them, parsed as Kubernetes parses them.

Why: Kubernetes validates (and its CronJob controller runs) schedules with robfig/cron's
``ParseStandard``: five fields (minute, hour, day of month, month, day of week) of ``*``, ``?``,
numbers, names (``jan``, ``mon``), ranges ``a-b``, steps ``/n`` and lists ``a,b``, or one of the
descriptors ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``,
``@hourly`` and ``@every <duration>``. The apiserver refuses a bad schedule with robfig's own
words (``expected exactly 5 fields, found 1: [x]``) and kubectl shows them, so ``parse_schedule``
raises ``ValueError`` with exactly those messages.

``Schedule.next_after(t, zone=...)`` is robfig's ``Schedule.Next``: the first activation strictly
after ``t`` (whole seconds), searched in the schedule's zone (a ``TZ=`` prefix, else ``zone``),
or None when there is none within five years (robfig's zero time: ``0 0 30 2 *``). Day of month
and day of week combine as robfig combines them: if either field is a wildcard (``*`` or ``?``
without a step above 1) both must match, otherwise either may. ``@every d`` is a constant delay
(``t`` truncated to the second, plus ``d`` truncated to the second, at least one second).

Limits: a ``TZ=``/``CRON_TZ=`` prefix is parsed (its zone must exist) but Kubernetes refuses it
in validation anyway (``timeZone`` is the field for that). Daylight-saving transitions: a wall
time that does not exist that day (spring forward) is skipped; one that happens twice (fall back)
fires twice, as robfig's hour-by-hour walk through absolute time does.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

__all__ = ["Schedule", "parse_schedule"]

_MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int] | None = None


_FIELDS = (
    _Bounds(0, 59),  # minute
    _Bounds(0, 23),  # hour
    _Bounds(1, 31),  # day of month
    _Bounds(1, 12, _MONTHS),  # month
    _Bounds(0, 6, _DAYS),  # day of week
)

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_GO_DURATION = re.compile(r"[-+]?(?:0|(?:[0-9]*\.?[0-9]+(?:ns|us|µs|μs|ms|s|m|h))+)")
_GO_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNIT_SECONDS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}  # fmt: skip
_SEARCH_YEARS = 5
"""robfig gives up (returns the zero time) five years after the time it starts from."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """The values each field allows (``every`` set instead for ``@every <duration>``)."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days_of_month: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    days_of_week: frozenset[int] = frozenset()
    every: str | None = None
    time_zone: str | None = None
    any_day_of_month: bool = False
    """The day-of-month field is a wildcard (robfig's star bit)."""
    any_day_of_week: bool = False
    """The day-of-week field is a wildcard (robfig's star bit)."""

    def next_after(self, t: datetime, *, zone: tzinfo = UTC) -> datetime | None:
        """The first activation after ``t`` (aware), in UTC; None if none within five years."""
        if t.tzinfo is None:
            raise ValueError("next_after needs an aware datetime")
        if self.every is not None:
            delay = max(1, int(_go_duration_seconds(self.every)))
            return (t.replace(microsecond=0) + timedelta(seconds=delay)).astimezone(UTC)
        tz = zoneinfo.ZoneInfo(self.time_zone) if self.time_zone else zone
        day = t.astimezone(tz).date()
        last = date(day.year + _SEARCH_YEARS, 12, 31)
        while day <= last:
            if day.month in self.months and self._day_matches(day):
                for instant in _activations(day, tz, hours=self.hours, minutes=self.minutes):
                    if instant > t:
                        return instant
            day += timedelta(days=1)
        return None

    def _day_matches(self, day: date) -> bool:
        dom = day.day in self.days_of_month
        dow = (day.weekday() + 1) % 7 in self.days_of_week  # cron counts from Sunday = 0
        if self.any_day_of_month or self.any_day_of_week:
            return dom and dow
        return dom or dow


def _activations(
    day: date, tz: tzinfo, *, hours: frozenset[int], minutes: frozenset[int]
) -> Iterator[datetime]:
    """The day's activation instants (UTC), in time order, DST gaps skipped, folds twice."""
    walls = (
        datetime(day.year, day.month, day.day, h, m, tzinfo=tz)
        for h in sorted(hours)
        for m in sorted(minutes)
    )
    start = datetime(day.year, day.month, day.day, tzinfo=tz)
    if start.utcoffset() == (start + timedelta(days=1)).utcoffset():
        yield from (
            w.astimezone(UTC) for w in walls
        )  # no transition today: wall order is time order
        return
    instants: set[datetime] = set()
    for wall in walls:
        for fold in (0, 1):
            instant = wall.replace(fold=fold).astimezone(UTC)
            if instant.astimezone(tz).replace(tzinfo=None) == wall.replace(tzinfo=None):
                instants.add(instant)  # a wall time in a spring-forward gap maps elsewhere
    yield from sorted(instants)


def _go_duration_seconds(text: str) -> float:
    """Go's ``time.ParseDuration`` for a string ``_GO_DURATION`` accepted, in seconds."""
    sign = -1.0 if text.startswith("-") else 1.0
    return sign * sum(
        float(number) * _GO_UNIT_SECONDS[unit] for number, unit in _GO_DURATION_PART.findall(text)
    )


def parse_schedule(spec: str) -> Schedule:
    """A standard cron spec parsed; ``ValueError`` with robfig/cron's message if it is bad."""
    if not spec:
        raise ValueError("empty spec string")
    time_zone = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        head, _, spec = spec.partition(" ")
        time_zone = head.partition("=")[2]
        try:
            zoneinfo.ZoneInfo(time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"provided bad location {time_zone}: unknown time zone {time_zone}"
            ) from None
        spec = spec.strip()
    if spec.startswith("@"):
        if spec.startswith("@every "):
            duration = spec.removeprefix("@every ")
            if not _GO_DURATION.fullmatch(duration):
                raise ValueError(
                    f'failed to parse duration {spec}: time: invalid duration "{duration}"'
                )
            return Schedule(every=duration, time_zone=time_zone)
        if spec not in _DESCRIPTORS:
            raise ValueError(f"unrecognized descriptor: {spec}")
        spec = _DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != len(_FIELDS):
        shown = "[" + " ".join(fields) + "]"
        raise ValueError(f"expected exactly 5 fields, found {len(fields)}: {shown}")
    (minutes, _), (hours, _), (days, any_day), (months, _), (weekdays, any_weekday) = (
        _field(text, bounds) for text, bounds in zip(fields, _FIELDS, strict=True)
    )
    return Schedule(
        minutes=minutes,
        hours=hours,
        days_of_month=days,
        months=months,
        days_of_week=weekdays,
        time_zone=time_zone,
        any_day_of_month=any_day,
        any_day_of_week=any_weekday,
    )


def _field(text: str, bounds: _Bounds) -> tuple[frozenset[int], bool]:
    """The field's values, and whether it is a wildcard (robfig's star bit)."""
    values: set[int] = set()
    wildcard = False
    for expr in filter(None, text.split(",")):
        more, star = _range(expr, bounds)
        values |= more
        wildcard = wildcard or star
    return frozenset(values), wildcard


def _range(expr: str, bounds: _Bounds) -> tuple[set[int], bool]:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    if star:
        start, end = bounds.low, bounds.high
    else:
        start = _int_or_name(low_and_high[0], bounds.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds.names)
        else:
            raise ValueError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _int(range_and_step[1])
        if len(low_and_high) == 1:
            end = bounds.high  # "N/step" means "N-max/step"
    else:
        raise ValueError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise ValueError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise ValueError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ValueError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step)), star and step == 1


def _int_or_name(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    return _int(text)


def _int(text: str) -> int:
    """Go's ``strconv.Atoi`` then robfig's non-negative check, with their messages."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(
            f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax'
        )
    number = int(text)
    if number < 0:
        raise ValueError(f"negative number ({number}) not allowed: {text}")
    return number
