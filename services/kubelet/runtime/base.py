"""The runtime seam: what a pod worker asks of "something that runs containers".

The kubelet's pod workers decide *what* should run; a ``Runtime`` makes it so and reports back.
The seam is deliberately close to the CRI's shape, cut down to what kubelite uses: a pod sandbox
(here only an IP address and a directory), image pulls, container instances that are started,
waited on, stopped and listed, their log files, and exec.

Two implementations satisfy it: ``process`` (real OS processes, see ``process.py``) and ``sim``
(no processes at all, like kwok, see ``sim.py``). One conformance suite in
``tests/kubelet/test_runtime_conformance.py`` runs against both.

A *container instance* is one run of one container: a restart is a new instance with a new
``container_id`` and ``attempt + 1``; the old instance stays listed (exited) until the pod is
removed, which is how ``lastState`` and ``kubectl logs --previous`` work.

Not guaranteed: instance records survive a kubelet restart only where the runtime keeps them on
disk (``process`` does, ``sim`` does not — a restarted sim kubelet starts its pods afresh).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = [
    "ContainerConfig",
    "ContainerRecord",
    "ContainerStartError",
    "ExecSession",
    "ImagePullError",
    "ImageRef",
    "Mount",
    "PodSandbox",
    "Runtime",
]


@dataclass(frozen=True, slots=True)
class PodSandbox:
    """Who a pod is, as far as the runtime cares."""

    uid: str
    namespace: str
    name: str
    hostname: str = ""
    """``spec.hostname`` (the pod's name when empty): the sandbox's UTS name."""
    subdomain: str = ""
    """``spec.subdomain``: with it, ``/etc/hosts`` also names ``<host>.<sub>.<ns>.svc.<domain>``."""
    resolv_conf: str | None = None
    """The pod's ``/etc/resolv.conf`` text, owned by the kubelet (``None``: the host's)."""
    host_aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``spec.hostAliases`` as ``(ip, hostnames)``: extra ``/etc/hosts`` lines."""


@dataclass(frozen=True, slots=True)
class Mount:
    """One volume mount of a container, resolved by the kubelet to a path on the node.

    ``host_path`` already includes any ``subPath``; the runtime bind-mounts it at
    ``container_path`` inside the container's sandbox (read-only when ``read_only``).
    """

    host_path: str
    container_path: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class ImageRef:
    """A resolved image: what to run when a container names it."""

    image: str
    """The name the pod spec used (``nginx:1.25``)."""
    image_id: str
    """A stable digest-style id (``nginx@sha256:...``), reported as ``imageID``."""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    default_port: int | None = None
    size_bytes: int = 0


@dataclass(frozen=True, slots=True)
class ContainerConfig:
    """One container of a pod spec, flattened to what a runtime needs."""

    name: str
    image: str
    command: tuple[str, ...] = ()
    """``spec.containers[].command``: overrides the image entrypoint (and drops its cmd)."""
    args: tuple[str, ...] = ()
    """``spec.containers[].args``: overrides the image cmd."""
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    ports: tuple[int, ...] = ()
    memory_limit_bytes: int | None = None
    mounts: tuple[Mount, ...] = ()
    """Volume mounts, in the order of ``volumeMounts`` (a later mount may sit inside an earlier)."""
    attempt: int = 0
    """How many times this container ran before in this pod (its restartCount)."""

    @property
    def spec_hash(self) -> str:
        """Changes when anything that defines the container changes (not ``attempt``)."""
        parts: list[object] = [
            self.name,
            self.image,
            list(self.command),
            list(self.args),
            sorted(self.env.items()),
            self.working_dir,
            list(self.ports),
            self.memory_limit_bytes,
        ]
        if self.mounts:  # absent before mounts existed: old containers keep their hash
            parts.append([[m.host_path, m.container_path, m.read_only] for m in self.mounts])
        blob = json.dumps(parts)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(slots=True)
class ContainerRecord:
    """One container instance as the runtime knows it."""

    container_id: str
    """``<runtime>://<hex>``, reported as ``containerID``."""
    pod_uid: str
    name: str
    attempt: int
    image: str
    image_id: str
    started_at: float
    """Wall-clock seconds since the epoch."""
    log_path: Path | None = None
    pid: int | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    """``Completed``, ``Error``, ``OOMKilled`` or ``StartError`` once exited."""
    message: str | None = None
    spec_hash: str = ""
    """Hash of the ContainerConfig that started it, so spec changes are noticed after a restart."""

    @property
    def running(self) -> bool:
        return self.finished_at is None


class ImagePullError(Exception):
    """The image cannot be had. ``reason`` is Kubernetes' waiting reason for the first failure."""

    def __init__(self, message: str, *, reason: str = "ErrImagePull") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class ContainerStartError(Exception):
    """The container's process could not be started (its command does not exist, say).

    Kubernetes reports this as a terminated state with reason ``StartError`` and exit code 128.
    """

    def __init__(self, message: str, *, record: ContainerRecord) -> None:
        super().__init__(message)
        self.message = message
        self.record = record


class ExecSession(Protocol):
    """A command running inside a container, for the kubelet server's exec endpoint."""

    async def write_stdin(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None: ...

    async def read_output(self) -> tuple[int, bytes]:
        """The next chunk as ``(stream, bytes)`` with stream 1 (stdout) or 2 (stderr);
        ``(0, b"")`` once every output stream is at EOF."""
        ...

    def resize(self, *, width: int, height: int) -> None: ...

    async def wait(self) -> int:
        """The exit code (128 + signal when killed by a signal)."""
        ...

    async def kill(self) -> None: ...


@runtime_checkable
class Runtime(Protocol):
    """What the kubelet needs from a container runtime."""

    name: str
    """``process`` or ``sim``."""
    version: str
    """Reported as ``nodeInfo.containerRuntimeVersion`` (``process://0.1.0``)."""

    @property
    def sandboxed(self) -> bool:
        """Whether pods get a sandbox of their own (namespaces); the sim runtime's never do."""
        ...

    @property
    def sandbox_unavailable_reason(self) -> str | None:
        """Why a runtime that sandboxes pods runs them as plain host processes
        (``--sandbox=off``, or namespaces refused); None when it sandboxes them, or never does."""
        ...

    async def run_pod_sandbox(self, sandbox: PodSandbox) -> str:
        """Prepare the pod (directory, IP); return its IP. Idempotent for the same uid."""
        ...

    async def remove_pod_sandbox(self, pod_uid: str) -> None:
        """Kill whatever still runs in the pod, free its IP, forget it. Idempotent."""
        ...

    async def pull_image(self, image: str, *, policy: str) -> tuple[ImageRef, bool]:
        """Resolve ``image``; return it and whether it was already present on the node.

        Raises ``ImagePullError`` (reason ``ErrImagePull`` or ``ErrImageNeverPull``)."""
        ...

    async def start_container(
        self, sandbox: PodSandbox, config: ContainerConfig, *, image: ImageRef
    ) -> ContainerRecord:
        """Create and start one instance; raises ``ContainerStartError`` if it cannot run.

        Cancelled, it raises ``CancelledError`` only once the instance either never started or
        is listed by ``list_containers``: a container does not outlive an abandoned start
        unknown to the runtime."""
        ...

    async def wait_container(self, container_id: str) -> ContainerRecord:
        """Return once the instance has exited (at once if it already has)."""
        ...

    async def stop_container(self, container_id: str, *, grace_period: float) -> ContainerRecord:
        """SIGTERM, then SIGKILL after ``grace_period`` seconds; return the exited record."""
        ...

    def pod_ip(self, pod_uid: str) -> str | None: ...

    def list_containers(self, pod_uid: str | None = None) -> list[ContainerRecord]:
        """Every known instance (of one pod, or all), oldest attempt first."""
        ...

    def list_pod_uids(self) -> list[str]:
        """Pods the runtime holds state for, including those re-adopted from disk."""
        ...

    async def exec(
        self, container_id: str, command: list[str], *, tty: bool, stdin: bool
    ) -> ExecSession:
        """Run ``command`` in the container's environment."""
        ...

    async def close(self) -> None:
        """Release the runtime's own resources; containers keep running."""
        ...
