"""The e2e rows turn each process's share of a core over the run into CPU milliseconds per pod."""

import pytest

from bench import e2e


def test_cpu_share_over_the_run_becomes_milliseconds_per_pod() -> None:
    measured = {"all Running": 20.0, "pods/s": 50.0, "cpu apiserver": 50.0, "cpu kubelet-0": 10.0}
    per_pod = e2e.cpu_per_pod(measured, pods=1000)
    # half a core for 20 s is 10 CPU seconds: 10 ms for each of 1,000 pods
    assert per_pod == {
        "cpu per pod apiserver": pytest.approx(10.0),
        "cpu per pod kubelet-0": pytest.approx(2.0),
    }
