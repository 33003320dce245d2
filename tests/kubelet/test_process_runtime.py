"""The process runtime against real OS processes: logs, exit codes, stop, re-adoption, no orphans."""

from __future__ import annotations

import asyncio
import os
from importlib.metadata import version
from pathlib import Path

import aiohttp
import pytest

from kubelite.testing.waiting import apoll_until
from services.kubelet.logs import LogOptions, read_log
from services.kubelet.runtime.base import (
    ContainerConfig,
    ContainerRecord,
    ContainerStartError,
    ImagePullError,
)
from services.kubelet.runtime.images import ImageCatalog, ImageStore
from services.kubelet.runtime.process import ProcessRuntime, expand_vars, process_start_time
from tests.kubelet.conftest import run, sandbox


def alive(pid: int | None) -> bool:
    return pid is not None and process_start_time(pid) is not None


async def test_output_lands_in_a_cri_format_log_per_instance(
    process_runtime: ProcessRuntime,
) -> None:
    record = await run(process_runtime, "sh", "-c", "echo hello; echo oops >&2; printf tail")
    done = await process_runtime.wait_container(record.container_id)
    assert (done.exit_code, done.reason) == (0, "Completed")
    assert done.log_path is not None
    lines = done.log_path.read_text().splitlines()
    streams = [
        (line.split(" ", 3)[1], line.split(" ", 3)[2], line.split(" ", 3)[3]) for line in lines
    ]
    assert ("stdout", "F", "hello") in streams
    assert ("stderr", "F", "oops") in streams
    assert ("stdout", "P", "tail") in streams
    assert lines[0].split(" ")[0].endswith("Z")


async def test_env_includes_pod_identity_and_expanded_vars(process_runtime: ProcessRuntime) -> None:
    record = await run(
        process_runtime,
        "sh",
        "-c",
        "echo $POD_NAME $POD_NAMESPACE $POD_IP $HOSTNAME $(GREETING)",
        env={"GREETING": "hi-$(POD_NAME)"},
    )
    done = await process_runtime.wait_container(record.container_id)
    assert done.log_path is not None
    ip = process_runtime.pod_ip("uid-demo")
    assert done.log_path.read_text().split(" F ", 1)[1].strip() == f"demo default {ip} demo hi-demo"


def test_var_expansion_follows_kubernetes_rules() -> None:
    env = {"A": "1"}
    assert expand_vars("$(A)-$(B)-$$(A)", env) == "1-$(B)-$(A)"


async def test_nonzero_exit_is_an_error_with_its_code(process_runtime: ProcessRuntime) -> None:
    record = await run(process_runtime, "sh", "-c", "exit 3")
    done = await process_runtime.wait_container(record.container_id)
    assert (done.exit_code, done.reason) == (3, "Error")


async def test_missing_command_is_a_start_error(process_runtime: ProcessRuntime) -> None:
    with pytest.raises(ContainerStartError) as info:
        await run(process_runtime, "no-such-program")
    assert info.value.record.exit_code == 128
    assert info.value.record.reason == "StartError"
    assert 'exec: "no-such-program": executable file not found in $PATH' in info.value.message


async def test_stop_sends_sigterm_then_sigkill_after_grace(process_runtime: ProcessRuntime) -> None:
    assert process_runtime.sandboxed
    polite = await run(
        process_runtime, "sh", "-c", "trap 'exit 143' TERM; sleep 3600 & wait", name="polite"
    )
    # PID 1 of its namespace without a TERM handler: the kernel drops the SIGTERM
    stubborn = await run(process_runtime, "sleep", "3600", name="stubborn")
    assert alive(polite.pid) and alive(stubborn.pid)
    done = await process_runtime.stop_container(polite.container_id, grace_period=10)
    assert done.exit_code == 143  # its TERM handler exited
    done = await process_runtime.stop_container(stubborn.container_id, grace_period=0.3)
    assert (done.exit_code, done.signal) == (137, 9)  # SIGKILL after the grace period
    assert not alive(polite.pid) and not alive(stubborn.pid)


async def test_unsandboxed_stop_signals_the_process_group(
    unsandboxed_runtime: ProcessRuntime,
) -> None:
    assert not unsandboxed_runtime.sandboxed
    assert unsandboxed_runtime.sandbox_unavailable_reason == "the kubelet runs with --sandbox=off"
    polite = await run(unsandboxed_runtime, "sh", "-c", "sleep 3600", name="polite")
    stubborn = await run(
        unsandboxed_runtime, "sh", "-c", "trap '' TERM; sleep 3600 & wait", name="stubborn"
    )
    assert alive(polite.pid) and alive(stubborn.pid)
    done = await unsandboxed_runtime.stop_container(polite.container_id, grace_period=10)
    assert done.exit_code == 143  # killed by SIGTERM
    done = await unsandboxed_runtime.stop_container(stubborn.container_id, grace_period=0.3)
    assert done.exit_code == 137  # SIGTERM ignored, SIGKILL after the grace period
    assert not alive(polite.pid) and not alive(stubborn.pid)


async def test_removing_a_pod_leaves_no_process_behind(process_runtime: ProcessRuntime) -> None:
    record = await run(process_runtime, "sh", "-c", "sleep 3600 & sleep 3600 & wait")
    assert record.pid is not None

    async def group() -> list[int]:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == record.pid]
        return pids if len(pids) >= 3 else []

    # the shell forks its two sleeps after it started: on a busy machine, some time after
    children = await apoll_until(group, what="the shell and its two sleeps in the pod's group")
    await process_runtime.remove_pod_sandbox("uid-demo")
    assert not [pid for pid in children if alive(pid)]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


async def test_a_new_runtime_readopts_running_and_finished_instances(
    process_runtime: ProcessRuntime, tmp_path: Path
) -> None:
    running = await run(process_runtime, "sh", "-c", "sleep 3600", name="runner")
    finished = await run(process_runtime, "sh", "-c", "exit 7", name="quitter")
    await process_runtime.wait_container(finished.container_id)
    await process_runtime.close()  # the "old kubelet" goes away; its containers do not

    again = ProcessRuntime(
        state_dir=tmp_path,
        pod_cidr="127.201.0.0/16",
        images=ImageStore(catalog=ImageCatalog(), state_dir=tmp_path),
    )
    await again.start()
    try:
        by_name = {r.name: r for r in again.list_containers("uid-demo")}
        assert by_name["runner"].running and by_name["runner"].pid == running.pid
        assert by_name["quitter"].exit_code == 7
        assert again.pod_ip("uid-demo") == process_runtime.pod_ip("uid-demo")
        # an exit after re-adoption is still seen, with its real status
        os.kill(running.pid or 0, 9)
        done = await asyncio.wait_for(again.wait_container(running.container_id), 10)
        assert (done.exit_code, done.reason) == (137, "Error")
    finally:
        for uid in again.list_pod_uids():
            await again.remove_pod_sandbox(uid)
        await again.close()


async def test_unknown_image_fails_like_a_failed_pull(process_runtime: ProcessRuntime) -> None:
    with pytest.raises(ImagePullError) as info:
        await process_runtime.pull_image("no-such-image:1.0", policy="IfNotPresent")
    assert info.value.reason == "ErrImagePull"
    assert "no-such-image" in info.value.message
    with pytest.raises(ImagePullError) as info:
        await process_runtime.pull_image("nginx:1.25", policy="Never")
    assert info.value.reason == "ErrImageNeverPull"
    assert (
        info.value.message
        == 'Container image "nginx:1.25" is not present with pull policy of Never'
    )


async def test_nginx_image_serves_the_welcome_page_on_the_pod_ip(
    process_runtime: ProcessRuntime,
) -> None:
    ref, _ = await process_runtime.pull_image("nginx:1.25", policy="IfNotPresent")
    record = await process_runtime.start_container(
        sandbox(), ContainerConfig(name="web", image="nginx:1.25", ports=(80,)), image=ref
    )
    ip = process_runtime.pod_ip("uid-demo")
    assert record.log_path is not None
    await _wait_for_line(process_runtime, record, "start worker processes")
    async with aiohttp.ClientSession() as session, session.get(f"http://{ip}:80/") as resp:
        assert resp.status == 200
        assert resp.headers["Server"] == f"kubelite-webserver/{version('kubelite')}"
        assert "Welcome to nginx!" in await resp.text()
    done = await process_runtime.stop_container(record.container_id, grace_period=10)
    assert done.exit_code == 0


async def test_python_image_runs_the_host_python(process_runtime: ProcessRuntime) -> None:
    record = await run(process_runtime, "python", "-c", "print(6 * 7)", image="python:3.12")
    done = await process_runtime.wait_container(record.container_id)
    assert done.exit_code == 0 and done.log_path is not None
    assert done.log_path.read_text().rstrip().endswith(" F 42")


async def _wait_for_line(rt: ProcessRuntime, record: ContainerRecord, needle: str) -> None:
    """Follow the instance's log until ``needle`` appears (the shim appends as output arrives)."""
    exited = rt.wait_container(record.container_id)
    async with asyncio.timeout(10):
        async for chunk in read_log(record.log_path, LogOptions(follow=True), exited=exited):
            if needle.encode() in chunk:
                return
    raise AssertionError(f"{needle!r} never appeared in {record.log_path}")


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "unsandboxed"])
async def test_a_container_over_its_memory_limit_is_oomkilled(
    process_runtime: ProcessRuntime, unsandboxed_runtime: ProcessRuntime, sandboxed: bool
) -> None:
    rt = process_runtime if sandboxed else unsandboxed_runtime
    hog = "import time\nheap = []\nwhile True:\n    heap.append(b'x' * (1 << 20))\n    time.sleep(0.001)"
    record = await run(rt, "python", "-c", hog, image="python:3.12", memory_limit_bytes=50 << 20)
    done = await asyncio.wait_for(rt.wait_container(record.container_id), 30)
    assert (done.exit_code, done.signal, done.reason) == (137, 9, "OOMKilled")


async def test_a_container_under_its_memory_limit_keeps_running(
    process_runtime: ProcessRuntime,
) -> None:
    modest = "heap = b'x' * (10 << 20); print('holding', flush=True); import time; time.sleep(3600)"
    record = await run(
        process_runtime, "python", "-c", modest, image="python:3.12", memory_limit_bytes=200 << 20
    )
    await _wait_for_line(process_runtime, record, "holding")
    assert process_runtime.list_containers("uid-demo")[0].running
    done = await process_runtime.stop_container(record.container_id, grace_period=0)
    assert done.reason == "Error"  # stopped, not OOMKilled
