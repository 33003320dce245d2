"""The SQLite store (``sqlite:///path.db``), kubelite's default: embedded, durable, log-structured.

Shape (after kine's SQL drivers): one table ``kv`` with one row per write — ``id`` is the
revision, plus ``name``, ``created``/``deleted`` flags, ``create_revision``, ``prev_revision``,
``value`` and ``old_value`` — and a UNIQUE index on ``(name, prev_revision)``, so that two
writes replacing the same revision of a key can never both land, whatever the code above says.
The current value of a key is its row with the highest id; a list at revision N reads, per key,
the highest id <= N (an index range scan on ``(name, id)``, never a LIKE over all rows).

Threads: the event loop never touches SQLite. One **writer thread** owns the only writing
connection and applies writes in order; writes queued while a commit is in flight are applied
together in the next transaction (**group commit**), each still its own compare-and-swap, so one
fsync serves many writes under load. Each write is one INSERT, which SQLite applies or rolls back
as a unit, so a failed compare-and-swap leaves the rest of its group untouched. Results are
handed back with ``loop.call_soon_threadsafe``, after the commit, together with the watch
events (published in revision order through ``store.watchhub``). Reads run on a small pool of
reader threads with their own connections; WAL lets them read while the writer commits.

Durability: WAL journal, ``synchronous=FULL`` by default — a write is fsynced before its
future resolves, so an acknowledged write survives a crash or SIGKILL. ``synchronous=NORMAL``
(URL option) is faster and survives a process crash, but not a power loss.

Compaction deletes, 500 rows per transaction with writes interleaved between batches, every
row no read at a revision >= R needs, then vacuums free pages and truncates the WAL, so the
file stays bounded under a steady update load. ``compacted_revision`` is stored in the file.
The newest row is never compacted (even a tombstone), so the revision counter — ``MAX(id)`` —
survives a restart without a counter row to rewrite on every commit. Every write waits while
one job holds the writer thread; a job or commit that holds it ``SLOW_WRITER`` (1 s) or more
is logged as a warning naming it, so a stalled apiserver says why.

One process only: the file is locked (``<path>-lock``, ``flock``) while open; a second opener
fails with ``StoreFailed`` instead of corrupting the revision sequence. Not for network
filesystems.

Damaged or unusable files are refused, not retried. Opening checks, before anything is served,
that the path is a file in an existing directory, that the file is a SQLite database
(``PRAGMA quick_check``, which reads every page: a few milliseconds per MB), and that it can be
written (one small committed write to ``meta``); any failure is a ``StoreFailed`` whose message
says in one line what is wrong and what to do. A file found damaged while running (SQLite's
``SQLITE_CORRUPT`` / ``SQLITE_NOTADB`` on any read or write) fails the store for good: that call
and every later one raise ``StoreFailed``, the watches end with it, and it is logged once.
Other SQLite errors while running (a full disk, a busy timeout) fail only the call at hand, as
``StoreError``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import fcntl
import functools
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from store.base import (
    Compacted,
    Event,
    KeyValue,
    ListResult,
    StoreClosed,
    StoreError,
    StoreFailed,
)
from store.record import Op, Record, WriteKind, next_record, prefix_end
from store.watchhub import DEFAULT_WATCH_BUFFER, WatchHub

__all__ = ["SYNCHRONOUS_MODES", "SqliteStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")

SYNCHRONOUS_MODES: Final = ("OFF", "NORMAL", "FULL", "EXTRA")

COMPACT_BATCH: Final = 500
"""Rows deleted per compaction transaction: short enough that writers queued behind a batch
wait milliseconds, not the length of the whole compaction."""

COMPACT_SPAN: Final = 5000
"""Revisions one compaction transaction examines at most, so that a stretch with little to
delete (live keys kept from earlier windows) does not make one long transaction either."""

MAX_GROUP: Final = 1000
SLOW_WRITER: Final = 1.0
"""Seconds one job may hold the writer thread before it is logged: every write waits behind it
(a compaction's vacuum and checkpoint, a commit whose fsync stalled)."""
"""Most writes applied in one transaction; bounds the latency a group adds to its first write."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS kv (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    created INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    prev_revision INTEGER NOT NULL,
    value BLOB NOT NULL,
    old_value BLOB
);
CREATE UNIQUE INDEX IF NOT EXISTS kv_name_prev_revision ON kv (name, prev_revision);
CREATE INDEX IF NOT EXISTS kv_name_id ON kv (name, id);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""

_SQLITE_PERM: Final = 3
_SQLITE_READONLY: Final = 8
_SQLITE_CORRUPT: Final = 11
_SQLITE_CANTOPEN: Final = 14
_SQLITE_NOTADB: Final = 26

_MOVE_ASIDE: Final = (
    "move it aside (with its -wal and -shm files) or restore a backup, then start again"
)
_MAKE_WRITABLE: Final = (
    "make the file and its directory writable for this user, or choose another location "
    "(--state-dir or --store)"
)

_COLUMNS: Final = "id, name, created, deleted, create_revision, prev_revision, value, old_value"

_LATEST_SQL: Final = f"SELECT {_COLUMNS} FROM kv WHERE name = ? ORDER BY id DESC LIMIT 1"
_INSERT_SQL: Final = f"INSERT INTO kv ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_COMPACTED_SQL: Final = "SELECT value FROM meta WHERE key = 'compacted_revision'"
_REVISION_SQL: Final = "SELECT MAX(id) FROM kv"
_COMPACT_CANDIDATES_SQL: Final = """
SELECT k.id FROM kv AS k
WHERE k.id > :cursor AND k.id <= :upto
  AND k.id < (SELECT MAX(id) FROM kv)
  AND (k.deleted = 1 OR EXISTS (
        SELECT 1 FROM kv AS newer
        WHERE newer.name = k.name AND newer.id > k.id AND newer.id <= :revision))
ORDER BY k.id LIMIT :batch
"""


def _record(row: tuple[Any, ...]) -> Record:
    return Record(
        revision=row[0],
        key=row[1],
        created=bool(row[2]),
        deleted=bool(row[3]),
        create_revision=row[4],
        prev_revision=row[5],
        value=row[6],
        old_value=row[7],
    )


def _row(record: Record) -> tuple[Any, ...]:
    return (
        record.revision,
        record.key,
        int(record.created),
        int(record.deleted),
        record.create_revision,
        record.prev_revision,
        record.value,
        record.old_value,
    )


def _primary_code(err: sqlite3.Error) -> int | None:
    code = getattr(err, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _damage(err: sqlite3.Error) -> StoreFailed | None:
    """The ``StoreFailed`` for an error that means the file is damaged; None for any other."""
    code = _primary_code(err)
    text = str(err)
    if code == _SQLITE_NOTADB or "file is not a database" in text:
        return StoreFailed(f"the file is not a SQLite database ({text})", remedy=_MOVE_ASIDE)
    if code == _SQLITE_CORRUPT or "malformed" in text:
        return StoreFailed(f"the database is damaged ({text})", remedy=_MOVE_ASIDE)
    return None


def _open_failure(path: str, err: sqlite3.Error | OSError) -> StoreFailed:
    """One line for an error met while opening ``path``: what is wrong and what to do."""
    if isinstance(err, OSError):
        what = err.strerror or str(err)
        where = err.filename or path
        if isinstance(err, PermissionError) or err.errno in (errno.EROFS, errno.EACCES):
            return StoreFailed(f"cannot write {where} ({what})", remedy=_MAKE_WRITABLE)
        return StoreFailed(
            f"cannot open {where} ({what})",
            remedy="check the path and its directory, or choose another location",
        )
    damage = _damage(err)
    if damage is not None:
        return damage
    if _primary_code(err) in (_SQLITE_READONLY, _SQLITE_PERM, _SQLITE_CANTOPEN):
        return StoreFailed(f"the file cannot be opened for writing ({err})", remedy=_MAKE_WRITABLE)
    return StoreFailed(
        f"the file cannot be used ({err})",
        remedy="check the file and its directory, or choose another location",
    )


def _check_path(path: str) -> None:
    """Refuse a path that cannot hold the database file, before SQLite reports it vaguely."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        problem = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise StoreFailed(
            f"its directory {directory} {problem}",
            remedy="create the directory or choose another location (--state-dir or --store)",
        )
    if os.path.isdir(path):
        raise StoreFailed(
            "the path is a directory, not a database file",
            remedy="choose a file path (--store sqlite:///dir/kubelite.db) or another --state-dir",
        )


def _quick_check(conn: sqlite3.Connection) -> None:
    """Read every page once (``PRAGMA quick_check``); a damaged file raises ``StoreFailed``."""
    rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check(1)")]
    if rows == ["ok"]:
        return
    lines = [line for row in rows for line in row.splitlines() if not line.startswith("***")]
    first = lines[0] if lines else "unknown problem"
    raise StoreFailed(
        f"the database is damaged (database disk image is malformed: {first})",
        remedy=_MOVE_ASIDE,
    )


def _scalar(conn: sqlite3.Connection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _range(
    prefix: str, *, start_after: str | None = None, column: str = "name"
) -> tuple[str, list[Any]]:
    """SQL condition and parameters for ``column`` under ``prefix`` (after ``start_after``)."""
    if start_after is not None and start_after >= prefix:
        clauses, params = [f"{column} > ?"], [start_after]
    else:
        clauses, params = [f"{column} >= ?"], [prefix]
    end = prefix_end(prefix)
    if end is not None:
        clauses.append(f"{column} < ?")
        params.append(end)
    return " AND ".join(clauses), params


@dataclass(slots=True)
class _Write:
    op: Op
    future: asyncio.Future[KeyValue]


@dataclass(slots=True)
class _Task:
    """Work for the writer connection alone, in its own transaction(s): compaction, checkpoint."""

    fn: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future[Any]


_STOP: Final = object()


class SqliteStore:
    """A ``Store`` in one SQLite file. Use ``store.open_store("sqlite:///path.db")``.

    Opening creates the file and schema and recovers the revision counter synchronously (call
    it at start-up or via ``asyncio.to_thread``). The store binds to the event loop of its first
    call; use it from that loop only.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "FULL",
        busy_timeout_ms: int = 5000,
        watch_buffer: int = DEFAULT_WATCH_BUFFER,
        readers: int = 2,
    ) -> None:
        synchronous = synchronous.upper()
        if synchronous not in SYNCHRONOUS_MODES:
            raise ValueError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, got {synchronous!r}"
            )
        self.path = os.fspath(path)
        self.synchronous = synchronous
        self._busy_timeout_ms = busy_timeout_ms
        _check_path(self.path)
        try:
            self._lock_fd = self._lock(self.path)
        except OSError as err:
            raise _open_failure(self.path, err) from None
        try:
            self._writer_conn = self._connect()
            try:
                self._init_schema(self._writer_conn)
                _quick_check(self._writer_conn)
                self._revision = _scalar(self._writer_conn, _REVISION_SQL)
                self._compacted = _scalar(self._writer_conn, _COMPACTED_SQL)
                self._probe_write(self._writer_conn)
            except BaseException:
                self._writer_conn.close()
                raise
        except sqlite3.Error as err:
            os.close(self._lock_fd)
            raise _open_failure(self.path, err) from None
        except BaseException:
            os.close(self._lock_fd)
            raise
        self._failed: StoreFailed | None = None
        self._hub = WatchHub(capacity=watch_buffer, revision=self._revision)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._jobs: queue.SimpleQueue[_Write | _Task | object] = queue.SimpleQueue()
        self._writer_revision = self._revision
        """The writer thread's own counter (ahead of ``_revision`` until delivery)."""
        self._writer = threading.Thread(
            target=self._run_writer, name=f"kubelite-sqlite-writer:{self.path}", daemon=True
        )
        self._writer.start()
        self._reader_local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._reader_conns_lock = threading.Lock()
        self._readers = concurrent.futures.ThreadPoolExecutor(
            max_workers=readers, thread_name_prefix="kubelite-sqlite-reader"
        )

    # -- opening ---------------------------------------------------------------------------

    @staticmethod
    def _lock(path: str) -> int:
        fd = os.open(path + "-lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreFailed(
                "it is already open in another process (another apiserver?)",
                remedy="stop that process, or give this one another --state-dir or --store",
            ) from None
        return fd

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        return conn

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        # auto_vacuum only takes effect before the first table exists, so it comes first.
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: cannot switch to WAL journal mode (got {mode!r})")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.executescript(_SCHEMA)

    @staticmethod
    def _probe_write(conn: sqlite3.Connection) -> None:
        """One committed write, so an unwritable file is refused at start-up, not at first use."""
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('opened_at', CAST(strftime('%s', 'now') AS INT))"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )

    def _sqlite_error(self, err: sqlite3.Error) -> StoreError:
        """The store error for ``err`` (on the loop): damage fails the whole store."""
        damage = _damage(err)
        if damage is None:
            failure = StoreError(f"SQLite error: {err}")
            failure.__cause__ = err
            return failure
        self._fail(damage)
        return damage

    def _fail(self, failure: StoreFailed) -> None:
        """On the loop: refuse every later call and end the watches with ``failure``; once."""
        if self._failed is not None:
            return
        self._failed = failure
        log.error("store %s failed: %s", self.path, failure)
        self._hub.close(error=failure)

    # -- the loop side -----------------------------------------------------------------------

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        if self._failed is not None:
            raise self._failed
        if self._closed:
            raise StoreClosed("store closed")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError("SqliteStore used from a second event loop")
        return loop

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = self._bind_loop()
        try:
            return await loop.run_in_executor(self._readers, self._with_reader, fn)
        except sqlite3.Error as err:
            raise self._sqlite_error(err) from None

    async def _write(self, op: Op) -> KeyValue:
        loop = self._bind_loop()
        future: asyncio.Future[KeyValue] = loop.create_future()
        self._jobs.put(_Write(op, future))
        return await future

    async def _task(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = self._bind_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put(_Task(fn, future))
        try:
            return await future
        except sqlite3.Error as err:
            raise self._sqlite_error(err) from None

    def _deliver(
        self, outcomes: list[tuple[_Write, KeyValue | BaseException]], records: list[Record]
    ) -> None:
        """On the loop, after a commit: publish the group's events, then resolve its futures."""
        if records:
            self._revision = records[-1].revision
            self._hub.publish(map(Record.event, records), revision=self._revision)
        for write, outcome in outcomes:
            if write.future.done():  # the caller gave up; the write stands regardless
                continue
            if isinstance(outcome, BaseException):
                write.future.set_exception(outcome)
            else:
                write.future.set_result(outcome)

    @staticmethod
    def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None:  # no caller ever awaited, so no future is waiting either
            return
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            log.warning("event loop closed before a store result could be delivered; dropped")

    # -- the writer thread -------------------------------------------------------------------

    def _run_writer(self) -> None:
        conn = self._writer_conn
        try:
            stopping = False
            while not stopping:
                job = self._jobs.get()
                if job is _STOP:
                    break
                group: list[_Write] = []
                while True:
                    if isinstance(job, _Task):
                        self._commit_group(conn, group)
                        group = []
                        self._run_task(conn, job)
                    elif isinstance(job, _Write):
                        group.append(job)
                    if len(group) >= MAX_GROUP:
                        break
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if job is _STOP:
                        stopping = True
                        break
                self._commit_group(conn, group)
        finally:
            conn.close()

    def _commit_group(self, conn: sqlite3.Connection, group: list[_Write]) -> None:
        if not group:
            return
        outcomes: list[tuple[_Write, KeyValue | BaseException]] = []
        records: list[Record] = []
        revision = self._writer_revision
        started = time.monotonic()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for write in group:
                    try:
                        record = self._apply(conn, write.op, revision=revision + 1)
                    except StoreError as err:
                        outcomes.append((write, err))
                        continue
                    revision = record.revision
                    records.append(record)
                    result = record.kv() if not record.deleted else record.event().kv
                    assert result is not None
                    outcomes.append((write, result))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except Exception as err:
            log.error("store commit of %d write(s) failed: %s; none applied", len(group), err)
            damage = _damage(err) if isinstance(err, sqlite3.Error) else None
            if damage is not None:
                self._post(self._fail, damage)
            failure = damage or StoreError(f"commit failed: {err}")
            failure.__cause__ = err
            self._post(self._deliver, [(write, failure) for write in group], [])
            return
        self._writer_revision = revision
        self._post(self._deliver, outcomes, records)
        _say_if_slow(started, f"a commit of {len(group)} write(s)")

    @staticmethod
    def _apply(conn: sqlite3.Connection, op: Op, *, revision: int) -> Record:
        row = conn.execute(_LATEST_SQL, (op.key,)).fetchone()
        latest = _record(row) if row else None
        record = next_record(op, latest=latest, revision=revision)
        try:
            conn.execute(_INSERT_SQL, _row(record))
        except sqlite3.IntegrityError as err:
            # The unique (name, prev_revision) index caught a write that our own check let
            # through: only possible if something else wrote to the file. Refuse it.
            raise StoreError(
                f"concurrent write to {op.key!r} rejected by the database: {err}"
            ) from err
        return record

    def _run_task(self, conn: sqlite3.Connection, task: _Task) -> None:
        started = time.monotonic()
        try:
            result = task.fn(conn)
        except BaseException as err:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # a damaged file may refuse even that; the error below says why
            self._post(self._settle, task.future, None, err)
        else:
            self._post(self._settle, task.future, result, None)
        finally:
            _say_if_slow(started, getattr(task.fn, "func", task.fn).__name__)

    # -- reader threads ----------------------------------------------------------------------

    def _with_reader(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn: sqlite3.Connection | None = getattr(self._reader_local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only = 1")
            self._reader_local.conn = conn
            with self._reader_conns_lock:
                self._reader_conns.append(conn)
        conn.execute("BEGIN")  # one snapshot for every statement of this read
        try:
            return fn(conn)
        finally:
            conn.execute("COMMIT")

    @staticmethod
    def _check_window(conn: sqlite3.Connection, revision: int) -> None:
        compacted = _scalar(conn, _COMPACTED_SQL)
        if revision < compacted:
            raise Compacted(revision, compacted)

    # -- the Store protocol ------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        def read(conn: sqlite3.Connection) -> KeyValue | None:
            row = conn.execute(_LATEST_SQL, (key,)).fetchone()
            return _record(row).kv() if row else None

        return await self._read(read)

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        start_after: str | None = None,
        limit: int = 0,
    ) -> ListResult:
        condition, params = _range(prefix, start_after=start_after)
        # SQLite takes the bare columns of a MAX() aggregate from the row holding the maximum,
        # so this reads, per key, its newest row at or before the revision, in one pass over
        # the (name, id) index in key order; HAVING drops the keys deleted by then, and LIMIT
        # stops the scan early.
        sql = (
            f"SELECT MAX(id), {_COLUMNS.removeprefix('id, ')} FROM kv"
            f" WHERE {condition} AND id <= ? GROUP BY name HAVING deleted = 0 ORDER BY name LIMIT ?"
        )

        def read(conn: sqlite3.Connection) -> ListResult:
            if revision:
                self._check_window(conn, revision)
            current = _scalar(conn, _REVISION_SQL)
            at = min(revision, current) if revision else current
            rows = conn.execute(sql, [*params, at, limit + 1 if limit else -1]).fetchall()
            more = bool(limit) and len(rows) > limit
            items = [_record(row).kv() for row in rows[: limit or None]]
            return ListResult(items=[kv for kv in items if kv is not None], revision=at, more=more)

        return await self._read(read)

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> KeyValue:
        """``ttl`` is ignored: this backend has no leases (``store.base``)."""
        return await self._write(Op(WriteKind.CREATE, key, value))

    async def update(
        self, key: str, value: bytes, *, expected_revision: int, ttl: float | None = None
    ) -> KeyValue:
        """``ttl`` is ignored: this backend has no leases (``store.base``)."""
        return await self._write(Op(WriteKind.UPDATE, key, value, expected_revision))

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        return await self._write(Op(WriteKind.DELETE, key, expected_revision=expected_revision))

    def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        on_progress: Callable[[int], None] | None = None,
    ) -> AsyncIterator[Event]:
        """``on_progress`` reports the markers ``request_progress`` queues (``store.watchhub``)."""
        return self._hub.watch(
            prefix, after_revision=after_revision, history=self._history, on_progress=on_progress
        )

    async def request_progress(self) -> bool:
        """Answered at once by the hub: every commit is published there, in revision order,
        before its writer hears of it (``store.watchhub``)."""
        self._hub.request_progress()
        return True

    async def _history(self, prefix: str, *, after_revision: int, limit: int) -> Sequence[Event]:
        condition, params = _range(prefix, column="+name")
        # ``+name``: walk the revisions from ``after_revision`` on (the usual resume is recent),
        # rather than every revision of every key under the prefix and a sort.
        sql = f"SELECT {_COLUMNS} FROM kv WHERE id > ? AND {condition} ORDER BY id LIMIT ?"

        def read(conn: sqlite3.Connection) -> list[Record]:
            self._check_window(conn, after_revision)
            return [_record(row) for row in conn.execute(sql, [after_revision, *params, limit])]

        return [record.event() for record in await self._read(read)]

    async def current_revision(self) -> int:
        return self._revision

    async def compacted_revision(self) -> int:
        return self._compacted

    async def compact(self, revision: int) -> None:
        """Compact to ``revision`` in batches of ``COMPACT_BATCH`` rows, then shrink the files.

        The new compacted revision is committed first, so a reader that could see a
        half-compacted table already refuses revisions below it.
        """
        if revision > self._revision:
            raise ValueError(
                f"cannot compact to {revision}: the current revision is {self._revision}"
            )
        if revision <= self._compacted:
            return

        def mark(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('compacted_revision', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (revision,),
            )

        await self._task(mark)
        self._compacted = revision
        cursor = 0
        while cursor < revision:
            cursor = await self._task(
                functools.partial(self._delete_batch, revision=revision, after=cursor)
            )
        await self._task(self._shrink)

    @staticmethod
    def _delete_batch(conn: sqlite3.Connection, *, revision: int, after: int) -> int:
        """Delete up to ``COMPACT_BATCH`` rows in ``(after, after + COMPACT_SPAN]``; the next
        revision to continue after."""
        upto = min(revision, after + COMPACT_SPAN)
        conn.execute("BEGIN IMMEDIATE")
        ids = [
            row[0]
            for row in conn.execute(
                _COMPACT_CANDIDATES_SQL,
                {"cursor": after, "upto": upto, "revision": revision, "batch": COMPACT_BATCH},
            )
        ]
        if ids:
            conn.executemany("DELETE FROM kv WHERE id = ?", [(i,) for i in ids])
        conn.execute("COMMIT")
        return ids[-1] if len(ids) == COMPACT_BATCH else upto

    @staticmethod
    def _shrink(conn: sqlite3.Connection) -> None:
        # executescript steps the pragma to completion; execute() would free a single page.
        conn.executescript("PRAGMA incremental_vacuum;")
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            log.info("WAL checkpoint after compaction was partial (readers busy); next one retries")

    async def close(self) -> None:
        """Finish queued writes, stop the threads, end the watches with ``StoreClosed``."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(_STOP)
        await asyncio.to_thread(self._writer.join)
        await asyncio.to_thread(self._readers.shutdown, wait=True)
        with self._reader_conns_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
        self._hub.close()
        os.close(self._lock_fd)


def _say_if_slow(started: float, what: str) -> None:
    took = time.monotonic() - started
    if took >= SLOW_WRITER:
        log.warning("store: %s held the writer for %.1fs; every write waited", what, took)
