"""The WebSocket channel protocols of ``exec``: stream numbers and payloads in frames.

Why: ``kubectl exec`` and every API client multiplex stdin, stdout, stderr, the error stream and
terminal resizes over one WebSocket; how a frame carries the stream number and its bytes depends
on the subprotocol agreed in the handshake. This module owns that mapping, after the kubelet's
``remotecommand`` WebSocket server and apimachinery's ``wsstream`` connection:

* ``v5.channel.k8s.io``, ``v4.channel.k8s.io``, ``channel.k8s.io`` (or no subprotocol at all):
  the first byte of a frame is the stream number, the rest its raw bytes.
* ``v4.base64.channel.k8s.io``, ``base64.channel.k8s.io``: the first byte is the stream number
  as an ASCII digit (``'0'`` + n), the rest base64; written as TEXT frames.
* Whatever the protocol, frames *from* the client are read whether they come as BINARY or TEXT
  (a TEXT frame is its UTF-8 bytes): the official Python client sends ``str`` stdin as TEXT
  frames (``chr(0) + data``), and Kubernetes' server reads a message regardless of its opcode.
* The error stream (3): v4 and v5 carry a ``Status`` JSON (Success, or NonZeroExitCode with the
  exit code as a cause); the older protocols carry only a failure's message as plain text, and
  nothing on success.
* Stream 255 (v5 only): "close stream n" — the client half-closes stdin.

Streams: 0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize (``{"Width":..,"Height":..}``).
``v2``/``v3.channel.k8s.io`` are SPDY-only versions in Kubernetes and are not offered here.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMessage, WSMsgType, web

__all__ = [
    "CLOSE",
    "ERROR",
    "EXEC_PROTOCOLS",
    "RESIZE",
    "STDERR",
    "STDIN",
    "STDOUT",
    "ChannelProtocol",
    "exec_status",
]

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255

EXEC_PROTOCOLS = (
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
)
"""What the kubelet answers to, in the order it prefers (the client's order decides)."""


def exec_status(code: int, command: list[str]) -> dict[str, Any]:
    """The ``Status`` an exec ends with (v4/v5 error stream)."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: error executing command "
        f"[{' '.join(command)}], exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


@dataclass(frozen=True, slots=True)
class ChannelProtocol:
    """One negotiated subprotocol: how to read and write a frame."""

    name: str
    base64: bool
    status_json: bool
    """v4 and later: the error stream carries a ``Status`` JSON."""
    close_stream: bool
    """v5: stream 255 closes a stream (stdin's half-close)."""

    @classmethod
    def of(cls, name: str | None) -> ChannelProtocol:
        """The protocol agreed in the handshake (None or empty: the plain ``channel.k8s.io``)."""
        name = name or ""
        return cls(
            name=name,
            base64="base64" in name,
            status_json=name.startswith(("v4.", "v5.")),
            close_stream=name.startswith("v5."),
        )

    def decode(self, msg: WSMessage) -> tuple[int, bytes] | None:
        """A client frame as (stream, payload); None for frames that carry no stream data."""
        if msg.type == WSMsgType.BINARY:
            data: bytes = msg.data
        elif msg.type == WSMsgType.TEXT:
            data = str(msg.data).encode("utf-8")
        else:
            return None
        if not data:
            return None
        stream, payload = data[0], data[1:]
        if self.base64:
            stream -= ord("0")
            try:
                payload = base64.b64decode(payload, validate=False)
            except (binascii.Error, ValueError):
                return None
        return stream, payload

    async def send(self, ws: web.WebSocketResponse, stream: int, data: bytes) -> None:
        if self.base64:
            await ws.send_str(chr(ord("0") + stream) + base64.b64encode(data).decode("ascii"))
        else:
            await ws.send_bytes(bytes([stream]) + data)

    async def send_status(self, ws: web.WebSocketResponse, status: dict[str, Any]) -> None:
        """The exec's outcome on the error stream, as this protocol version words it."""
        if self.status_json:
            await self.send(ws, ERROR, json.dumps(status).encode())
        elif status.get("status") != "Success":
            await self.send(ws, ERROR, str(status.get("message", "")).encode())
