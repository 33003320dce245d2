"""A kubelet that cannot sandbox pods says so: fatally with ``--sandbox on``, once with ``auto``.

The kubelet runs as ``nobody`` (util-linux ``setpriv``, so the test needs root), where no
namespace can be made; it is pointed at an apiserver that does not exist, since both outcomes
are decided before it talks to one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelite.testing.waiting import poll_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="setpriv to nobody needs root")

NOBODY = 65534
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory nobody can write (pytest's tmp_path sits under root's private directory)."""
    path = Path(tempfile.mkdtemp(prefix="kubelite-nobody-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def kubelet_as_nobody(scratch: Path, sandbox: str, *, log: Path) -> subprocess.Popen[bytes]:
    argv = [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
        sys.executable, "-m", "services.kubelet", "--sandbox", sandbox,
        "--server", "http://127.0.0.1:1", "--state-dir", str(scratch / sandbox),
        "--port", "0", "--healthz-port", "-1", "--node-name", "nobodys-node",
    ]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(
            argv,
            cwd=REPO,
            env={"HOME": str(scratch), "PATH": os.environ.get("PATH", "")},
            stdout=subprocess.DEVNULL,
            stderr=out,
        )


def test_sandbox_on_without_root_is_a_fatal_start_error(scratch: Path) -> None:
    log = scratch / "kubelet.log"
    kubelet = kubelet_as_nobody(scratch, "on", log=log)
    assert kubelet.wait(timeout=60) == 1
    err = log.read_text()
    assert (
        "kubelite kubelet: --sandbox=on, but pods cannot be sandboxed here: "
        "the kubelet is not running as root" in err
    )


def test_sandbox_auto_without_root_runs_unsandboxed_and_says_why(scratch: Path) -> None:
    log = scratch / "kubelet.log"
    kubelet = kubelet_as_nobody(scratch, "auto", log=log)
    try:
        line = poll_until(
            lambda: next(
                (ln for ln in log.read_text().splitlines() if "sandbox" in ln.lower()), ""
            ),
            what="the kubelet's line about the sandbox",
            within=60,
            every=0.2,
            describe=log.read_text,
        )
    finally:
        kubelet.kill()
        kubelet.wait()
    assert "pods run UNSANDBOXED" in line and "not running as root" in line
