"""Kubernetes resource quantities (``100m``, ``0.5``, ``128Mi``, ``1G``, ``1e3``) as exact numbers.

Why: requests, limits, capacity and allocatable are quantities; the scheduler sums them and
compares them, the kubelet reports them, validation checks ``requests <= limits``. Floats would
make ``0.1 + 0.2`` CPUs differ from ``300m``; here every quantity is a ``Fraction``.

What it owns: parsing with the grammar ``resource.Quantity`` accepts (a signed decimal number,
then an optional suffix: binary ``Ki Mi Gi Ti Pi Ei``, decimal ``n u m k M G T P E``, or a
decimal exponent ``e3``/``E-3``), and formatting back in Kubernetes' canonical style
(``0.5`` -> ``500m``, ``2048Ki`` -> ``2Mi``, ``1500`` -> ``1500``).

Limits: values below one nano-unit are rounded up to ``1n`` when formatted (as Kubernetes does);
``cpu_millis``/``to_bytes`` round up to whole units. No upper bound is enforced.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Literal

__all__ = [
    "QUANTITY_ERROR",
    "canonical_quantity",
    "cpu_millis",
    "format_quantity",
    "parse_quantity",
    "quantity_format",
    "to_bytes",
]

QUANTITY_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
"""Kubernetes' own wording for an unparsable quantity."""

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_NUMBER = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX = {n: suffix for suffix, n in _BINARY.items()}


def _split(q: str) -> tuple[Fraction, str]:
    m = _NUMBER.match(q)
    if not m:
        raise ValueError(QUANTITY_ERROR)
    sign, digits, suffix = m.groups()
    number = Fraction(digits)
    return (-number if sign == "-" else number), suffix


# Every pod create defaults and validates each of its quantities several times, and the
# same few strings ("100m", "64Mi") recur across a cluster: Fractions are immutable, so the
# parse is cached (typed, so 1, 1.0 and True stay apart; errors are never cached).
@functools.lru_cache(maxsize=4096, typed=True)
def parse_quantity(q: str | int | float) -> Fraction:
    """The exact value of a quantity; ``ValueError`` (Kubernetes' message) when it is not one."""
    if isinstance(q, bool):
        raise ValueError(QUANTITY_ERROR)
    if isinstance(q, int):
        return Fraction(q)
    if isinstance(q, float):
        if not math.isfinite(q):
            raise ValueError(QUANTITY_ERROR)
        return Fraction(str(q))
    if not isinstance(q, str) or not q:
        raise ValueError(QUANTITY_ERROR)
    number, suffix = _split(q)
    if suffix in _BINARY:
        return number * Fraction(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix]
    m = _EXPONENT.match(suffix)
    if m:
        return number * Fraction(10) ** int(m.group(1))
    raise ValueError(QUANTITY_ERROR)


def quantity_format(q: str | int | float) -> Format:
    """Which format a quantity was written in; canonical output keeps it."""
    if not isinstance(q, str):
        return "DecimalSI"
    _, suffix = _split(q)
    if suffix in _BINARY:
        return "BinarySI"
    if _EXPONENT.match(suffix):
        return "DecimalExponent"
    return "DecimalSI"


def format_quantity(value: Fraction | int, *, fmt: Format = "DecimalSI") -> str:
    """Kubernetes' canonical string for ``value``: the largest suffix giving an integer mantissa."""
    value = Fraction(value)
    sign = "-" if value < 0 else ""
    value = abs(value)
    if fmt == "BinarySI" and value.denominator == 1 and value >= 1024:
        n = 0
        while n < 6 and value % 1024 ** (n + 1) == 0:
            n += 1
        if n:
            return f"{sign}{value // 1024**n}{_BINARY_SUFFIX[n]}"
    if fmt == "BinarySI" and value.denominator == 1:
        return f"{sign}{value}"
    # round up to a whole number of nano-units, then pick the largest exponent (multiple of 3)
    nanos = math.ceil(value * 10**9)
    exp = -9
    while exp < 18 and nanos % 1000 == 0 and nanos:
        nanos //= 1000
        exp += 3
    if nanos == 0:
        return "0"
    if fmt == "DecimalExponent":
        return f"{sign}{nanos}" + (f"e{exp}" if exp else "")
    return f"{sign}{nanos}{_DECIMAL_SUFFIX[exp]}"


@functools.lru_cache(maxsize=4096, typed=True)
def canonical_quantity(q: str | int | float) -> str:
    """``q`` re-written in canonical form, keeping its format (``"0.5"`` -> ``"500m"``)."""
    return format_quantity(parse_quantity(q), fmt=quantity_format(q))


def cpu_millis(q: str | int | float) -> int:
    """A CPU quantity in millicores, rounded up (``"100m"`` -> 100, ``"0.5"`` -> 500, ``1`` -> 1000)."""
    return math.ceil(parse_quantity(q) * 1000)


def to_bytes(q: str | int | float) -> int:
    """A memory/storage quantity in bytes (or a count in units), rounded up (``"1Ki"`` -> 1024)."""
    return math.ceil(parse_quantity(q))
