"""The ``process`` runtime: each container instance is a real OS process, supervised by a shim.

How a container runs: the image catalog (``images.py``) turns the image into a host program;
``command``/``args`` override entrypoint/cmd as in Kubernetes (with ``$(VAR)`` expansion); the
process gets the container's env plus ``POD_NAME``, ``POD_NAMESPACE``, ``POD_IP``, ``HOSTNAME``
(and ``KUBELITE_PORT``, its first container port, which the built-in nginx binds), its
``workingDir``, and its own session and process group.

The pod sandbox (``sandbox.py``, on unless ``sandbox="off"`` or the probe at ``start`` fails):
each instance runs in new mount, UTS, PID and IPC namespaces as PID 1, with the host's root
read-only, a private ``/tmp``, ``/var/tmp`` and ``/run``, the pod's hostname, ``/etc/hosts``
and ``/etc/resolv.conf``, its volume mounts, and root's home, ``/etc/shadow`` and kubelite's
state masked; its ``workingDir`` is resolved (and created) inside. Stopping sends SIGTERM to its
PID 1 alone — which, as in Kubernetes, ignores it unless it handles it — then SIGKILL, which
takes the whole namespace. ``exec`` enters its namespaces (``nsenter``). Unsandboxed
(``sandboxed`` False, ``sandbox_unavailable_reason`` says why), a container is a plain host
process: it sees the host, its ``workingDir`` is made under the pod's directory when the host
has no such path, and stopping signals its process group.

Each instance is started by ``shim.py`` (spawned with ``posix_spawn`` in a new session, never
through asyncio's subprocess transports, which kill their children when closed). The shim
copies the output into a CRI-format log file, enforces the memory limit (``OOMKilled``, exit
137) and records the exit status, so the container outlives the kubelet and a restarted kubelet
learns how it ended. Exits are noticed through a pidfd on the shim (readable once it
terminates), so adopted shims — no longer our children — are watched exactly like fresh ones.
Every pid read back from disk is checked against its ``/proc`` start time before it is
signalled, so a recycled pid is never killed. A start, once the shim is asked for, is never
abandoned: cancelling ``start_container`` (the kubelet stopping its pod workers) waits for the
shim's answer and records the instance before raising ``CancelledError``, so the container is
stopped with the others (``--stop-pods-on-exit``) or re-adopted by the next kubelet, never left
running unknown to either.

Pod IPs come from a per-node loopback range (``ipam.py``). Not provided: network isolation — a
container shares the host's network namespace and binds its own 127.x.y.z address by
convention; CPU limits; a memory cgroup (the shim accounts resident memory itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import secrets
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.kubelet.runtime.base import (
    ContainerConfig,
    ContainerRecord,
    ContainerStartError,
    ImageRef,
    PodSandbox,
)
from services.kubelet.runtime.exec_session import ProcessExecSession, start_exec
from services.kubelet.runtime.images import DEFAULT_PATH, ImageStore
from services.kubelet.runtime.ipam import PodIPAllocator, bound_loopback_addresses
from services.kubelet.runtime.sandbox import (
    SANDBOX_MODES,
    SandboxLayout,
    SandboxUnavailable,
    probe_sandbox,
)
from services.kubelet.state import PodRecord, StateDir

__all__ = ["ProcessRuntime", "expand_vars", "process_start_time"]

log = logging.getLogger("kubelet.runtime.process")

SHIM = Path(__file__).with_name("shim.py")
VERSION = "0.1.0"
STOP_CONFIRM_SECONDS = 10.0
"""After SIGKILL, how long to wait for the shim to record the exit before giving up on it."""

_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand_vars(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined names replaced, ``$$`` -> ``$``, others kept."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR.sub(sub, text)


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        if fields[0] == "Z":  # a zombie has finished; nothing left to signal
            return None
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _alive(pid: int | None, start: int | None) -> bool:
    if not pid or start is None:
        return False
    return process_start_time(pid) == start


@dataclass(slots=True)
class _Instance:
    record: ContainerRecord
    shim_pid: int | None
    shim_start: int | None
    pid_start: int | None
    env: dict[str, str]
    cwd: str | None
    exited: asyncio.Future[ContainerRecord]
    sandboxed: bool = False
    """In its own namespaces: signals go to its PID 1 alone, exec enters them."""
    killed: bool = False
    pidfd: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ProcessRuntime:
    """Implements ``runtime.base.Runtime`` with OS processes. Call ``await start()`` first."""

    name = "process"
    version = f"process://{VERSION}"

    def __init__(
        self, *, state_dir: Path, pod_cidr: str, images: ImageStore, sandbox: str = "auto"
    ) -> None:
        if sandbox not in SANDBOX_MODES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}, not {sandbox!r}")
        self.state = StateDir(state_dir)
        self.images = images
        self.ipam = PodIPAllocator(pod_cidr, in_use=bound_loopback_addresses)
        self.sandbox_mode = sandbox
        self.sandboxed = False
        """Whether new containers get the pod sandbox; known once ``start`` has probed."""
        self.sandbox_unavailable_reason: str | None = None
        """Why they do not (``--sandbox off``, not root, a failed probe); None when sandboxed."""
        self.layout = SandboxLayout.for_state_dir(state_dir)
        self._pods: dict[str, PodRecord] = {}
        self._instances: dict[str, _Instance] = {}
        self.closed = False

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Decide whether pods are sandboxed (``SandboxUnavailable`` under ``sandbox="on"``
        when they cannot be), then re-adopt what a previous kubelet left: pods, running shims,
        finished instances."""
        await self._decide_sandbox()
        for pod in self.state.load_pods():
            self._pods[pod.uid] = pod
            self.ipam.reserve(pod_uid=pod.uid, ip=pod.ip)
            for data in self.state.load_containers(pod.uid):
                self._adopt(pod.uid, data)
        running = sum(1 for i in self._instances.values() if i.record.running)
        if self._pods:
            log.info(
                "re-adopted %d pod(s) with %d running container(s) from %s; "
                "the pod workers will reconcile them against the apiserver",
                len(self._pods),
                running,
                self.state.root,
            )

    async def _decide_sandbox(self) -> None:
        if self.sandbox_mode == "off":
            self.sandbox_unavailable_reason = "the kubelet runs with --sandbox=off"
            return
        reason = await probe_sandbox(self.state.root / "sandbox-probe")
        if reason is not None and self.sandbox_mode == "on":
            raise SandboxUnavailable(f"--sandbox=on, but pods cannot be sandboxed here: {reason}")
        self.sandboxed = reason is None
        self.sandbox_unavailable_reason = reason

    async def close(self) -> None:
        self.closed = True
        loop = asyncio.get_running_loop()
        for inst in self._instances.values():
            if inst.pidfd is not None:
                loop.remove_reader(inst.pidfd)
                os.close(inst.pidfd)
                inst.pidfd = None

    # ---- pods ------------------------------------------------------------------------------

    async def run_pod_sandbox(self, sandbox: PodSandbox) -> str:
        if sandbox.uid in self._pods:
            return self._pods[sandbox.uid].ip
        ip = self.ipam.allocate(sandbox.uid)
        record = PodRecord(uid=sandbox.uid, namespace=sandbox.namespace, name=sandbox.name, ip=ip)
        self.state.save_pod(record)
        self._pods[sandbox.uid] = record
        return ip

    async def remove_pod_sandbox(self, pod_uid: str) -> None:
        running = [
            i for i in self._instances.values() if i.record.pod_uid == pod_uid and i.record.running
        ]
        await asyncio.gather(
            *(self.stop_container(i.record.container_id, grace_period=0) for i in running)
        )
        for cid in [c for c, i in self._instances.items() if i.record.pod_uid == pod_uid]:
            del self._instances[cid]
        self.ipam.release(pod_uid)
        self._pods.pop(pod_uid, None)
        await asyncio.to_thread(self.state.remove_pod, pod_uid)

    def pod_ip(self, pod_uid: str) -> str | None:
        pod = self._pods.get(pod_uid)
        return pod.ip if pod else None

    def list_pod_uids(self) -> list[str]:
        return list(self._pods)

    def list_containers(self, pod_uid: str | None = None) -> list[ContainerRecord]:
        records = [
            i.record
            for i in self._instances.values()
            if pod_uid is None or i.record.pod_uid == pod_uid
        ]
        return sorted(records, key=lambda r: (r.pod_uid, r.name, r.attempt))

    # ---- images ----------------------------------------------------------------------------

    async def pull_image(self, image: str, *, policy: str) -> tuple[ImageRef, bool]:
        return self.images.pull(image, policy=policy)

    # ---- containers ------------------------------------------------------------------------

    def _container_env(
        self, sandbox: PodSandbox, config: ContainerConfig, image: ImageRef, ip: str
    ) -> dict[str, str]:
        env: dict[str, str] = {"PATH": DEFAULT_PATH, "HOME": "/root"}
        env.update(image.env)
        env["HOSTNAME"] = sandbox.hostname or sandbox.name
        env["POD_NAME"] = sandbox.name
        env["POD_NAMESPACE"] = sandbox.namespace
        env["POD_IP"] = ip
        port = (config.ports or (image.default_port,))[0]
        if port:
            env["KUBELITE_PORT"] = str(port)
        for key, value in config.env.items():
            env[key] = expand_vars(value, env)
        return env

    def _working_dir(self, sandbox: PodSandbox, config: ContainerConfig, image: ImageRef) -> str:
        wanted = config.working_dir or image.working_dir
        if self.sandboxed:  # resolved inside the sandbox, created there when missing
            return wanted or "/"
        root = self.state.pod_root(sandbox.uid)
        if not wanted:
            return str(root)
        if os.path.isdir(wanted):
            return wanted
        inside = root / wanted.lstrip("/")
        inside.mkdir(parents=True, exist_ok=True)
        return str(inside)

    async def start_container(
        self, sandbox: PodSandbox, config: ContainerConfig, *, image: ImageRef
    ) -> ContainerRecord:
        ip = await self.run_pod_sandbox(sandbox)
        env = self._container_env(sandbox, config, image, ip)
        if config.command:
            argv = list(config.command) + list(config.args)
        else:
            argv = list(image.entrypoint) + list(config.args or image.cmd)
        argv = [expand_vars(a, env) for a in argv]
        cwd = self._working_dir(sandbox, config, image)
        container_id = f"{self.name}://{secrets.token_hex(32)}"
        log_path = self.state.log_path(sandbox.uid, config.name, config.attempt)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.touch()
        exit_file = self.state.exit_file(sandbox.uid, container_id)
        pid_file = self.state.pid_file(sandbox.uid, container_id)
        record = ContainerRecord(
            container_id=container_id,
            pod_uid=sandbox.uid,
            name=config.name,
            attempt=config.attempt,
            image=config.image,
            image_id=image.image_id,
            started_at=time.time(),
            log_path=log_path,
            spec_hash=config.spec_hash,
        )
        self._persist(
            record, env=env, cwd=cwd, extra={"state": "creating", "sandboxed": self.sandboxed}
        )
        shim_config: dict[str, Any] = {
            "argv": argv,
            "env": env,
            "cwd": cwd,
            "logPath": str(log_path),
            "exitFile": str(exit_file),
            "pidFile": str(pid_file),
            "memoryLimit": config.memory_limit_bytes,
        }
        if self.sandboxed:
            shim_config["sandbox"] = self.layout.container_spec(
                pod_dir=self.state.pod_dir(sandbox.uid),
                instance=exit_file.name.removesuffix(".exit.json"),
                sandbox=sandbox,
                config=config,
                ip=ip,
                working_dir=cwd,
                path=env.get("PATH", ""),
            )
        # once the shim is asked for, the instance must end up in ``_instances`` whatever
        # happens to the caller: a start abandoned half-way leaves a container nobody stops
        what = f"{sandbox.namespace}/{sandbox.name}/{config.name}"
        launch = asyncio.create_task(
            self._launch(record, shim_config, env=env, cwd=cwd), name=f"start {what}"
        )
        return await _uninterrupted(launch, what=what)

    async def _launch(
        self,
        record: ContainerRecord,
        shim_config: dict[str, Any],
        *,
        env: dict[str, str],
        cwd: str | None,
    ) -> ContainerRecord:
        """Spawn the shim, then record and watch the instance it started (or failed to)."""
        shim_pid, answer = await asyncio.to_thread(_spawn_shim, shim_config)
        loop = asyncio.get_running_loop()
        inst = _Instance(
            record=record,
            shim_pid=shim_pid,
            shim_start=process_start_time(shim_pid),
            pid_start=None,
            env=env,
            cwd=cwd,
            exited=loop.create_future(),
            sandboxed=self.sandboxed,
        )
        self._instances[record.container_id] = inst
        if "error" in answer or "pid" not in answer:
            record.finished_at = time.time()
            record.exit_code = int(answer.get("exitCode", 128))
            record.reason = "StartError"
            record.message = str(answer.get("error") or "the shim failed to start")
            inst.exited.set_result(record)
            self._persist(record, env=env, cwd=cwd)
            raise ContainerStartError(record.message, record=record)
        record.pid = int(answer["pid"])
        record.started_at = float(answer.get("startedAt") or record.started_at)
        inst.pid_start = process_start_time(record.pid)
        self._persist_instance(inst)
        self._watch(inst)
        return record

    async def wait_container(self, container_id: str) -> ContainerRecord:
        inst = self._instances[container_id]
        return await asyncio.shield(inst.exited)

    async def stop_container(self, container_id: str, *, grace_period: float) -> ContainerRecord:
        inst = self._instances[container_id]
        if inst.exited.done():
            return inst.exited.result()
        if grace_period > 0:
            self._signal(inst, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(inst.exited), grace_period)
        inst.killed = True
        self._signal(inst, signal.SIGKILL)
        try:
            return await asyncio.wait_for(asyncio.shield(inst.exited), STOP_CONFIRM_SECONDS)
        except TimeoutError:
            log.error(
                "container %s (pid %s) did not confirm its exit %.0fs after SIGKILL; "
                "marking it exited and moving on",
                inst.record.name,
                inst.record.pid,
                STOP_CONFIRM_SECONDS,
            )
            self._finish(inst)
            return inst.record

    def _signal(self, inst: _Instance, sig: int) -> None:
        """A sandboxed container's PID 1 alone, as a container runtime does (its SIGKILL takes
        the whole PID namespace; a SIGTERM it has no handler for is ignored, as in Kubernetes);
        an unsandboxed container's whole process group."""
        pid = inst.record.pid
        if pid and _alive(pid, inst.pid_start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if inst.sandboxed:
                    os.kill(pid, sig)
                else:
                    os.killpg(pid, sig)

    async def exec(
        self, container_id: str, command: list[str], *, tty: bool, stdin: bool
    ) -> ProcessExecSession:
        inst = self._instances[container_id]
        inside = inst.record.pid if inst.sandboxed else None
        return await start_exec(
            command, env=inst.env, cwd=inst.cwd, tty=tty, in_namespaces_of=inside
        )

    # ---- exit watching & persistence -------------------------------------------------------

    def _watch(self, inst: _Instance) -> None:
        assert inst.shim_pid is not None
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(inst.shim_pid)
        except ProcessLookupError:
            self._on_shim_exit(inst)
            return
        if not _alive(inst.shim_pid, inst.shim_start):
            os.close(pidfd)
            self._on_shim_exit(inst)
            return
        inst.pidfd = pidfd
        loop.add_reader(pidfd, self._on_shim_exit, inst)

    def _on_shim_exit(self, inst: _Instance) -> None:
        if inst.pidfd is not None:
            asyncio.get_running_loop().remove_reader(inst.pidfd)
            os.close(inst.pidfd)
            inst.pidfd = None
        if inst.shim_pid:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(inst.shim_pid, os.WNOHANG)  # reap it if it is our child
        self._finish(inst)

    def _finish(self, inst: _Instance) -> None:
        if inst.exited.done():
            return
        record = inst.record
        status = self.state.read_exit(record.pod_uid, record.container_id)
        if status is not None:
            record.exit_code = int(status.get("exitCode", 0))
            record.signal = status.get("signal")
            record.reason = status.get("reason") or (
                "Completed" if not record.exit_code else "Error"
            )
            record.message = status.get("message")
            record.finished_at = float(status.get("finishedAt") or time.time())
        else:
            # the shim died without a word: killed along with the container, most likely
            record.exit_code = 137
            record.reason = "Error" if inst.killed else "ContainerStatusUnknown"
            if not inst.killed:
                record.message = "The container could not be located when the pod was terminated"
            record.finished_at = time.time()
            if record.pid and _alive(record.pid, inst.pid_start):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(record.pid, signal.SIGKILL)
        self._persist_instance(inst)
        inst.exited.set_result(record)

    def _persist_instance(self, inst: _Instance) -> None:
        self._persist(
            inst.record,
            env=inst.env,
            cwd=inst.cwd,
            extra={
                "shimPid": inst.shim_pid,
                "shimStart": inst.shim_start,
                "pidStart": inst.pid_start,
                "sandboxed": inst.sandboxed,
            },
        )

    def _persist(
        self,
        record: ContainerRecord,
        *,
        env: dict[str, str],
        cwd: str | None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        data = {
            "containerID": record.container_id,
            "podUID": record.pod_uid,
            "name": record.name,
            "attempt": record.attempt,
            "image": record.image,
            "imageID": record.image_id,
            "startedAt": record.started_at,
            "logPath": str(record.log_path) if record.log_path else None,
            "pid": record.pid,
            "finishedAt": record.finished_at,
            "exitCode": record.exit_code,
            "signal": record.signal,
            "reason": record.reason,
            "message": record.message,
            "specHash": record.spec_hash,
            "env": env,
            "cwd": cwd,
            **(extra or {}),
        }
        if record.pod_uid in self._pods or self.state.pod_dir(record.pod_uid).is_dir():
            self.state.save_container(record.pod_uid, record.container_id, data)

    def _adopt(self, pod_uid: str, data: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        record = ContainerRecord(
            container_id=data["containerID"],
            pod_uid=pod_uid,
            name=data["name"],
            attempt=int(data.get("attempt", 0)),
            image=data.get("image", ""),
            image_id=data.get("imageID", ""),
            started_at=float(data.get("startedAt") or time.time()),
            log_path=Path(data["logPath"]) if data.get("logPath") else None,
            pid=data.get("pid"),
            finished_at=data.get("finishedAt"),
            exit_code=data.get("exitCode"),
            signal=data.get("signal"),
            reason=data.get("reason"),
            message=data.get("message"),
            spec_hash=data.get("specHash", ""),
        )
        inst = _Instance(
            record=record,
            shim_pid=data.get("shimPid"),
            shim_start=data.get("shimStart"),
            pid_start=data.get("pidStart"),
            env=dict(data.get("env") or {}),
            cwd=data.get("cwd"),
            exited=loop.create_future(),
            sandboxed=bool(data.get("sandboxed")),
        )
        self._instances[record.container_id] = inst
        if record.finished_at is not None:
            inst.exited.set_result(record)
            return
        if data.get("state") == "creating":
            # the kubelet died while starting it: the shim may have written its pids
            pid_file = self.state.pid_file(pod_uid, record.container_id)
            try:
                pids = json.loads(pid_file.read_text())
                record.pid = int(pids["pid"])
                inst.shim_pid = int(pids["shimPid"])
            except (OSError, ValueError, KeyError):
                record.pid = inst.shim_pid = None
            # the start times were never recorded: trust live pids only if they are younger
            # than the record itself, i.e. started after it was written
            inst.shim_start = process_start_time(inst.shim_pid) if inst.shim_pid else None
            inst.pid_start = process_start_time(record.pid) if record.pid else None
        if inst.shim_pid and _alive(inst.shim_pid, inst.shim_start):
            self._watch(inst)
        else:
            self._finish(inst)


async def _uninterrupted(launch: asyncio.Task[ContainerRecord], *, what: str) -> ContainerRecord:
    """``launch``'s result, or — when the caller is cancelled meanwhile (the kubelet stopping
    its pod workers) — ``CancelledError`` once ``launch`` has finished, so the instance it
    started is recorded and stopped or re-adopted like every other, never left running unknown.

    Bounded by the shim's answer: it comes as soon as the container has exec'd (or failed to).
    """
    cancelled = False
    while not launch.done():
        try:
            await asyncio.wait({launch})
        except asyncio.CancelledError:
            if not cancelled:
                log.info(
                    "container %s: cancelled while its shim starts it; "
                    "recording the start before giving up",
                    what,
                )
            cancelled = True
    if cancelled:
        if not launch.cancelled():
            launch.exception()  # a failed start is recorded as exited; the caller is gone
        raise asyncio.CancelledError
    return launch.result()


def _spawn_shim(config: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Start a shim in a new session and read its one-line answer. Blocking: run in a thread."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-I", "-S", str(SHIM)],
            {"PATH": os.environ.get("PATH", DEFAULT_PATH)},
            file_actions=[
                (os.POSIX_SPAWN_DUP2, in_r, 0),
                (os.POSIX_SPAWN_DUP2, out_w, 1),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
            setsid=True,
        )
    finally:
        os.close(in_r)
        os.close(out_w)
    try:
        with os.fdopen(in_w, "wb") as fh:
            fh.write(json.dumps(config).encode())
        with os.fdopen(out_r, "rb") as fh:
            line = fh.readline()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise
    try:
        answer = json.loads(line) if line else {"error": "the shim exited without answering"}
    except ValueError:
        answer = {"error": f"the shim answered {line!r}"}
    if "pid" not in answer:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)  # it exits right after a failed start; reap it here, off the loop
    return pid, answer
