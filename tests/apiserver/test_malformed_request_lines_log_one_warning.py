"""A request aiohttp's HTTP parser refuses gets a 400 and one WARNING line, not a traceback.

NUL bytes in the request line, a 100 KB request line, a header past the limit: each is a
client's fault, and one ERROR with a traceback per request would let anyone flood the log.
The server here is the real aiohttp server of ``make_app`` on a loopback port, driven over a raw
socket, so aiohttp's own parser and its own ``aiohttp.server`` logger are what is tested.
"""

from __future__ import annotations

import logging

import pytest

from tests.apiserver.conftest import MakeApi

MALFORMED = {
    "nul in request line": b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
    "100 KB request line": b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "100 KB header": b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 100_000 + b"\r\n\r\n",
    "garbage": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http\r\n\r\n",
}


@pytest.mark.parametrize("raw", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_malformed_request_is_400_and_one_warning_line(
    make_api: MakeApi, raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    api = await make_api("memory")
    caplog.set_level(logging.DEBUG, logger="aiohttp.server")
    answer = await api.raw_exchange(raw)
    assert answer.split(b"\r\n")[0].split(b" ")[1] == b"400", answer[:200]
    records = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert [r.levelname for r in records] == ["WARNING"], [r.getMessage() for r in records]
    (record,) = records
    assert record.exc_info is None and record.exc_text is None
    line = logging.Formatter("%(levelname)s %(name)s: %(message)s").format(record)
    assert "\n" not in line and len(line) < 400, line
    assert "malformed HTTP request from 127.0.0.1" in line
    status, body = await api.get("/readyz")
    assert status == 200, body


async def test_other_aiohttp_server_records_are_left_alone(
    make_api: MakeApi, caplog: pytest.LogCaptureFixture
) -> None:
    """Only parser refusals are rewritten; anything else on that logger keeps its level."""
    await make_api("memory")  # the filter is installed while an app runs
    caplog.set_level(logging.DEBUG, logger="aiohttp.server")
    try:
        raise RuntimeError("a real bug")
    except RuntimeError:
        logging.getLogger("aiohttp.server").exception("Error handling request from %s", "x")
    (record,) = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert record.levelname == "ERROR" and record.exc_info is not None
