"""The SPDY/3.1 codec and server session port-forward rides on (kubectl's interoperation is
shown end to end in tests/kubectl/test_kubectl_port_forward.py)."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from services.kubelet.spdy import (
    DICTIONARY,
    Data,
    FrameDecoder,
    FrameEncoder,
    GoAway,
    Ping,
    ProtocolError,
    RstStream,
    SpdySession,
    SynReply,
    SynStream,
)

PAIR = {"streamtype": ["error"], "port": ["80"], "requestid": ["0"]}


def test_the_dictionary_is_spdy3s() -> None:
    assert len(DICTIONARY) == 1423
    assert DICTIONARY.startswith(b"\x00\x00\x00\x07options") and DICTIONARY.endswith(b"enq=0.")


def test_frames_round_trip_fed_one_byte_at_a_time() -> None:
    encoder, decoder = FrameEncoder(), FrameDecoder()
    wire = (
        encoder.syn_stream(1, PAIR)
        + encoder.syn_stream(3, {**PAIR, "streamtype": ["data"]})
        + encoder.data(3, b"hello", fin=True)
        + encoder.syn_reply(1, {})
        + encoder.rst_stream(3, 5)
        + encoder.ping(7)
        + encoder.goaway(3)
    )
    frames = [frame for byte in wire for frame in decoder.feed(bytes([byte]))]
    assert frames == [
        SynStream(1, PAIR),
        SynStream(3, {**PAIR, "streamtype": ["data"]}),
        Data(3, b"hello", fin=True),
        SynReply(1, {}),
        RstStream(3, 5),
        Ping(7),
        GoAway(3),
    ]


def test_header_blocks_share_one_zlib_stream_per_direction() -> None:
    encoder = FrameEncoder()
    first, second = encoder.syn_stream(1, PAIR), encoder.syn_stream(3, PAIR)
    # the second block refers back into the first: a fresh inflater cannot read it alone
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(second)
    decoder = FrameDecoder()
    assert decoder.feed(first + second) == [SynStream(1, PAIR), SynStream(3, PAIR)]


def test_a_header_block_is_zlib_with_the_spdy_dictionary() -> None:
    block = FrameEncoder().syn_reply(1, {"a": ["1", "2"]})[12:]
    raw = zlib.decompressobj(zdict=DICTIONARY).decompress(block)
    assert raw == b"\x00\x00\x00\x01\x00\x00\x00\x01a\x00\x00\x00\x031\x002"


def test_several_values_of_one_name_are_nul_separated() -> None:
    encoder, decoder = FrameEncoder(), FrameDecoder()
    (frame,) = decoder.feed(encoder.syn_stream(1, {"x": ["a", "b"]}))
    assert isinstance(frame, SynStream) and frame.headers == {"x": ["a", "b"]}


def test_unknown_control_frames_are_skipped_and_other_versions_refused() -> None:
    unknown = b"\x80\x03\x00\x0f\x00\x00\x00\x02ab"
    assert FrameDecoder().feed(unknown + FrameEncoder.data(1, b"x")) == [Data(1, b"x")]
    with pytest.raises(ProtocolError, match="version 2"):
        FrameDecoder().feed(b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01")


def test_a_data_frame_over_16_mib_is_refused() -> None:
    with pytest.raises(ValueError):
        FrameEncoder.data(1, bytes(1 << 24))


class Peer:
    """The client's end of a session: frames it sends, frames the session answered."""

    def __init__(self) -> None:
        self.encoder, self.decoder = FrameEncoder(), FrameDecoder()
        self.answered: list[object] = []
        self.session = SpdySession(self._collect)

    async def _collect(self, data: bytes) -> None:
        self.answered += self.decoder.feed(data)


async def test_client_pings_are_echoed_and_server_ids_are_not() -> None:
    peer = Peer()
    await peer.session.receive(peer.encoder.ping(1) + peer.encoder.ping(2))
    assert peer.answered == [Ping(1)]


async def test_a_stream_reads_data_until_fin_and_writes_after_its_reply() -> None:
    peer = Peer()
    (stream,) = await peer.session.receive(peer.encoder.syn_stream(1, PAIR))
    assert stream.header("port") == "80" and stream.header("missing") == ""
    await stream.accept()
    await peer.session.receive(peer.encoder.data(1, b"ab") + peer.encoder.data(1, b"c", fin=True))
    assert [await stream.read(), await stream.read(), await stream.read()] == [b"ab", b"c", b""]
    assert await stream.read() == b""  # and every read after
    await stream.write(b"x" * 70_000)
    await stream.close()
    assert peer.answered[0] == SynReply(1, {})
    payloads = [f for f in peer.answered[1:] if isinstance(f, Data)]
    assert b"".join(f.data for f in payloads) == b"x" * 70_000
    assert max(len(f.data) for f in payloads) <= 32 * 1024 and payloads[-1].fin
    assert peer.session.open_streams == 0


async def test_a_reset_ends_reads_and_silences_writes() -> None:
    peer = Peer()
    (stream,) = await peer.session.receive(peer.encoder.syn_stream(1, PAIR))
    await peer.session.receive(peer.encoder.rst_stream(1, 5))
    assert await stream.read() == b"" and stream.was_reset
    await stream.write(b"late")
    assert peer.answered == []


async def test_a_stream_nobody_reads_does_not_stall_the_others() -> None:
    peer = Peer()
    ignored, read = await peer.session.receive(
        peer.encoder.syn_stream(1, PAIR) + peer.encoder.syn_stream(3, PAIR)
    )
    ignored.stop_reading()
    flood = b"".join(peer.encoder.data(1, b"z") for _ in range(1000))
    async with asyncio.timeout(10):
        await peer.session.receive(flood + peer.encoder.data(3, b"through"))
    assert await read.read() == b"through"


async def test_stream_ids_must_be_odd_and_increasing() -> None:
    peer = Peer()
    assert await peer.session.receive(peer.encoder.syn_stream(3, PAIR)) != []
    assert await peer.session.receive(peer.encoder.syn_stream(1, PAIR)) == []
    assert await peer.session.receive(peer.encoder.syn_stream(4, PAIR)) == []
    assert peer.answered == [RstStream(1, 1), RstStream(4, 1)]


async def test_closing_the_session_ends_every_stream() -> None:
    peer = Peer()
    (stream,) = await peer.session.receive(peer.encoder.syn_stream(1, PAIR))
    peer.session.close()
    assert await stream.read() == b"" and stream.was_reset
