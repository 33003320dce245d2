"""The real ``kubelite apiserver`` over a SQLite file it cannot use — random bytes over the file,
a state dir that is a file, a file or directory it may not write — exits 1 with exactly one line
on stderr (which store, what is wrong, what to do) and no traceback. Damage found while serving
is answered 503 and stops the server the same way, instead of a traceback every second.

Tests run as root, whom file modes do not stop; the unwritable cases run the apiserver as the
unprivileged ``nobody`` user (``setpriv``), from a directory under ``/tmp`` it can reach.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from api.registry import REGISTRY
from kubelite.testing import ComponentProcess
from store import open_store
from tests.factories import pod
from tests.store.damage import PAGE, damage, page_headers

pytestmark = pytest.mark.e2e

EXIT_BOUND = 60.0
"""Seconds a refusing apiserver gets to exit: a bound for a hung test, not a speed claim."""

MOVE_ASIDE = "move it aside (with its -wal and -shm files) or restore a backup, then start again"
MAKE_WRITABLE = (
    "make the file and its directory writable for this user, or choose another location "
    "(--state-dir or --store)"
)


async def make_cluster_database(path: Path, *, pods: int) -> None:
    """A closed database holding ``pods`` pods as the apiserver stores them."""
    pods_rt = next(rt for rt in REGISTRY if rt.plural == "pods" and rt.group == "")
    store = open_store(f"sqlite://{path}?synchronous=OFF")
    padding = "x" * 1500

    def body(i: int) -> bytes:
        obj = pod(f"p{i:05d}", labels={"padding": "yes"})
        obj["metadata"].update(
            namespace="default", uid=f"uid-{i}", creationTimestamp="2024-01-01T00:00:00Z"
        )
        obj["metadata"]["annotations"] = {"padding": padding}
        return json.dumps(obj).encode()

    await asyncio.gather(
        *(store.create(pods_rt.key("default", f"p{i:05d}"), body(i)) for i in range(pods))
    )
    await store.close()


def run_refused(args: list[str], *, user: str | None = None) -> str:
    """Run the apiserver to its exit; assert exit 1 and a clean stderr; return that stderr."""
    ids = pwd.getpwnam(user) if user else None
    prefix = (
        ["setpriv", f"--reuid={ids.pw_uid}", f"--regid={ids.pw_gid}", "--clear-groups"]
        if ids
        else []
    )
    done = subprocess.run(
        [
            *prefix,
            sys.executable,
            "-m",
            "services.apiserver",
            "--insecure-port",
            "0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=EXIT_BOUND,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


async def test_random_bytes_at_offset_zero(tmp_path: Path) -> None:
    db = tmp_path / "kubelite.db"
    await make_cluster_database(db, pods=50)
    damage(db, offsets=[0])
    stderr = await asyncio.to_thread(run_refused, ["--store", f"sqlite://{db}"])
    assert one_line(stderr) == (
        f"kubelite apiserver: store sqlite://{db}: the file is not a SQLite database "
        f"(file is not a database); {MOVE_ASIDE}"
    )


async def test_random_bytes_in_the_middle_of_the_default_state_dir(tmp_path: Path) -> None:
    db = tmp_path / "state" / "kubelite.db"
    db.parent.mkdir()
    await make_cluster_database(db, pods=300)
    damage(db, offsets=[db.stat().st_size // PAGE // 2 * PAGE - 100])
    stderr = await asyncio.to_thread(run_refused, ["--state-dir", str(tmp_path / "state")])
    line = one_line(stderr)
    assert line.startswith(
        f"kubelite apiserver: store sqlite://{db}: the database is damaged "
        "(database disk image is malformed: "
    ), line
    assert line.endswith(MOVE_ASIDE)


def test_a_state_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("not a directory")
    stderr = run_refused(["--state-dir", str(tmp_path / "state")])
    assert one_line(stderr) == (
        f"kubelite apiserver: store sqlite://{tmp_path}/state/kubelite.db: cannot create its "
        f"directory {tmp_path}/state (a file is in the way); remove what is in the way or "
        "choose another --state-dir or --store"
    )


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    """A directory under /tmp the ``nobody`` user can reach (pytest's tmp dirs are 0700)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the apiserver as another user")
    path = Path(tempfile.mkdtemp(prefix="kubelite-nobody-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


async def test_a_read_only_database_file(nobody_dir: Path) -> None:
    db = nobody_dir / "kubelite.db"
    await make_cluster_database(db, pods=10)
    # the directory and the lock file are the apiserver's; the database file is not writable
    shutil.chown(nobody_dir, user="nobody")
    shutil.chown(f"{db}-lock", user="nobody")
    db.chmod(0o444)
    stderr = await asyncio.to_thread(run_refused, ["--store", f"sqlite://{db}"], user="nobody")
    assert one_line(stderr) == (
        f"kubelite apiserver: store sqlite://{db}: the file cannot be opened for writing "
        f"(attempt to write a readonly database); {MAKE_WRITABLE}"
    )


async def test_a_read_only_state_dir(nobody_dir: Path) -> None:
    state = nobody_dir / "state"
    state.mkdir()
    await make_cluster_database(state / "kubelite.db", pods=10)
    stderr = await asyncio.to_thread(
        run_refused, ["--state-dir", str(state)], user="nobody"
    )  # owned by root, mode 0755: nobody can create neither the lock nor the WAL
    assert one_line(stderr) == (
        f"kubelite apiserver: store sqlite://{state}/kubelite.db: cannot write "
        f"{state}/kubelite.db-lock (Permission denied); {MAKE_WRITABLE}"
    )


async def test_damage_found_while_serving_answers_503_and_stops_the_server(
    apiserver_process: Any, tmp_path: Path
) -> None:
    db = tmp_path / "kubelite.db"
    # ~10 MB of pods: far more than SQLite's page caches (2 MB per connection) hold, so a full
    # list reads damaged pages from the file
    await make_cluster_database(db, pods=4000)
    server: ComponentProcess = await asyncio.to_thread(apiserver_process, store=f"sqlite://{db}")
    damage(db, offsets=page_headers(db, first=8, every=16))
    async with aiohttp.ClientSession(server.url) as session:
        # a limit: read from the store (a consistent list without one may come from the cache)
        async with session.get("/api/v1/pods", params={"limit": "10000"}) as resp:
            assert resp.status == 503, await resp.text()
            status = await resp.json()
    assert (status["reason"], status["code"]) == ("ServiceUnavailable", 503)
    assert status["message"].startswith(
        "the storage of this apiserver has failed: the database is damaged"
    )
    assert await server.wait_exit(within=EXIT_BOUND) == 1
    log = server.log_path.read_text()
    assert "Traceback" not in log, log
    [last] = [line for line in log.splitlines() if line.startswith("kubelite apiserver:")]
    assert last.startswith(f"kubelite apiserver: store sqlite://{db}: the database is damaged")
    assert last.endswith(MOVE_ASIDE)
