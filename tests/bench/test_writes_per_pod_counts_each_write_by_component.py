"""``bench.writes_per_pod`` counts, from a real cluster's audit log, each pod's create (by the
controller-manager), binding and Scheduled event (by the scheduler) and status write (by the
kubelet) — counts only, nothing timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.writes_per_pod import WriteKey, measure, render_table


@pytest.mark.e2e  # an apiserver, scheduler, controller-manager and kubelet as processes
async def test_an_rc_of_four_pods_costs_one_create_and_one_binding_each(tmp_path: Path) -> None:
    done, refused, _ = await measure(tmp_path, pods=4, nodes=2)

    assert done[WriteKey("pods", "create", "controller-manager")] == 4
    assert done[WriteKey("pods/binding", "create", "scheduler")] == 4
    assert done[WriteKey("events", "create", "scheduler", "Scheduled")] == 4
    assert done[WriteKey("pods/status", "update", "kubelet")] >= 4
    assert done[WriteKey("replicationcontrollers", "create", "bench")] == 1
    table = render_table(done, refused, pods=4, nodes=2)
    assert "pods/binding create (scheduler)" in table
    assert "all pod-related writes" in table
