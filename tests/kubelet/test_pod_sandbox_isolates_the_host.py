"""The process runtime's pod sandbox, at the runtime seam: what a container sees of the machine.

Each test starts real containers (real namespaces, real mounts) through ``ProcessRuntime`` and
reads what they printed; the through-the-apiserver view (kubectl exec/cp) is in
``test_pod_sandbox_through_kubectl.py``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from pathlib import Path

import pytest

from services.kubelet.logs import LogOptions, read_log
from services.kubelet.runtime.base import (
    ContainerConfig,
    ContainerRecord,
    ContainerStartError,
    Mount,
    PodSandbox,
)
from services.kubelet.runtime.process import ProcessRuntime, process_start_time
from services.kubelet.runtime.sandbox import SandboxLayout
from tests.kubelet.conftest import run

HERE = Path(__file__).resolve().parent
POD = PodSandbox(
    uid="uid-sandboxed",
    namespace="shop",
    name="web-0",
    hostname="web-0",
    subdomain="web",
    host_aliases=(("10.1.2.3", ("foo.local", "bar.local")),),
)


async def output(rt: ProcessRuntime, record: ContainerRecord) -> str:
    """What the instance printed (stdout and stderr, in order), once it has exited."""
    await asyncio.wait_for(rt.wait_container(record.container_id), 30)
    assert record.log_path is not None
    lines = record.log_path.read_text().splitlines()
    return "\n".join(line.split(" ", 3)[3] for line in lines)


async def start(rt: ProcessRuntime, script: str, **config: object) -> ContainerRecord:
    ref, _ = await rt.pull_image("busybox", policy="IfNotPresent")
    name = str(config.pop("name", "main"))
    cfg = ContainerConfig(name=name, image="busybox", command=("sh", "-c", script), **config)  # type: ignore[arg-type]
    return await rt.start_container(POD, cfg, image=ref)


async def test_the_container_is_pid_1_and_sees_only_its_own_processes(
    process_runtime: ProcessRuntime,
) -> None:
    assert process_runtime.sandboxed, process_runtime.sandbox_unavailable_reason
    record = await run(
        process_runtime, "sh", "-c", "echo pid=$$$$; sleep 60 & set -- /proc/[0-9]*; echo $#"
    )
    text = await output(process_runtime, record)
    # ($$$$ is the shell's $$ once Kubernetes' $(VAR) expansion has turned $$ into $). The shell
    # lists /proc itself (a glob: no process of its own), after `&` has forked sleep — counting
    # with `ls | grep` raced grep's fork against ls's read of /proc.
    assert text.splitlines() == ["pid=1", "2"]  # sh and sleep: nothing of the host


async def test_hostname_and_etc_hosts_are_the_pods(process_runtime: ProcessRuntime) -> None:
    record = await start(process_runtime, "hostname; cat /etc/hostname; cat /etc/hosts")
    text = await output(process_runtime, record)
    ip = process_runtime.pod_ip(POD.uid)
    lines = text.splitlines()
    assert lines[:3] == ["web-0", "web-0", "# Kubernetes-managed hosts file."]
    assert "127.0.0.1\tlocalhost" in lines
    assert f"{ip}\tweb-0.web.shop.svc.cluster.local\tweb-0" in lines
    assert "10.1.2.3\tfoo.local\tbar.local" in lines


async def test_the_host_root_is_read_only(process_runtime: ProcessRuntime) -> None:
    record = await run(process_runtime, "sh", "-c", "touch /etc/kubelite-x || echo refused")
    text = await output(process_runtime, record)
    assert "Read-only file system" in text and "refused" in text.splitlines()


async def test_tmp_is_the_containers_own(process_runtime: ProcessRuntime, tmp_path: Path) -> None:
    marker = f"kubelite-{uuid.uuid4().hex}"
    record = await run(process_runtime, "sh", "-c", f"echo inside > /tmp/{marker}; ls /tmp")
    text = await output(process_runtime, record)
    assert marker in text.splitlines()
    assert not (Path("/tmp") / marker).exists()  # not the host's /tmp
    kept = list((tmp_path / "pods" / "uid-demo" / "sandbox").glob(f"*/tmp/{marker}"))
    assert [p.read_text() for p in kept] == ["inside\n"]


async def test_secrets_of_the_host_are_masked(process_runtime: ProcessRuntime) -> None:
    record = await run(
        process_runtime, "sh", "-c", "wc -c < /etc/shadow; wc -c < /etc/gshadow; ls -A /root"
    )
    lines = (await output(process_runtime, record)).splitlines()
    assert lines[:2] == ["0", "0"]
    # only the way to a kept path (the interpreter the python image runs) shows under /root
    home = Path("/root")
    allowed = {
        Path(k).relative_to(home).parts[0] for k in process_runtime.layout.keep
        if Path(k).is_relative_to(home)
    }  # fmt: skip
    assert set(lines[2:]) <= allowed


async def test_a_masked_directory_is_empty_and_read_only_inside(
    process_runtime: ProcessRuntime,
) -> None:
    # a non-empty host directory the pod would otherwise see (not under /tmp, which is the pod's
    # own), masked like the state dir
    shown = next(
        str(d) for d in (Path("/usr/share/doc"), Path("/usr/share"), Path("/usr/lib"))
        if d.is_dir() and any(d.iterdir())
    )  # fmt: skip
    process_runtime.layout = SandboxLayout(mask_dirs=(shown,), keep=())
    record = await run(
        process_runtime, "sh", "-c", f"ls -A {shown} | wc -l; touch {shown}/x || echo refused"
    )
    lines = (await output(process_runtime, record)).splitlines()
    assert lines[0] == "0" and "refused" in lines


def test_the_state_dirs_are_masked(tmp_path: Path) -> None:
    kubelet_state = tmp_path / "kubelets" / "node-1"
    assert SandboxLayout.for_state_dir(kubelet_state).mask_dirs == ("/root", str(kubelet_state))
    (tmp_path / "kubeconfig").write_text("")  # a `kubelite up` state dir: all of it
    masked = SandboxLayout.for_state_dir(kubelet_state).mask_dirs
    assert masked == ("/root", str(kubelet_state), str(tmp_path))


async def test_volumes_appear_at_their_paths_read_write_or_read_only(
    process_runtime: ProcessRuntime, tmp_path: Path
) -> None:
    data, config = tmp_path / "data", tmp_path / "config"
    data.mkdir()
    config.mkdir()
    (config / "app.conf").write_text("colour=blue\n")
    mounts = (
        Mount(host_path=str(data), container_path="/data"),
        Mount(host_path=str(config), container_path="/etc/app/conf.d", read_only=True),
        Mount(host_path=str(config / "app.conf"), container_path="/tmp/sub/app.conf"),
    )
    script = (
        "echo written > /data/out; cat /etc/app/conf.d/app.conf; cat /tmp/sub/app.conf; "
        "touch /etc/app/conf.d/new || echo ro-refused; touch /etc/app/other || echo etc-refused"
    )
    record = await run(process_runtime, "sh", "-c", script, mounts=mounts)
    lines = (await output(process_runtime, record)).splitlines()
    assert lines[:2] == ["colour=blue", "colour=blue"]
    assert "ro-refused" in lines and "etc-refused" in lines
    assert (data / "out").read_text() == "written\n"
    assert not (config / "new").exists()


async def test_a_missing_working_dir_is_created_inside(process_runtime: ProcessRuntime) -> None:
    record = await run(process_runtime, "sh", "-c", "pwd", working_dir="/opt/app/current")
    assert await output(process_runtime, record) == "/opt/app/current"


async def test_a_volume_missing_on_the_node_is_a_start_error(
    process_runtime: ProcessRuntime, tmp_path: Path
) -> None:
    gone = Mount(host_path=str(tmp_path / "nowhere"), container_path="/data")
    with pytest.raises(ContainerStartError) as info:
        await run(process_runtime, "true", mounts=(gone,))
    assert info.value.record.exit_code == 128
    assert info.value.message.startswith("failed to create the container's sandbox: mount /data")


async def test_exec_runs_inside_with_and_without_a_tty(process_runtime: ProcessRuntime) -> None:
    record = await start(process_runtime, "echo here > /tmp/mark; echo ready; exec sleep 3600")
    await _logged(process_runtime, record, "ready")
    for tty in (False, True):
        session = await process_runtime.exec(
            record.container_id,
            [
                "sh",
                "-c",
                "hostname; cat /tmp/mark; pwd; ps -e -o pid= | wc -l; if test -t 0; then echo tty; fi",
            ],
            tty=tty,
            stdin=False,
        )
        chunks = []
        while (chunk := await session.read_output()) != (0, b""):
            chunks.append(chunk[1])
        assert await session.wait() == 0
        lines = b"".join(chunks).decode().replace("\r\n", "\n").split()
        # the pod's hostname and /tmp; its PID namespace: sleep, sh, ps and wc (and, with a
        # tty, the session-leader prelude's sh)
        assert lines[:4] == ["web-0", "here", "/", "4"]
        assert ("tty" in lines) == tty
    await process_runtime.stop_container(record.container_id, grace_period=0)


async def test_killing_pid_1_takes_every_process_of_the_container(
    process_runtime: ProcessRuntime,
) -> None:
    record = await run(
        process_runtime, "sh", "-c", "setsid sleep 3600 & sleep 3600 & echo ready; wait"
    )
    await _logged(process_runtime, record, "ready")
    assert record.pid is not None
    namespace = os.readlink(f"/proc/{record.pid}/ns/pid")
    members = [pid for pid in _pids() if _pid_namespace(pid) == namespace]
    assert len(members) == 3  # sh, and both sleeps: the one in a session of its own too
    await process_runtime.stop_container(record.container_id, grace_period=0)
    assert [pid for pid in members if process_start_time(pid) is not None] == []


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


async def _logged(rt: ProcessRuntime, record: ContainerRecord, needle: str) -> None:
    """Follow the instance's log until ``needle`` appears."""
    assert record.log_path is not None
    exited = rt.wait_container(record.container_id)
    async with asyncio.timeout(10):
        async for chunk in read_log(record.log_path, LogOptions(follow=True), exited=exited):
            if needle.encode() in chunk:
                return
    raise AssertionError(f"{needle!r} never appeared in {record.log_path}")


async def test_unsandboxed_containers_see_the_host(unsandboxed_runtime: ProcessRuntime) -> None:
    record = await run(unsandboxed_runtime, "sh", "-c", "hostname; echo pid=$$")
    lines = (await output(unsandboxed_runtime, record)).splitlines()
    assert lines[0] == socket.gethostname()
    assert lines[1] != "pid=1"


async def test_a_mount_path_through_a_symlink_is_resolved_inside_the_pod(
    process_runtime: ProcessRuntime, tmp_path: Path
) -> None:
    # /data/link -> /run: in the pod that is the pod's own /run, never the host's
    data, secret = tmp_path / "data", tmp_path / "secret"
    data.mkdir()
    secret.mkdir()
    (secret / "token").write_text("s3cret\n")
    name = f"kubelite-{uuid.uuid4().hex}"
    (data / "link").symlink_to("/run")
    mounts = (
        Mount(host_path=str(data), container_path="/data"),
        Mount(host_path=str(secret), container_path=f"/data/link/{name}", read_only=True),
    )
    record = await run(
        process_runtime, "sh", "-c", f"cat /data/link/{name}/token /run/{name}/token", mounts=mounts
    )
    assert (await output(process_runtime, record)).splitlines() == ["s3cret", "s3cret"]
    assert not (Path("/run") / name).exists()  # the host's /run was never touched


async def test_what_is_kept_shows_through_nested_masks(process_runtime: ProcessRuntime) -> None:
    # as under `kubelite up`: the kubelet's state dir masked inside the masked up state dir,
    # and an image's bin directory inside both kept
    outer, inner = HERE.parent, HERE
    process_runtime.layout = SandboxLayout(mask_dirs=(str(inner), str(outer)), keep=(str(inner),))
    record = await run(process_runtime, "sh", "-c", f"ls -A {outer}; ls {inner} | grep -c py$")
    lines = (await output(process_runtime, record)).splitlines()
    assert lines[0] == inner.name and int(lines[1]) > 0


async def test_killing_a_tty_exec_ends_its_command_inside(process_runtime: ProcessRuntime) -> None:
    record = await start(process_runtime, "echo ready; exec sleep 3600")
    await _logged(process_runtime, record, "ready")
    session = await process_runtime.exec(
        record.container_id,
        ["sh", "-c", "trap '' HUP; echo started; sleep 3601"],  # deaf to its terminal's hang-up
        tty=True,
        stdin=False,
    )
    assert b"started" in (await session.read_output())[1]
    await session.kill()
    check = await process_runtime.exec(
        record.container_id, ["sh", "-c", "ps -e -o args= | grep -c '^sleep 3601' || true"],
        tty=False, stdin=False,
    )  # fmt: skip
    out = b""
    while (chunk := await check.read_output()) != (0, b""):
        out += chunk[1]
    assert out.strip() == b"0"
    await process_runtime.stop_container(record.container_id, grace_period=0)


UNDO = (
    "mount -o remount,rw /etc 2>/dev/null || echo no-remount; "
    "umount /etc/shadow 2>/dev/null || echo no-umount; "
    "mknod /tmp/disk b 8 0 2>/dev/null || echo no-mknod; "
    "grep CapBnd /proc/self/status"
)


async def test_root_in_the_container_cannot_undo_the_sandbox(
    process_runtime: ProcessRuntime,
) -> None:
    record = await start(process_runtime, UNDO + "; exec sleep 3600")
    await _logged(process_runtime, record, "CapBnd")
    assert record.log_path is not None
    started = record.log_path.read_text()
    session = await process_runtime.exec(
        record.container_id, ["sh", "-c", UNDO], tty=False, stdin=False
    )
    execed = b""
    while (chunk := await session.read_output()) != (0, b""):
        execed += chunk[1]
    await session.wait()
    for text in (started, execed.decode()):
        assert "no-remount" in text and "no-umount" in text and "no-mknod" in text
    # the container and an exec into it hold the same capabilities: Docker's default set
    # less mknod (chown ... setfcap, 0xa80425fb less bit 27)
    assert "CapBnd:\t00000000a00425fb" in started and "CapBnd:\t00000000a00425fb" in execed.decode()
    await process_runtime.stop_container(record.container_id, grace_period=0)
