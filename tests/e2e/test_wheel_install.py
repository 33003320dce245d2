"""kubelite installed from its own sdist and wheel, outside the checkout, runs a whole cluster.

Why: every other test runs from the editable checkout, where a file the packaging leaves out is
still on disk beside the modules. A non-editable install — ``pip install kubelite``, a wheel, the
container image — has only what the wheel carries; a kubelet without its image catalog
(``services/kubelet/runtime/images.yaml``) crashed at start and no test saw it.

What it does, as a user would: builds the sdist and, from that sdist, the wheel
(``python -m build``, PEP 517 build isolation), checks both carry every non-Python file found
under the packages (so data files later issues add are covered without touching this test),
installs the wheel into a fresh venv in the test's tmp dir, and runs *that venv's* ``kubelite up``
from a working directory outside the repository, with no ``PYTHONPATH``: both nodes must become
Ready, an nginx pod must answer HTTP on its pod IP, and Ctrl-C must leave no process behind.

Limits: needs the package index (the build backend and the runtime dependencies are installed
into the fresh venv); measured here at about 40 s for build plus install on 2 busy cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import zipfile
from ipaddress import IPv4Network, ip_address
from pathlib import Path

import pytest

from tests.e2e.cluster import (
    PODS,
    ClusterView,
    banner_api_url,
    http_get,
    leftover_processes,
    loopback_pod_cidr,
    running,
)
from tests.factories import nginx_rc

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("api", "store", "client", "component", "services", "kubelite")
BANNER = "kubelite is up: "
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*")


def _run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 400) -> str:
    result = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{argv[:4]} failed:\n{result.stdout[-3000:]}\n{result.stderr}"
    return result.stdout


def _data_files() -> set[str]:
    """Every non-Python file under the packages, as a path inside the distribution."""
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            rel = path.relative_to(ROOT)
            if (
                path.is_file()
                and path.suffix not in (".py", ".pyc")
                and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts)
            ):
                found.add(rel.as_posix())
    return found


def _source_copy(dest: Path) -> Path:
    """What a source checkout holds for a build: the packages, pyproject.toml and README.md.
    Built from a copy so setuptools' build/ and egg-info never land in the shared tree."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, dest / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, dest / package, ignore=JUNK)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv, outside the checkout, with kubelite installed from its wheel."""
    top = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    src = _source_copy(top / "src")
    venv = top / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=top, env=env)
    py = str(venv / "bin" / "python")
    _run([py, "-m", "pip", "install", "-q", "build"], cwd=top, env=env)
    # no flags: the sdist first, then the wheel built from that sdist (as pip does for a user)
    _run([py, "-m", "build", "--outdir", str(top / "dist"), str(src)], cwd=top, env=env)
    (sdist,) = (top / "dist").glob("kubelite-*.tar.gz")
    (wheel,) = (top / "dist").glob("kubelite-*.whl")

    wanted = _data_files()
    assert "services/kubelet/runtime/images.yaml" in wanted
    with zipfile.ZipFile(wheel) as zf:
        missing = wanted - set(zf.namelist())
    assert not missing, f"the wheel lacks {sorted(missing)}: declare them as package data"
    with tarfile.open(sdist) as tf:
        in_sdist = {name.split("/", 1)[1] for name in tf.getnames() if "/" in name}
    assert not wanted - in_sdist, f"the sdist lacks {sorted(wanted - in_sdist)}"

    _run([py, "-m", "pip", "install", "-q", str(wheel)], cwd=top, env=env)
    return venv


def test_wheel_installs_the_packages_into_site_packages(installed: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = _run(
        [
            str(installed / "bin" / "python"),
            "-c",
            "import kubelite, services.kubelet.runtime.images as i; "
            "print(kubelite.__file__); print(i.DEFAULT_CATALOG, i.DEFAULT_CATALOG.is_file())",
        ],
        cwd=tmp_path,
        env=env,
    )
    module, catalog = out.splitlines()
    site = str(installed / "lib")
    assert module.startswith(site) and "site-packages" in module, module
    assert catalog.startswith(site) and catalog.endswith(" True"), catalog
    assert not module.startswith(str(ROOT))


async def test_installed_kubelite_up_runs_nodes_and_a_pod_that_answers(
    installed: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    cidr = loopback_pod_cidr(2)
    network = IPv4Network(cidr)
    marker = ""  # the API's host:port, in every child's command line once it is known
    argv = [
        str(installed / "bin" / "kubelite"), "up",
        "--state-dir", str(state), "--port", "0", "--kubelet-port", "0",
        "--scheduler-port", "0", "--controller-manager-port", "0", "--proxy-port", "0",
        "--dns-health-port", "0", "--secure-port", "0",
        "--pod-cidr", cidr,
        "--no-color",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONUNBUFFERED"] = "1"
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=elsewhere,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    lines: list[str] = []
    banner = asyncio.Event()

    async def read() -> None:
        assert proc.stdout is not None
        while raw := await proc.stdout.readline():
            line = raw.decode(errors="replace").rstrip("\n")
            lines.append(line)
            if BANNER in line:
                banner.set()

    reader = asyncio.create_task(read(), name="e2e installed kubelite up output")
    try:
        exited = asyncio.create_task(proc.wait(), name="e2e installed kubelite up exit")
        shown = asyncio.create_task(banner.wait(), name="e2e installed kubelite up banner")
        done, _ = await asyncio.wait({exited, shown}, timeout=120, return_when="FIRST_COMPLETED")
        exited.cancel()
        shown.cancel()
        assert shown in done, "no banner from the installed kubelite up:\n" + "\n".join(lines[-60:])
        assert not any("Traceback" in line for line in lines), "\n".join(lines[-60:])

        server = banner_api_url(lines)
        marker = server.removeprefix("http://")
        view = ClusterView(server)
        await view.watch()
        try:
            assert view.node_ready("node1") and view.node_ready("node2"), view.summary()
            await view.client.create(PODS, _nginx_pod(), namespace="default")
            await view.until(
                lambda: running(view.pod("web")), within=90, what="the nginx pod Running"
            )
            pod = view.pod("web")
            assert pod is not None
            ip = pod["status"]["podIP"]
            assert ip_address(ip) in network, ip
            status, body = await http_get(f"http://{ip}:80/")
            assert status == 200, body
        finally:
            await view.close()

        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 90) == 0, "\n".join(lines[-40:])
        await reader
        assert leftover_processes(root=state, network=network, marker=marker) == {}
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await reader
        for pid in leftover_processes(root=state, network=network, marker=marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _nginx_pod() -> dict:
    template = nginx_rc("web", replicas=1)["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", **template["metadata"]},
        "spec": template["spec"],
    }
