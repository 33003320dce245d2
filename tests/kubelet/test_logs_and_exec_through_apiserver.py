"""``pods/{name}/log`` and ``pods/{name}/exec`` reach the kubelet through the apiserver's proxy."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import time
from typing import Any

import aiohttp
import pytest

from tests import factories
from tests.factories import sh
from tests.kubelet.conftest import Cluster
from tests.kubelet.pods import create_and_wait, follow_log_until, phase

pytestmark = [pytest.mark.e2e]

V5 = "v5.channel.k8s.io"


async def exec_ws(
    c: Cluster, name: str, command: list[str], *, stdin: bytes | None = None, tty: bool = False
) -> tuple[bytes, bytes, dict[str, Any]]:
    """Run an exec as kubectl does; (stdout, stderr, the Status from channel 3)."""
    params: list[tuple[str, str]] = [("command", part) for part in command]
    params += [("stdout", "true"), ("tty", "true" if tty else "false")]
    if not tty:
        params.append(("stderr", "true"))
    if stdin is not None:
        params.append(("stdin", "true"))
    url = f"{c.server}/api/v1/namespaces/default/pods/{name}/exec"
    out, err, status = b"", b"", {}
    async with aiohttp.ClientSession() as session, asyncio.timeout(30):
        async with session.ws_connect(url, params=params, protocols=[V5]) as ws:
            assert ws.protocol == V5
            await ws.send_bytes(b"\x04" + json.dumps({"Width": 80, "Height": 24}).encode())
            if stdin is not None:
                await ws.send_bytes(b"\x00" + stdin)
                if not tty:
                    await ws.send_bytes(bytes([255, 0]))
            async for msg in ws:
                assert msg.type == aiohttp.WSMsgType.BINARY
                channel, payload = msg.data[0], msg.data[1:]
                if channel == 1:
                    out += payload
                elif channel == 2:
                    err += payload
                elif channel == 3:
                    status = json.loads(payload)
    return out, err, status


@pytest.fixture
async def running(cluster: Cluster) -> Cluster:
    await create_and_wait(
        cluster,
        factories.pod(
            "shell",
            sh("for i in 1 2 3; do echo line $i; done; sleep 3600"),
            namespace="default",
            nodeName=cluster.node,
        ),
        lambda p: phase(p) == "Running",
    )
    await follow_log_until(cluster, "shell", "line 3")
    return cluster


async def test_exec_relays_output_and_the_exit_code(running: Cluster) -> None:
    out, err, status = await exec_ws(
        running, "shell", ["sh", "-c", "echo out; echo err >&2; echo $POD_NAME; exit 3"]
    )
    assert out == b"out\nshell\n" and err == b"err\n"
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]


async def test_exec_feeds_stdin_until_it_is_closed(running: Cluster) -> None:
    out, _, status = await exec_ws(running, "shell", ["cat"], stdin=b"one\ntwo\n")
    assert out == b"one\ntwo\n"
    assert status == {"metadata": {}, "status": "Success"}


def official_client_exec_cat(server: str, name: str) -> tuple[str, str]:
    """The official client's ``stream()``: ``str`` stdin goes out as WebSocket TEXT frames."""
    from kubernetes import client
    from kubernetes.stream import stream

    config = client.Configuration(host=server)
    with client.ApiClient(config) as api_client:
        api = client.CoreV1Api(api_client)
        resp = stream(
            api.connect_get_namespaced_pod_exec,
            name,
            "default",
            command=["cat"],
            stdin=True,
            stdout=True,
            stderr=True,
            tty=False,
            _preload_content=False,
        )
        try:
            resp.write_stdin("hello\n")
            out = ""
            deadline = time.monotonic() + 30
            while "hello\n" not in out and resp.is_open() and time.monotonic() < deadline:
                resp.update(timeout=max(deadline - time.monotonic(), 0))
                out += resp.read_stdout()
            return out, resp.subprotocol or ""
        finally:
            resp.close()


async def test_the_official_client_writes_stdin_as_text_frames(running: Cluster) -> None:
    out, protocol = await asyncio.to_thread(official_client_exec_cat, running.server, "shell")
    assert protocol in ("v4.channel.k8s.io", "v5.channel.k8s.io")
    assert out == "hello\n"


def _encode(protocol: str, channel: int, data: bytes) -> str:
    """A client TEXT frame of ``protocol``."""
    if "base64" in protocol:
        return chr(ord("0") + channel) + base64.b64encode(data).decode()
    return chr(channel) + data.decode()


@pytest.mark.parametrize(
    "protocol",
    [
        "v5.channel.k8s.io",
        "v4.channel.k8s.io",
        "v4.base64.channel.k8s.io",
        "channel.k8s.io",
        "base64.channel.k8s.io",
    ],
)
async def test_every_channel_protocol_reads_text_frames(running: Cluster, protocol: str) -> None:
    """stdin as TEXT frames reaches the command; output and the error stream come back as the
    protocol words them (base64 variants: TEXT frames; v4/v5: a Status; older: text on failure)."""
    url = f"{running.server}/api/v1/namespaces/default/pods/shell/exec"
    params = [("command", "sh"), ("command", "-c"), ("command", "head -n 1; exit 7")]
    params += [("stdin", "true"), ("stdout", "true"), ("stderr", "true")]
    frames: dict[int, bytes] = {}
    async with aiohttp.ClientSession() as session, asyncio.timeout(30):
        async with session.ws_connect(url, params=params, protocols=[protocol]) as ws:
            assert ws.protocol == protocol
            await ws.send_str(_encode(protocol, 0, b"one\ntwo\n"))
            async for msg in ws:
                if "base64" in protocol:
                    assert msg.type == aiohttp.WSMsgType.TEXT
                    channel, data = ord(msg.data[0]) - ord("0"), base64.b64decode(msg.data[1:])
                else:
                    assert msg.type == aiohttp.WSMsgType.BINARY
                    channel, data = msg.data[0], msg.data[1:]
                frames[channel] = frames.get(channel, b"") + data
    assert frames[1] == b"one\n"
    if protocol.startswith(("v4.", "v5.")):
        status = json.loads(frames[3])
        assert status["reason"] == "NonZeroExitCode"
        assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "7"}]
    else:
        assert frames[3].decode().startswith("command terminated with non-zero exit code")


async def test_exec_with_a_tty_is_an_interactive_shell(running: Cluster) -> None:
    out, err, status = await exec_ws(
        running, "shell", ["sh"], stdin=b"echo $((6 * 7))\nexit 5\n", tty=True
    )
    assert b"42" in out and err == b""
    assert status["details"]["causes"][0]["message"] == "5"


async def test_log_query_parameters_reach_the_kubelet(running: Cluster) -> None:
    url = f"{running.server}/api/v1/namespaces/default/pods/shell/log"
    async with aiohttp.ClientSession() as session:
        async with session.get(url, params={"tailLines": "1", "timestamps": "true"}) as resp:
            assert resp.status == 200
            text = await resp.text()
        assert text.endswith(" line 3\n") and text.count("\n") == 1
        assert text.split(" ", 1)[0].endswith("Z")
        async with session.get(url, params={"limitBytes": "4"}) as resp:
            assert await resp.text() == "line"
        async with session.get(url, params={"container": "nope"}) as resp:
            assert resp.status == 400
            assert (await resp.json())["message"] == "container nope is not valid for pod shell"
        async with session.get(url, params={"previous": "true"}) as resp:
            assert resp.status == 400
            body = await resp.json()
            assert (
                body["message"] == 'previous terminated container "main" in pod "shell" not found'
            )


async def test_a_pod_with_two_containers_needs_a_container_name(cluster: Cluster) -> None:
    await create_and_wait(
        cluster,
        factories.pod(
            "pair",
            sh("sleep 3600", name="a"),
            sh("sleep 3600", name="b"),
            namespace="default",
            nodeName=cluster.node,
        ),
        lambda p: phase(p) == "Running",
    )
    url = f"{cluster.server}/api/v1/namespaces/default/pods/pair/log"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 400
        message = (await resp.json())["message"]
        assert message == "a container name must be specified for pod pair, choose one of: [a b]"


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
async def test_kubectl_logs_and_exec(running: Cluster, tmp_path: Any) -> None:
    async def kubectl(*args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            f"--server={running.server}",
            f"--cache-dir={tmp_path / 'kube-cache'}",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={"KUBECONFIG": "/dev/null", "PATH": "/usr/local/bin:/usr/bin:/bin"},
        )
        out, _ = await proc.communicate()
        return proc.returncode or 0, out.decode()

    code, out = await kubectl("logs", "shell")
    assert code == 0 and out == "line 1\nline 2\nline 3\n"
    code, out = await kubectl("exec", "shell", "--", "sh", "-c", "echo in-pod; exit 4")
    assert code == 4, out
    assert "in-pod" in out
