"""One write in the revision log, and the compare-and-swap rules that produce the next one.

Both backends keep the same log-structured shape (as kine does over SQL): every create, update
and delete appends one ``Record`` whose ``revision`` is the next global revision. A record
carries everything a reader needs on its own — the new value, the value it replaced
(``old_value``) and the revision it replaced (``prev_revision``) — so a watch can render an
event with its previous value without looking at older records, and compaction can drop those.

``next_record`` holds the compare-and-swap rules in one place: given the latest record of a key
and the requested write, it returns the record to append or raises ``KeyExists`` /
``KeyNotFound`` / ``RevisionMismatch``. The backends only decide *where* the latest record comes
from and how the append is made atomic.

``prefix_end`` turns a prefix into the exclusive upper bound of a key range scan.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from store.base import Event, EventType, KeyExists, KeyNotFound, KeyValue, RevisionMismatch

__all__ = ["Op", "Record", "WriteKind", "next_record", "prefix_end"]


class WriteKind(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Op:
    """A requested write: what the caller asked for, before the store has checked it."""

    kind: WriteKind
    key: str
    value: bytes = b""
    expected_revision: int | None = None
    """The compare of the compare-and-swap (None: delete unconditionally; unused for create)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One row of the log: the write made at ``revision``."""

    revision: int
    key: str
    created: bool
    """This write created a new incarnation of the key (ADDED)."""
    deleted: bool
    """This write is a tombstone (DELETED); ``value`` then repeats the last value."""
    create_revision: int
    prev_revision: int
    """Revision of the record this one replaced (0 when there was none)."""
    value: bytes
    old_value: bytes | None

    def kv(self) -> KeyValue | None:
        """The live value this record leaves behind, or None for a tombstone."""
        if self.deleted:
            return None
        return KeyValue(self.key, self.value, self.create_revision, self.revision)

    def event(self) -> Event:
        """The watch event for this write, with the previous value (not for the first create)."""
        prev = None
        if not self.created and self.old_value is not None:
            prev = KeyValue(self.key, self.old_value, self.create_revision, self.prev_revision)
        if self.created:
            etype = EventType.ADDED
        elif self.deleted:
            etype = EventType.DELETED
        else:
            etype = EventType.MODIFIED
        kv = KeyValue(self.key, self.value, self.create_revision, self.revision)
        return Event(type=etype, kv=kv, prev=prev, revision=self.revision)


def next_record(op: Op, *, latest: Record | None, revision: int) -> Record:
    """The record ``op`` appends at ``revision`` given the key's ``latest`` record.

    Raises ``KeyExists`` (create of a live key), ``KeyNotFound`` (update/delete of a missing or
    deleted key) or ``RevisionMismatch`` (the key's mod revision is not the expected one).
    """
    live = latest is not None and not latest.deleted
    prev_revision = latest.revision if latest is not None else 0
    if op.kind is WriteKind.CREATE:
        if live:
            raise KeyExists(op.key)
        return Record(
            revision=revision,
            key=op.key,
            created=True,
            deleted=False,
            create_revision=revision,
            prev_revision=prev_revision,
            value=op.value,
            old_value=None,
        )
    if latest is None or latest.deleted:
        raise KeyNotFound(op.key)
    if op.expected_revision is not None and op.expected_revision != latest.revision:
        current = KeyValue(op.key, latest.value, latest.create_revision, latest.revision)
        raise RevisionMismatch(op.key, op.expected_revision, current)
    deleting = op.kind is WriteKind.DELETE
    return Record(
        revision=revision,
        key=op.key,
        created=False,
        deleted=deleting,
        create_revision=latest.create_revision,
        prev_revision=latest.revision,
        value=latest.value if deleting else op.value,
        old_value=latest.value,
    )


_MAX_CHAR = chr(0x10FFFF)


def prefix_end(prefix: str) -> str | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no bound).

    Python compares strings by code point and SQLite's BINARY collation compares UTF-8 bytes,
    which orders the same way, so both backends scan ``prefix <= key < prefix_end(prefix)``.
    """
    stripped = prefix.rstrip(_MAX_CHAR)
    if not stripped:
        return None
    following = ord(stripped[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are not encodable; the next real char
        following = 0xE000
    return stripped[:-1] + chr(following)
