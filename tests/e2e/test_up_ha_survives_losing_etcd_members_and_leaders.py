"""``kubelite up --ha`` (3 etcd members, 3 apiservers behind the front, 2 schedulers and 2
controller-managers) survives its losses, as the real command runs it:

* with writes running through the front, SIGKILL one etcd member, then the leader: every
  acknowledged write is still there, the API keeps answering (more writes are acknowledged
  after each kill), and ``up`` restarts each member, which rejoins (its revision catches up
  with the cluster's);
* during a Deployment rollout on simulated nodes (150 pods asked for, then 300 once the leaders
  are dead), SIGKILL the leading scheduler and the leading controller-manager: other processes
  take the Leases over (a standby, or the killed one restarted by ``up`` with a new identity),
  the rollout finishes, and the Deployment has exactly its 300 pods, each bound, in one
  ReplicaSet.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from api.errors import StatusError
from api.registry import REGISTRY
from client.rest import ApiClient, ApiUnreachable
from kubelite.testing import etcd
from kubelite.testing.waiting import apoll_until
from tests.e2e.cluster import UpProcess
from tests.factories import deployment

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(not etcd.available(), reason="no etcd binary: apt-get install etcd-server"),
]

CONFIG_MAPS = REGISTRY.require("", "ConfigMap")
PODS = REGISTRY.require("", "Pod")
DEPLOYMENTS = REGISTRY.require("apps", "Deployment")
REPLICA_SETS = REGISTRY.require("apps", "ReplicaSet")
LEASES = REGISTRY.require("coordination.k8s.io", "Lease")
REPLICAS = 300
STORE_LINE = re.compile(r"\(store etcd://(?P<endpoints>[^,\s]+(?:,[^,\s]+)*),")


class Up(UpProcess):
    """``kubelite up --ha`` as a subprocess, and what its lines say."""

    def __init__(self, state: Path, log: Path) -> None:
        argv = [
            sys.executable, "-m", "kubelite", "up", "--ha", "--state-dir", str(state),
            "--nodes", "3", "--runtime", "sim", "--etcd-port", "0", "--port", "0",
            "--secure-port", "0", "--scheduler-port", "0", "--controller-manager-port", "0",
            "--proxy-port", "0", "--dns-health-port", "0", "--kubelet-port", "0",
            "--ready-timeout", "300s", "--no-color",
        ]  # fmt: skip
        super().__init__(argv, log)
        self.state = state

    async def start(self) -> None:
        await super().start()
        await self.wait_banner(within=400)

    def etcd_endpoints(self) -> list[str]:
        for line in self.lines:
            if match := STORE_LINE.search(line):
                return match["endpoints"].split(",")
        raise AssertionError("kubelite up did not name its store")

    def child_of_identity(self, identity: str) -> str:
        """The child (``scheduler-2``) whose log campaigned as ``identity``."""
        for line in self.lines:
            if f"as {identity};" in line and "campaigning for lease" in line:
                return line.split("|", 1)[0].strip()
        raise AssertionError(f"no child campaigned as {identity}")

    def health_port(self, child: str) -> int:
        for line in reversed(self.lines):
            if match := re.search(rf"\b{re.escape(child)} +health +http://[^:]+:(\d+)", line):
                return int(match[1])
        raise AssertionError(f"no health endpoint of {child} in the banner")

    async def stop(self) -> None:
        await self.interrupt(within=180)


def _pids_with(argument: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if argument.encode() in argv:
                    found.append(int(entry))
    return found


def _pid_listening_on(port: int) -> int:
    """The process with a listening TCP socket on ``port`` (from /proc/net/tcp)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(f"socket:[{fields[9]}]")
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{entry}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{entry}/fd/{fd}") in inodes:
                            return int(entry)
    raise AssertionError(f"nothing listens on port {port}")


async def _status(endpoint: str) -> dict[str, object] | None:
    """etcd's maintenance status of one member, or None while it is down."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as session:
            async with session.post(f"http://{endpoint}/v3/maintenance/status", json={}) as resp:
                answer: dict[str, object] = await resp.json()
                return answer if resp.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, OSError):
        return None


def _revision(status: dict[str, object]) -> int:
    header = status["header"]
    assert isinstance(header, dict)
    return int(header["revision"])


class Writer:
    """Creates ConfigMaps one after another through the front; remembers the acknowledged."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.acknowledged: list[str] = []
        self.failed = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="e2e writer")

    async def _run(self) -> None:
        for n in range(1_000_000):
            name = f"w-{n}"
            try:
                await self.client.create(
                    CONFIG_MAPS, {"metadata": {"name": name}}, namespace="default"
                )
            except (StatusError, ApiUnreachable):
                self.failed += 1  # not acknowledged: it may or may not exist
                continue
            self.acknowledged.append(name)

    async def more(self, count: int, *, what: str) -> None:
        """Until ``count`` more writes are acknowledged from now."""
        target = len(self.acknowledged) + count

        async def enough() -> bool:
            return len(self.acknowledged) >= target

        await apoll_until(enough, what=what, within=180)

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def _kill_member_and_see_it_rejoin(
    up: Up, writer: Writer, *, index: int, endpoints: list[str]
) -> None:
    member = f"etcd-{index + 1}"
    (pid,) = _pids_with(f"--data-dir={up.state / 'etcd' / member}")
    os.kill(pid, signal.SIGKILL)
    await writer.more(20, what=f"writes acknowledged after {member} was killed")
    others = [e for i, e in enumerate(endpoints) if i != index]

    async def caught_up() -> bool:
        mine = await _status(endpoints[index])
        theirs = [s for s in [await _status(e) for e in others] if s is not None]
        if mine is None or not theirs:
            return False
        return _revision(mine) >= min(_revision(s) for s in theirs) - 50

    # up restarts the member (1 s back-off); it catches up from its peers
    await apoll_until(caught_up, what=f"{member} to rejoin and catch up", within=180)
    restarted = _pids_with(f"--data-dir={up.state / 'etcd' / member}")
    assert restarted and restarted != [pid]


async def _leader_index(endpoints: list[str]) -> int:
    for index, endpoint in enumerate(endpoints):
        status = await _status(endpoint)
        if status is not None:
            header = status["header"]
            assert isinstance(header, dict)
            if str(status.get("leader")) == str(header.get("member_id")):
                return index
    raise AssertionError("no etcd member says it leads")


async def _holder(client: ApiClient, lease: str) -> str:
    got = await client.get(LEASES, lease, namespace="kube-system")
    return str(got["spec"]["holderIdentity"])


async def test_ha_cluster_survives_losing_etcd_members_and_leaders(tmp_path: Path) -> None:
    up = Up(tmp_path / "state", tmp_path / "up.log")
    await up.start()
    try:
        endpoints = up.etcd_endpoints()
        async with ApiClient.from_kubeconfig(str(up.state / "kubeconfig")) as client:
            writer = Writer(client)
            writer.start()
            await writer.more(20, what="writes through the front")
            await _kill_member_and_see_it_rejoin(up, writer, index=1, endpoints=endpoints)
            leader = await _leader_index(endpoints)
            await _kill_member_and_see_it_rejoin(up, writer, index=leader, endpoints=endpoints)
            await writer.stop()
            stored = {
                cm["metadata"]["name"]
                for cm in (await client.list(CONFIG_MAPS, namespace="default"))["items"]
            }
            assert set(writer.acknowledged) <= stored
            assert len(writer.acknowledged) >= 60

            await _rollout_survives_its_leaders(up, client)
    finally:
        await up.stop()


async def _rollout_survives_its_leaders(up: Up, client: ApiClient) -> None:
    # half the replicas first; the other half is asked for once the leaders are dead, so the
    # new leaders must create and bind those pods (a fast machine cannot finish before the kill)
    web = deployment("web", replicas=REPLICAS // 2)
    await client.create(DEPLOYMENTS, web, namespace="default")

    async def bound(count: int) -> bool:
        pods = (await client.list(PODS, namespace="default", label_selector="app=web"))["items"]
        return sum(1 for p in pods if p["spec"].get("nodeName")) >= count

    await apoll_until(lambda: bound(30), what="the rollout to be under way", within=300)
    killed = {}
    for lease in ("kube-scheduler", "kube-controller-manager"):
        holder = await _holder(client, lease)
        child = up.child_of_identity(holder)
        os.kill(_pid_listening_on(up.health_port(child)), signal.SIGKILL)
        killed[lease] = holder
    await client.patch(DEPLOYMENTS, "web", {"spec": {"replicas": REPLICAS}}, namespace="default")

    async def taken_over() -> bool:
        return all([await _holder(client, lease) != old for lease, old in killed.items()])

    await apoll_until(taken_over, what="the standbys to take the Leases", within=120)

    async def finished() -> bool:
        got = await client.get(DEPLOYMENTS, "web", namespace="default")
        status = got.get("status") or {}
        return status.get("readyReplicas") == REPLICAS and status.get("replicas") == REPLICAS

    await apoll_until(finished, what=f"{REPLICAS} ready replicas", within=900)
    pods = (await client.list(PODS, namespace="default", label_selector="app=web"))["items"]
    assert len(pods) == REPLICAS
    assert all(p["spec"].get("nodeName") for p in pods)
    replica_sets = (await client.list(REPLICA_SETS, namespace="default"))["items"]
    assert len([rs for rs in replica_sets if rs["metadata"]["name"].startswith("web-")]) == 1
