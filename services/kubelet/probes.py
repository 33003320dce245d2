"""Container probes: startup, readiness and liveness, by exec, httpGet or tcpSocket.

Why: "Running" only says a process exists; probes say whether it serves (readiness, which gates
the pod's Ready condition) and whether it is stuck (liveness, which restarts it), as in
Kubernetes. One ``ProbeLoop`` task per probe of a running container instance, owned by its pod
worker and cancelled with the instance:

* waits ``initialDelaySeconds``, then probes every ``periodSeconds`` (default 10) with
  ``timeoutSeconds`` (default 1); the result flips after ``successThreshold`` (1) successes or
  ``failureThreshold`` (3) failures in a row, and ``on_change(result)`` is called — the worker
  re-renders the status or, for liveness, restarts the container;
* readiness and liveness wait for the startup probe (if any) to succeed first;
* exec runs the command in the container (exit 0 is success); httpGet succeeds on a 2xx/3xx
  answer (host defaults to the pod IP; a named port is looked up in the container's ports);
  tcpSocket succeeds when a connection opens.

Times are on the event loop's clock. Not provided: gRPC probes, ``terminationGracePeriodSeconds``
on probes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from services.kubelet.runtime.base import Runtime

__all__ = ["ProbeLoop", "run_probe"]

Obj = dict[str, Any]


def _port(value: Any, container: Mapping[str, Any]) -> int:
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return int(value)
    for port in container.get("ports") or []:
        if port.get("name") == value:
            return int(port["containerPort"])
    raise ValueError(f"port {value!r} is not a container port")


async def run_probe(
    probe: Mapping[str, Any],
    *,
    runtime: Runtime,
    container_id: str,
    container: Mapping[str, Any],
    pod_ip: str,
) -> tuple[bool, str]:
    """One probe attempt: (success, what to say about a failure)."""
    timeout = float(probe.get("timeoutSeconds") or 1)
    try:
        async with asyncio.timeout(timeout):
            if "exec" in probe:
                command = list((probe["exec"] or {}).get("command") or [])
                session = await runtime.exec(container_id, command, tty=False, stdin=False)
                output = b""
                try:
                    while (chunk := await session.read_output()) != (0, b""):
                        output += chunk[1]
                    code = await session.wait()
                finally:
                    await session.kill()
                return code == 0, output.decode(errors="replace").strip() or f"exit code {code}"
            if "httpGet" in probe:
                get = probe["httpGet"] or {}
                host = get.get("host") or pod_ip
                scheme = str(get.get("scheme") or "HTTP").lower()
                url = (
                    f"{scheme}://{host}:{_port(get.get('port'), container)}{get.get('path') or '/'}"
                )
                headers = {h["name"]: h["value"] for h in get.get("httpHeaders") or []}
                headers.setdefault("User-Agent", "kube-probe/1.32")
                async with (
                    aiohttp.ClientSession() as http,
                    http.get(url, headers=headers, allow_redirects=False) as resp,
                ):
                    if 200 <= resp.status < 400:
                        return True, ""
                    return False, f"HTTP probe failed with statuscode: {resp.status}"
            if "tcpSocket" in probe:
                sock = probe["tcpSocket"] or {}
                host = sock.get("host") or pod_ip
                port = _port(sock.get("port"), container)
                _, writer = await asyncio.open_connection(host, port)
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()
                return True, ""
    except TimeoutError:
        if "exec" in probe:
            return False, f"command timed out after {timeout:g}s"
        return False, "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    except (OSError, aiohttp.ClientError, ValueError) as exc:
        return False, str(exc)
    return False, "probe has no handler (exec, httpGet or tcpSocket)"


class ProbeLoop:
    """Runs one probe of one container instance until cancelled.

    ``on_result(ok, message, state)`` is called after every attempt: ``ok`` is that attempt's
    outcome, ``state`` the thresholded result (None until a threshold was first reached)."""

    def __init__(
        self,
        *,
        probe: Mapping[str, Any],
        attempt: Callable[[], Awaitable[tuple[bool, str]]],
        on_result: Callable[[bool, str, bool | None], None],
        after: asyncio.Event | None = None,
    ) -> None:
        self.probe = probe
        self.attempt = attempt
        self.on_result = on_result
        self.after = after
        self.state: bool | None = None
        self.succeeded = asyncio.Event()
        """Set on the first thresholded success (the startup probe gates the others with it)."""

    async def run(self) -> None:
        p = self.probe
        period = float(p.get("periodSeconds") or 10)
        success_threshold = int(p.get("successThreshold") or 1)
        failure_threshold = int(p.get("failureThreshold") or 3)
        if self.after is not None:
            await self.after.wait()
        await asyncio.sleep(float(p.get("initialDelaySeconds") or 0))
        successes = failures = 0
        while True:
            ok, message = await self.attempt()
            if ok:
                successes, failures = successes + 1, 0
                if successes >= success_threshold:
                    self.state = True
                    self.succeeded.set()
            else:
                successes, failures = 0, failures + 1
                if failures >= failure_threshold:
                    self.state = False
            self.on_result(ok, message, self.state)
            await asyncio.sleep(period)
