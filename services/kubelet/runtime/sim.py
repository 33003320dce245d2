"""The ``sim`` runtime: containers that exist only as records, for scale tests (what kwok does).

Every image "pulls" at once, every container is Running ``start_delay`` seconds after it is
started (on the event loop's clock, so virtual time drives tests) and keeps running until it is
stopped, when it ends with exit code 143 (as a process ended by SIGTERM). A container whose env
sets ``KUBELITE_SIM_EXIT_CODE`` ends by itself with that code (0 is ``Completed``, anything else
``Error``) after ``KUBELITE_SIM_RUN_SECONDS`` (default 0): how tests and benchmarks make pods run
to completion or fail without processes. Pod IPs still come from a per-node loopback range so
``podIP`` looks right, but nothing binds them. No logs (empty), exec runs nothing and exits 0.

Cheap by design: a record and a future per container, no tasks, no files — one kubelet process
can host thousands of nodes each with its own ``SimRuntime``.

Not kept across restarts: a restarted sim kubelet forgets its containers and starts them again.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time

from services.kubelet.runtime.base import ContainerConfig, ContainerRecord, ImageRef, PodSandbox
from services.kubelet.runtime.images import normalize_image
from services.kubelet.runtime.ipam import PodIPAllocator

__all__ = ["SimExecSession", "SimRuntime"]

VERSION = "0.1.0"

EXIT_CODE_ENV = "KUBELITE_SIM_EXIT_CODE"
"""A container with this env var ends by itself with this exit code."""
RUN_SECONDS_ENV = "KUBELITE_SIM_RUN_SECONDS"
"""How long such a container runs first (seconds, default 0)."""
STOPPED_EXIT_CODE = 143
"""What a stopped container reports: a process that died of SIGTERM."""


class SimExecSession:
    """An exec that produces no output and exits 0."""

    async def write_stdin(self, data: bytes) -> None:
        return None

    async def close_stdin(self) -> None:
        return None

    async def read_output(self) -> tuple[int, bytes]:
        return (0, b"")

    def resize(self, *, width: int, height: int) -> None:
        return None

    async def wait(self) -> int:
        return 0

    async def kill(self) -> None:
        return None


class SimRuntime:
    """Implements ``runtime.base.Runtime`` without processes."""

    name = "sim"
    version = f"sim://{VERSION}"
    sandboxed = False
    sandbox_unavailable_reason: str | None = None
    """Nothing runs, so there is nothing to sandbox and nothing to warn a pod about."""

    def __init__(self, *, pod_cidr: str, start_delay: float = 0.0) -> None:
        self.ipam = PodIPAllocator(pod_cidr)
        self.start_delay = start_delay
        self._pods: set[str] = set()
        self._present: set[str] = set()
        self._records: dict[str, ContainerRecord] = {}
        self._exited: dict[str, asyncio.Future[ContainerRecord]] = {}

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def run_pod_sandbox(self, sandbox: PodSandbox) -> str:
        self._pods.add(sandbox.uid)
        return self.ipam.allocate(sandbox.uid)

    async def remove_pod_sandbox(self, pod_uid: str) -> None:
        for cid in [c for c, r in self._records.items() if r.pod_uid == pod_uid]:
            await self.stop_container(cid, grace_period=0)
            del self._records[cid]
            del self._exited[cid]
        self.ipam.release(pod_uid)
        self._pods.discard(pod_uid)

    def pod_ip(self, pod_uid: str) -> str | None:
        return self.ipam.get(pod_uid)

    def list_pod_uids(self) -> list[str]:
        return list(self._pods)

    def list_containers(self, pod_uid: str | None = None) -> list[ContainerRecord]:
        records = [r for r in self._records.values() if pod_uid is None or r.pod_uid == pod_uid]
        return sorted(records, key=lambda r: (r.pod_uid, r.name, r.attempt))

    async def pull_image(self, image: str, *, policy: str) -> tuple[ImageRef, bool]:
        ref = normalize_image(image)
        present = ref in self._present
        self._present.add(ref)
        digest = hashlib.sha256(ref.encode()).hexdigest()
        return (
            ImageRef(image=image, image_id=f"{ref.rsplit(':', 1)[0]}@sha256:{digest}"),
            present and policy != "Always",
        )

    async def start_container(
        self, sandbox: PodSandbox, config: ContainerConfig, *, image: ImageRef
    ) -> ContainerRecord:
        await self.run_pod_sandbox(sandbox)
        if self.start_delay > 0:
            await asyncio.sleep(self.start_delay)
        record = ContainerRecord(
            container_id=f"{self.name}://{secrets.token_hex(32)}",
            pod_uid=sandbox.uid,
            name=config.name,
            attempt=config.attempt,
            image=config.image,
            image_id=image.image_id,
            started_at=time.time(),
            spec_hash=config.spec_hash,
        )
        self._records[record.container_id] = record
        loop = asyncio.get_running_loop()
        self._exited[record.container_id] = loop.create_future()
        exit_code = config.env.get(EXIT_CODE_ENV)
        if exit_code is not None:
            run_for = float(config.env.get(RUN_SECONDS_ENV) or 0)
            loop.call_later(run_for, self._end, record.container_id, int(exit_code))
        return record

    def _end(self, container_id: str, exit_code: int) -> None:
        record, done = self._records.get(container_id), self._exited.get(container_id)
        if record is None or done is None or done.done():
            return
        record.finished_at = time.time()
        record.exit_code = exit_code
        record.reason = "Completed" if exit_code == 0 else "Error"
        done.set_result(record)

    async def wait_container(self, container_id: str) -> ContainerRecord:
        return await asyncio.shield(self._exited[container_id])

    async def stop_container(self, container_id: str, *, grace_period: float) -> ContainerRecord:
        self._end(container_id, STOPPED_EXIT_CODE)
        return self._records[container_id]

    async def exec(
        self, container_id: str, command: list[str], *, tty: bool, stdin: bool
    ) -> SimExecSession:
        if container_id not in self._records:
            raise KeyError(container_id)
        return SimExecSession()
