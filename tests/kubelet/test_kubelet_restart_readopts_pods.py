"""``kill -9`` of the kubelet: its pods keep running and a new kubelet takes them back."""

from __future__ import annotations

import pytest

from services.kubelet.runtime.process import process_start_time
from tests import factories
from tests.factories import sh
from tests.kubelet.conftest import Cluster
from tests.kubelet.pods import container_pid, create_and_wait, cstatus, phase
from tests.kubelet.waits import pods_rt, wait_for_object, wait_process_exit

pytestmark = [pytest.mark.e2e]


async def test_restarted_kubelet_readopts_the_same_process(cluster: Cluster) -> None:
    p = await create_and_wait(
        cluster,
        factories.pod(
            "survivor",
            sh("sleep 3600"),
            namespace="default",
            nodeName=cluster.node,
            terminationGracePeriodSeconds=1,  # sleep as PID 1 ignores SIGTERM
        ),
        lambda p: phase(p) == "Running",
    )
    pid = container_pid(cluster, p)
    container_id = cstatus(p)["containerID"]
    started = process_start_time(pid)

    cluster.kubelet.kill()  # SIGKILL: no cleanup of any kind
    assert process_start_time(pid) == started  # the container did not notice
    cluster.kubelet.start()

    # the new kubelet re-adopts: same instance, same restart count; a label change proves it
    # has synced the pod (its worker re-publishes status only if something differs)
    await cluster.client.patch(
        pods_rt(), "survivor", {"metadata": {"labels": {"poke": "1"}}}, namespace="default"
    )
    again = await wait_for_object(
        cluster.client,
        pods_rt(),
        "survivor",
        lambda p: (p or {}).get("metadata", {}).get("labels", {}).get("poke") == "1",
        namespace="default",
    )
    assert again is not None
    assert process_start_time(pid) == started
    assert cstatus(again)["containerID"] == container_id
    assert cstatus(again)["restartCount"] == 0
    assert phase(again) == "Running"

    # and it still manages it: deleting the pod stops that very process
    await cluster.client.delete(pods_rt(), "survivor", namespace="default")
    await wait_for_object(
        cluster.client, pods_rt(), "survivor", lambda p: p is None, namespace="default"
    )
    await wait_process_exit(pid)


async def test_pod_deleted_while_kubelet_was_down_is_killed_on_return(cluster: Cluster) -> None:
    p = await create_and_wait(
        cluster,
        factories.pod("orphan", sh("sleep 3600"), namespace="default", nodeName=cluster.node),
        lambda p: phase(p) == "Running",
    )
    pid = container_pid(cluster, p)
    cluster.kubelet.kill()
    # force delete, as `kubectl delete --grace-period=0 --force` does: gone from the API at once
    await cluster.client.delete(pods_rt(), "orphan", namespace="default", grace_period_seconds=0)
    await wait_for_object(
        cluster.client, pods_rt(), "orphan", lambda p: p is None, namespace="default"
    )
    assert process_start_time(pid) is not None  # nobody has killed it yet

    cluster.kubelet.start()
    await wait_process_exit(pid)
