"""Cron schedules as a CronJob's ``spec.schedule`` states them, parsed as Kubernetes parses them.

Why: Kubernetes validates (and its CronJob controller runs) schedules with robfig/cron's
``ParseStandard``: five fields (minute, hour, day of month, month, day of week) of ``*``, ``?``,
numbers, names (``jan``, ``mon``), ranges ``a-b``, steps ``/n`` and lists ``a,b``, or one of the
descriptors ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``,
``@hourly`` and ``@every <duration>``. The apiserver refuses a bad schedule with robfig's own
words (``expected exactly 5 fields, found 1: [x]``) and kubectl shows them, so ``parse_schedule``
raises ``ValueError`` with exactly those messages. The controller will read the parsed sets.

Limits: a ``TZ=``/``CRON_TZ=`` prefix is parsed (its zone must exist) but Kubernetes refuses it
in validation anyway (``timeZone`` is the field for that); ``@every`` durations are parsed with
Go's ``time.ParseDuration`` grammar, and must be positive only as far as parsing goes.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass

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
    minutes, hours, days, months, weekdays = (
        _field(text, bounds) for text, bounds in zip(fields, _FIELDS, strict=True)
    )
    return Schedule(
        minutes=minutes,
        hours=hours,
        days_of_month=days,
        months=months,
        days_of_week=weekdays,
        time_zone=time_zone,
    )


def _field(text: str, bounds: _Bounds) -> frozenset[int]:
    values: set[int] = set()
    for expr in filter(None, text.split(",")):
        values |= _range(expr, bounds)
    return frozenset(values)


def _range(expr: str, bounds: _Bounds) -> set[int]:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    if low_and_high[0] in ("*", "?"):
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
    return set(range(start, end + 1, step))


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
