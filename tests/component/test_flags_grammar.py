"""The shared flag grammar (``component.flags``): durations, ports, verbosity, server URLs."""

from __future__ import annotations

import argparse
import logging

import pytest

from component.flags import (
    LogFlags,
    add_health_flags,
    add_log_flags,
    add_server_flag,
    format_duration,
    health_address,
    log_flags,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("500ms", 0.5),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("2.5s", 2.5),
        ("1m30s500ms", 90.5),
        ("250us", 0.00025),
        ("250µs", 0.00025),
        ("100ns", 1e-7),
        ("40", 40.0),
        ("0.5", 0.5),
        ("0", 0.0),
        ("0s", 0.0),
        (" 5m ", 300.0),
    ],
)
def test_durations_are_go_durations_or_bare_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "-1s", "-5", "1x", "1m 30s", "s", "1.2.3s", "inf"])
def test_anything_else_is_refused_with_the_forms_named(text: str) -> None:
    with pytest.raises(ValueError, match=r"use e\.g\. 500ms, 15s, 1m30s or 1h"):
        parse_duration(text)


@pytest.mark.parametrize("seconds", [0.0, 0.5, 2.0, 15.0, 90.0, 90.5, 3600.0, 5400.0, 1e-4])
def test_formatted_durations_parse_back(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)
    assert format_duration(90.0) == "1m30s" and format_duration(0.5) == "500ms"


def _parse(add: object, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add(parser)  # type: ignore[operator]
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        ([], logging.INFO),
        (["--log-level", "debug"], logging.DEBUG),
        (["--log-level=WARNING"], logging.WARNING),
        (["-v", "4"], logging.DEBUG),
        (["-v=4"], logging.DEBUG),
        (["--v=5"], logging.DEBUG),
        (["-v", "2"], logging.INFO),
        (["--log-level", "ERROR", "-v", "0"], logging.INFO),  # the more verbose wins
        (["--log-level", "WARNING", "-v", "4"], logging.DEBUG),
        (["--log-level", "DEBUG", "-v", "1"], logging.DEBUG),
    ],
)
def test_log_level_and_verbosity_map_onto_one_level(argv: list[str], level: int) -> None:
    assert log_flags(_parse(add_log_flags, argv)).level == level


@pytest.mark.parametrize("argv", [["-v", "-1"], ["-v", "high"], ["--log-level", "TRACE"]])
def test_bad_logging_flags_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _parse(add_log_flags, argv)
    assert exit_info.value.code == 2


def test_log_flags_default_to_info() -> None:
    assert LogFlags().level == logging.INFO


def test_server_takes_one_or_more_urls_comma_separated_and_repeated() -> None:
    args = _parse(
        add_server_flag,
        [
            "--server",
            "http://a:8080,http://b:8080",
            "--master=https://c:6443",
            "--server",
            "http://d",
        ],
    )
    assert args.server == ["http://a:8080", "http://b:8080", "https://c:6443", "http://d"]
    assert _parse(add_server_flag, []).server is None
    with pytest.raises(SystemExit):
        _parse(add_server_flag, ["--server", "127.0.0.1:8080"])


def test_health_ports_take_0_for_any_and_minus_1_for_off() -> None:
    def add(parser: argparse.ArgumentParser) -> None:
        add_health_flags(parser, default_port=10259)

    assert health_address(_parse(add, [])).port == 10259
    assert health_address(_parse(add, ["--healthz-port", "0"])).port == 0
    off = health_address(_parse(add, ["--healthz-port=-1", "--healthz-bind-address", "::1"]))
    assert (off.host, off.port, off.enabled) == ("::1", -1, False)
    for bad in ("-2", "65536", "http"):
        with pytest.raises(SystemExit):
            _parse(add, [f"--healthz-port={bad}"])
