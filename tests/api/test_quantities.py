"""Quantities parse to exact numbers and format back as Kubernetes prints them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from api.quantity import (
    QUANTITY_ERROR,
    canonical_quantity,
    cpu_millis,
    format_quantity,
    parse_quantity,
    to_bytes,
)


@pytest.mark.parametrize(
    ("q", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1", Fraction(1)),
        (1, Fraction(1)),
        (0.25, Fraction(1, 4)),
        ("128Mi", Fraction(128 * 2**20)),
        ("1Gi", Fraction(2**30)),
        ("1G", Fraction(10**9)),
        ("1e3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        ("1k", Fraction(1000)),
        ("1Ki", Fraction(1024)),
        ("5n", Fraction(5, 10**9)),
        ("2u", Fraction(2, 10**6)),
        ("-1", Fraction(-1)),
        ("+3M", Fraction(3 * 10**6)),
        ("1.5Gi", Fraction(3 * 2**29)),
    ],
)
def test_parse_exact(q: str | int | float, value: Fraction) -> None:
    assert parse_quantity(q) == value


@pytest.mark.parametrize(
    "q", ["", "abc", "1ki", "1 Gi", "Mi", "1.2.3", "1e", "1Gi3", "--1", ".", True]
)
def test_invalid_quantities_raise_value_error_with_kubernetes_message(q: object) -> None:
    with pytest.raises(ValueError) as err:
        parse_quantity(q)  # type: ignore[arg-type]
    assert str(err.value) == QUANTITY_ERROR


def test_cpu_millis_and_bytes_round_up() -> None:
    assert cpu_millis("100m") == 100
    assert cpu_millis("0.5") == 500
    assert cpu_millis(2) == 2000
    assert cpu_millis("1n") == 1
    assert to_bytes("128Mi") == 134217728
    assert to_bytes("1G") == 10**9
    assert to_bytes("1.5") == 2


@pytest.mark.parametrize(
    ("q", "canonical"),
    [
        ("0.5", "500m"),
        ("1000m", "1"),
        ("1500", "1500"),
        ("2000", "2k"),
        ("2048Ki", "2Mi"),
        ("1536Mi", "1536Mi"),
        ("0.1Gi", "107374182400m"),
        ("100m", "100m"),
        ("1e3", "1e3"),
        ("0", "0"),
        ("1Gi", "1Gi"),
        (4, "4"),
    ],
)
def test_canonical_form(q: str | int, canonical: str) -> None:
    assert canonical_quantity(q) == canonical
    assert parse_quantity(canonical) == parse_quantity(q)


def test_format_rounds_sub_nano_up() -> None:
    assert format_quantity(Fraction(1, 10**12)) == "1n"
    assert format_quantity(Fraction(-3, 2)) == "-1500m"
    assert format_quantity(3 * 2**30, fmt="BinarySI") == "3Gi"
