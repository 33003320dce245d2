"""SPDY/3.1 framing and a server-side stream session: what ``kubectl port-forward`` speaks.

Why it exists: kubectl (client-go's ``spdystream``) multiplexes port-forward connections as SPDY
streams — over a plain ``Upgrade: SPDY/3.1`` connection (kubectl <= 1.30 by default) or tunnelled
inside a WebSocket whose binary messages carry the same byte stream (subprotocol
``SPDY/3.1+portforward.k8s.io``, kubectl >= 1.31). No maintained Python SPDY library exists, and
the part kubectl uses is small, so it lives here, after the SPDY/3 draft and moby/spdystream:

* ``FrameDecoder``: bytes in, frames out (buffers partial frames). Control frames — SYN_STREAM,
  SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE — and DATA frames.
  Header blocks are zlib-compressed with SPDY's dictionary as one stream per direction for the
  whole connection (each block ends in a sync flush), name/value pairs with 32-bit lengths,
  several values of one name joined by NUL.
* ``FrameEncoder``: the frames a server sends (SYN_REPLY, DATA, RST_STREAM, PING, GOAWAY), its
  own compression context.
* ``SpdySession``: the server's side of one connection. ``receive(bytes)`` decodes and applies
  frames and returns the streams the peer opened; the caller ``accept``s (SYN_REPLY) or
  ``reset``s each. PINGs from the peer are echoed (kubectl pings every 10 s over WebSocket).
  ``SpdyStream.read`` yields the peer's DATA until its FIN or a RST; ``write``/``close`` send
  DATA and FIN.

Not guaranteed: no flow control — WINDOW_UPDATE and SETTINGS are read and ignored, and none are
sent, exactly as spdystream behaves (it neither sends nor honours windows), so a peer that did
enforce SPDY/3.1 windows would stall after 64 KiB. No server push, no priorities, no
CREDENTIAL frames; the session never opens streams of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = [
    "DICTIONARY",
    "Data",
    "FrameDecoder",
    "FrameEncoder",
    "GoAway",
    "Headers",
    "Ping",
    "ProtocolError",
    "RstStream",
    "Settings",
    "SpdySession",
    "SpdyStream",
    "SynReply",
    "SynStream",
    "WindowUpdate",
]

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    1,
    2,
    3,
    4,
    6,
    7,
    8,
    9,
)
FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02

RST_PROTOCOL_ERROR = 1
RST_REFUSED_STREAM = 3
RST_CANCEL = 5

MAX_DATA_PAYLOAD = 32 * 1024
"""Bytes per DATA frame this side sends: spdystream reads each frame into memory whole."""

DICTIONARY = (
    b"\x00\x00\x00\x07options\x00\x00\x00\x04head\x00\x00\x00\x04post\x00\x00\x00\x03put"
    b"\x00\x00\x00\x06delete\x00\x00\x00\x05trace\x00\x00\x00\x06accept\x00\x00\x00\x0e"
    b"accept-charset\x00\x00\x00\x0faccept-encoding\x00\x00\x00\x0faccept-language\x00\x00\x00"
    b"\raccept-ranges\x00\x00\x00\x03age\x00\x00\x00\x05allow\x00\x00\x00\rauthorization\x00"
    b"\x00\x00\rcache-control\x00\x00\x00\nconnection\x00\x00\x00\x0ccontent-base\x00\x00\x00"
    b"\x10content-encoding\x00\x00\x00\x10content-language\x00\x00\x00\x0econtent-length\x00"
    b"\x00\x00\x10content-location\x00\x00\x00\x0bcontent-md5\x00\x00\x00\rcontent-range\x00"
    b"\x00\x00\x0ccontent-type\x00\x00\x00\x04date\x00\x00\x00\x04etag\x00\x00\x00\x06expect"
    b"\x00\x00\x00\x07expires\x00\x00\x00\x04from\x00\x00\x00\x04host\x00\x00\x00\x08if-match"
    b"\x00\x00\x00\x11if-modified-since\x00\x00\x00\rif-none-match\x00\x00\x00\x08if-range\x00"
    b"\x00\x00\x13if-unmodified-since\x00\x00\x00\rlast-modified\x00\x00\x00\x08location\x00"
    b"\x00\x00\x0cmax-forwards\x00\x00\x00\x06pragma\x00\x00\x00\x12proxy-authenticate\x00\x00"
    b"\x00\x13proxy-authorization\x00\x00\x00\x05range\x00\x00\x00\x07referer\x00\x00\x00\x0b"
    b"retry-after\x00\x00\x00\x06server\x00\x00\x00\x02te\x00\x00\x00\x07trailer\x00\x00\x00"
    b"\x11transfer-encoding\x00\x00\x00\x07upgrade\x00\x00\x00\nuser-agent\x00\x00\x00\x04vary"
    b"\x00\x00\x00\x03via\x00\x00\x00\x07warning\x00\x00\x00\x10www-authenticate\x00\x00\x00"
    b"\x06method\x00\x00\x00\x03get\x00\x00\x00\x06status\x00\x00\x00\x06200 OK\x00\x00\x00"
    b"\x07version\x00\x00\x00\x08HTTP/1.1\x00\x00\x00\x03url\x00\x00\x00\x06public\x00\x00\x00"
    b"\nset-cookie\x00\x00\x00\nkeep-alive\x00\x00\x00\x06origin1001012012022052063003023033"
    b"04305306307402405406407408409410411412413414415416417502504505203 Non-Authoritative "
    b"Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 "
    b"Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service "
    b"UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, "
    b"Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
    b"application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch"
    b"charset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
"""The SPDY/3 header-compression dictionary (1423 bytes, no trailing NUL, as spdystream uses)."""

HeaderMap = dict[str, list[str]]
"""Header names (lower case) to their values, in order."""


class ProtocolError(Exception):
    """The peer sent bytes that are not SPDY/3; the connection cannot go on."""


@dataclass(frozen=True, slots=True)
class SynStream:
    stream_id: int
    headers: HeaderMap
    fin: bool = False
    unidirectional: bool = False
    associated_to: int = 0
    priority: int = 0


@dataclass(frozen=True, slots=True)
class SynReply:
    stream_id: int
    headers: HeaderMap
    fin: bool = False


@dataclass(frozen=True, slots=True)
class Headers:
    stream_id: int
    headers: HeaderMap
    fin: bool = False


@dataclass(frozen=True, slots=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True, slots=True)
class Settings:
    values: dict[int, int]


@dataclass(frozen=True, slots=True)
class Ping:
    ping_id: int


@dataclass(frozen=True, slots=True)
class GoAway:
    last_good_stream_id: int
    status: int = 0


@dataclass(frozen=True, slots=True)
class WindowUpdate:
    stream_id: int
    delta: int


@dataclass(frozen=True, slots=True)
class Data:
    stream_id: int
    data: bytes
    fin: bool = False


Frame = SynStream | SynReply | Headers | RstStream | Settings | Ping | GoAway | WindowUpdate | Data


def encode_header_block(headers: HeaderMap) -> bytes:
    """The uncompressed name/value block: count, then length-prefixed names and values."""
    out = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        raw_name = name.lower().encode()
        raw_value = b"\x00".join(v.encode() for v in values)
        out += [struct.pack(">I", len(raw_name)), raw_name]
        out += [struct.pack(">I", len(raw_value)), raw_value]
    return b"".join(out)


def decode_header_block(block: bytes) -> HeaderMap:
    try:
        (count,) = struct.unpack_from(">I", block, 0)
        offset = 4
        headers: HeaderMap = {}
        for _ in range(count):
            (size,) = struct.unpack_from(">I", block, offset)
            name = block[offset + 4 : offset + 4 + size].decode().lower()
            offset += 4 + size
            (size,) = struct.unpack_from(">I", block, offset)
            value = block[offset + 4 : offset + 4 + size].decode()
            offset += 4 + size
            if offset > len(block):
                raise ProtocolError("header block shorter than its lengths")
            headers.setdefault(name, []).extend(value.split("\x00"))
    except (struct.error, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed header block: {exc}") from None
    return headers


class FrameDecoder:
    """Frames out of a byte stream; one per connection direction (it owns the inflater)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflater = zlib.decompressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            first, second = struct.unpack_from(">II", self._buffer, 0)
            length = second & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            flags = second >> 24
            payload = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            if first & 0x80000000:
                version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
                if version != VERSION:
                    raise ProtocolError(f"unsupported SPDY version {version}")
                frame = self._control(kind, flags, payload)
                if frame is not None:
                    frames.append(frame)
            else:
                frames.append(Data(first & 0x7FFFFFFF, payload, fin=bool(flags & FLAG_FIN)))
        return frames

    def _headers(self, compressed: bytes) -> HeaderMap:
        try:
            return decode_header_block(self._inflater.decompress(compressed))
        except zlib.error as exc:
            raise ProtocolError(f"header block does not inflate: {exc}") from None

    def _control(self, kind: int, flags: int, payload: bytes) -> Frame | None:
        try:
            if kind == SYN_STREAM:
                stream_id, associated, priority = struct.unpack_from(">IIB", payload, 0)
                return SynStream(
                    stream_id & 0x7FFFFFFF,
                    self._headers(payload[10:]),
                    fin=bool(flags & FLAG_FIN),
                    unidirectional=bool(flags & FLAG_UNIDIRECTIONAL),
                    associated_to=associated & 0x7FFFFFFF,
                    priority=priority >> 5,
                )
            if kind in (SYN_REPLY, HEADERS):
                (stream_id,) = struct.unpack_from(">I", payload, 0)
                cls = SynReply if kind == SYN_REPLY else Headers
                return cls(
                    stream_id & 0x7FFFFFFF, self._headers(payload[4:]), fin=bool(flags & FLAG_FIN)
                )
            if kind == RST_STREAM:
                stream_id, status = struct.unpack_from(">II", payload, 0)
                return RstStream(stream_id & 0x7FFFFFFF, status)
            if kind == SETTINGS:
                (count,) = struct.unpack_from(">I", payload, 0)
                pairs = (struct.unpack_from(">II", payload, 4 + 8 * i) for i in range(count))
                return Settings({key & 0xFFFFFF: value for key, value in pairs})
            if kind == PING:
                return Ping(struct.unpack_from(">I", payload, 0)[0])
            if kind == GOAWAY:
                last, status = struct.unpack_from(">II", payload, 0)
                return GoAway(last & 0x7FFFFFFF, status)
            if kind == WINDOW_UPDATE:
                stream_id, delta = struct.unpack_from(">II", payload, 0)
                return WindowUpdate(stream_id & 0x7FFFFFFF, delta & 0x7FFFFFFF)
        except struct.error as exc:
            raise ProtocolError(f"control frame {kind} too short: {exc}") from None
        return None  # SPDY: an unknown control frame is ignored


class FrameEncoder:
    """Frames into bytes; one per connection direction (it owns the deflater)."""

    def __init__(self) -> None:
        self._deflater = zlib.compressobj(level=9, zdict=DICTIONARY)

    def _block(self, headers: HeaderMap) -> bytes:
        block = encode_header_block(headers)
        return self._deflater.compress(block) + self._deflater.flush(zlib.Z_SYNC_FLUSH)

    @staticmethod
    def _control(kind: int, flags: int, payload: bytes) -> bytes:
        header = struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload))
        return header + payload

    def syn_stream(self, stream_id: int, headers: HeaderMap, *, fin: bool = False) -> bytes:
        payload = struct.pack(">IIBB", stream_id, 0, 0, 0) + self._block(headers)
        return self._control(SYN_STREAM, FLAG_FIN if fin else 0, payload)

    def syn_reply(self, stream_id: int, headers: HeaderMap, *, fin: bool = False) -> bytes:
        payload = struct.pack(">I", stream_id) + self._block(headers)
        return self._control(SYN_REPLY, FLAG_FIN if fin else 0, payload)

    def rst_stream(self, stream_id: int, status: int) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def ping(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_good_stream_id: int, status: int = 0) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_good_stream_id, status))

    @staticmethod
    def data(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
        if len(data) > 0xFFFFFF:
            raise ValueError("a DATA frame carries at most 16 MiB")
        header = struct.pack(
            ">II", stream_id & 0x7FFFFFFF, ((FLAG_FIN if fin else 0) << 24) | len(data)
        )
        return header + data


Send = Callable[[bytes], Awaitable[None]]
"""Writes bytes to the connection (a socket, or one WebSocket binary message)."""

_EOF = b""


@dataclass(eq=False)
class SpdyStream:
    """One stream the peer opened: its headers, its inbound DATA, and this side's writes."""

    session: SpdySession
    stream_id: int
    headers: HeaderMap
    inbound: asyncio.Queue[bytes] = field(default_factory=lambda: asyncio.Queue(maxsize=64))
    """The peer's DATA payloads, then ``b""`` once at its FIN or a RST (bounded: a slow reader
    holds the session's reading, as spdystream's unbuffered channel does)."""
    remote_done: bool = False
    local_done: bool = False
    was_reset: bool = False
    reading: bool = True
    """False once this side reads no more: the peer's DATA is then dropped, not queued."""

    def header(self, name: str) -> str:
        """The first value of header ``name`` (lower case), or ``""``."""
        values = self.headers.get(name) or [""]
        return values[0]

    async def read(self) -> bytes:
        """The next DATA payload; ``b""`` at the peer's FIN or a reset (and on every call after)."""
        if self.remote_done and self.inbound.empty():
            return _EOF
        chunk = await self.inbound.get()
        return chunk

    def stop_reading(self) -> None:
        """Nobody reads this stream any more: drop what is queued and whatever comes later
        (else one stream's full queue would stall the whole connection)."""
        self.reading = False
        while not self.inbound.empty():
            self.inbound.get_nowait()

    async def accept(self) -> None:
        """Send SYN_REPLY: the stream is established (spdystream drops DATA sent before it)."""
        await self.session.send_frame(lambda e: e.syn_reply(self.stream_id, {}))

    async def write(self, data: bytes) -> None:
        for start in range(0, len(data), MAX_DATA_PAYLOAD):
            if self.was_reset or self.local_done:
                return
            chunk = data[start : start + MAX_DATA_PAYLOAD]
            await self.session.send_data(self.stream_id, chunk)

    async def close(self) -> None:
        """Half-close: an empty DATA frame with FIN (once)."""
        if self.local_done or self.was_reset:
            return
        self.local_done = True
        await self.session.send_frame(lambda e: e.data(self.stream_id, b"", fin=True))
        self.session.forget_if_done(self)

    async def reset(self, status: int = RST_CANCEL) -> None:
        if self.was_reset:
            return
        self._mark_reset()
        await self.session.send_frame(lambda e: e.rst_stream(self.stream_id, status))

    def _mark_reset(self) -> None:
        self.was_reset = True
        self.local_done = True
        self._finish_remote()
        self.session.forget_if_done(self)

    def _finish_remote(self) -> None:
        if not self.remote_done:
            self.remote_done = True
            # a reader waiting on an empty queue needs the marker; one that is behind finds
            # remote_done set once it has drained the queue
            with contextlib.suppress(asyncio.QueueFull):
                self.inbound.put_nowait(_EOF)


class SpdySession:
    """The server side of one SPDY/3.1 connection; the transport belongs to the caller."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._encoder = FrameEncoder()
        self._decoder = FrameDecoder()
        self._write_lock = asyncio.Lock()
        self._streams: dict[int, SpdyStream] = {}
        self._last_stream_id = 0
        self.going_away = False
        """The peer sent GOAWAY: it opens no more streams."""

    async def send_frame(self, encode: Callable[[FrameEncoder], bytes]) -> None:
        """Encode and send under one lock: header compression is stateful, so frames must go
        out in the order they were compressed."""
        async with self._write_lock:
            await self._send(encode(self._encoder))

    async def send_data(self, stream_id: int, data: bytes) -> None:
        """One DATA frame (no header state, but in order with the control frames)."""
        async with self._write_lock:
            await self._send(FrameEncoder.data(stream_id, data))

    async def receive(self, data: bytes) -> list[SpdyStream]:
        """Apply the frames in ``data``; the streams the peer opened, for the caller to accept
        or reset. May wait while a stream's reader is behind."""
        opened: list[SpdyStream] = []
        for frame in self._decoder.feed(data):
            stream = await self._apply(frame)
            if stream is not None:
                opened.append(stream)
        return opened

    async def _apply(self, frame: Frame) -> SpdyStream | None:
        if isinstance(frame, SynStream):
            if frame.stream_id % 2 == 0 or frame.stream_id <= self._last_stream_id:
                await self.send_frame(lambda e: e.rst_stream(frame.stream_id, RST_PROTOCOL_ERROR))
                return None
            self._last_stream_id = frame.stream_id
            stream = SpdyStream(self, frame.stream_id, frame.headers)
            self._streams[frame.stream_id] = stream
            if frame.fin:
                stream._finish_remote()
            return stream
        if isinstance(frame, Data):
            target = self._streams.get(frame.stream_id)
            if target is None or target.remote_done or not target.reading:
                return None
            if frame.data:
                await target.inbound.put(frame.data)
            if frame.fin:
                target._finish_remote()
                self.forget_if_done(target)
        elif isinstance(frame, RstStream):
            target = self._streams.get(frame.stream_id)
            if target is not None:
                target._mark_reset()
        elif isinstance(frame, Ping):
            if frame.ping_id % 2 == 1:  # the client's (odd) pings are echoed; ours would be even
                await self.send_frame(lambda e: e.ping(frame.ping_id))
        elif isinstance(frame, GoAway):
            self.going_away = True
        return None  # SETTINGS, WINDOW_UPDATE, HEADERS, SYN_REPLY: nothing to do (see Limits)

    def forget_if_done(self, stream: SpdyStream) -> None:
        if stream.local_done and stream.remote_done:
            self._streams.pop(stream.stream_id, None)

    def close(self) -> None:
        """The connection is gone: every stream reads its end, writes nothing more."""
        for stream in list(self._streams.values()):
            stream._mark_reset()
        self._streams.clear()

    async def go_away(self) -> None:
        """Tell the peer this side is done (GOAWAY, status OK)."""
        await self.send_frame(lambda e: e.goaway(self._last_stream_id))

    @property
    def open_streams(self) -> int:
        return len(self._streams)
