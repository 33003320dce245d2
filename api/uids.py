"""Random identifiers the apiserver hands out: object uids and generated-name suffixes, cut from
random bytes drawn in blocks.

Why: the apiserver gives every object it creates a ``metadata.uid`` — Kubernetes' registry
calls ``uuid.NewUUID()``, a version-4 UUID of 122 random bits — and an object created with
``metadata.generateName`` its name: the prefix and five random characters (apimachinery's
``names.SimpleNameGenerator``, ``utilrand.String(5)``). ``uuid.uuid4()`` makes one
``os.urandom(16)`` call per uid, ``secrets.choice`` one per character: each a system call that
releases the GIL on the event loop's thread, which then waits to take it back from the store's
threads — under a create load that wait was 3–4% of the apiserver's CPU. Here the event loop
draws ``POOL_BYTES`` of randomness from the same source at once and cuts them up: one such call
per 256 uids, fewer when names are generated too.

What it guarantees: each uid is ``str(uuid.UUID(bytes=..., version=4))`` of 16 bytes from
``os.urandom`` never handed out before (version nibble 4, RFC 4122 variant bits), the form and
the randomness ``uuid.uuid4()`` gives; each suffix has ``NAME_SUFFIX_LENGTH`` characters drawn
uniformly and independently from Kubernetes' alphabet (no vowels, so no words; no 0, 1 or 3,
which read like letters). Not for secrets: the bytes not yet handed out sit in this process's
memory.
"""

from __future__ import annotations

import os

__all__ = [
    "MAX_GENERATED_PREFIX",
    "NAME_SUFFIX_ALPHABET",
    "NAME_SUFFIX_LENGTH",
    "POOL_BYTES",
    "generate_name",
    "new_uid",
]

POOL_BYTES = 4096
"""Random bytes per ``os.urandom`` call: 256 uids' worth."""

NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""apimachinery ``utilrand``'s alphanumerics, the characters of a generated name's suffix."""

NAME_SUFFIX_LENGTH = 5

MAX_GENERATED_PREFIX = 63 - NAME_SUFFIX_LENGTH
"""A longer ``generateName`` is cut to this (``maxGeneratedNameLength``): with its suffix the
name fits a DNS label, which every kind's name may be."""

_UID_BYTES = 16
_UNBIASED = 256 - 256 % len(NAME_SUFFIX_ALPHABET)
"""Bytes below this map onto the alphabet evenly (``b % 27``); larger ones are skipped."""

_pool = b""
_offset = 0


def _random_bytes(n: int) -> bytes:
    """``n`` bytes of ``os.urandom`` output not handed out before."""
    global _pool, _offset
    if _offset + n > len(_pool):
        _pool, _offset = os.urandom(POOL_BYTES), 0
    chunk = _pool[_offset : _offset + n]
    _offset += n
    return chunk


def new_uid() -> str:
    """A fresh version-4 UUID in its canonical form (``8-4-4-4-12`` lower-case hex)."""
    raw = bytearray(_random_bytes(_UID_BYTES))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # variant: RFC 4122
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _name_suffix() -> str:
    letters: list[str] = []
    while len(letters) < NAME_SUFFIX_LENGTH:
        letters += [
            NAME_SUFFIX_ALPHABET[b % len(NAME_SUFFIX_ALPHABET)]
            for b in _random_bytes(NAME_SUFFIX_LENGTH)
            if b < _UNBIASED
        ]
    return "".join(letters[:NAME_SUFFIX_LENGTH])


def generate_name(prefix: str) -> str:
    """A name for an object created with ``generateName: prefix``: the prefix (cut to
    ``MAX_GENERATED_PREFIX`` characters) and a fresh random suffix. Names may collide; the
    caller retries on AlreadyExists, as Kubernetes' create does."""
    return prefix[:MAX_GENERATED_PREFIX] + _name_suffix()
