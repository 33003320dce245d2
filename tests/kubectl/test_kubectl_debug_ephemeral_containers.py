"""``kubectl debug -it POD`` gets a clean answer: kubelite serves no ephemeral containers.

kubelite's kubelets do not run ephemeral containers, so the apiserver answers
``pods/ephemeralcontainers`` exactly as a cluster with the feature off does: a 404 whose Status
carries ``"details": {}``. kubectl 1.32 reads ``details.name`` of that 404 to tell "feature off"
from "no such pod"; without ``details`` it panicked with a nil pointer dereference.
"""

from __future__ import annotations

import pytest

from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def test_debug_says_ephemeral_containers_are_disabled(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "debug-ephemeral")
    kubectl("run", "target", "--image=nginx", "-n", "debug-ephemeral")
    done = kubectl(
        "debug", "-it", "target", "--image=busybox", "-n", "debug-ephemeral", check=False
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "panic" not in done.stderr and "nil pointer" not in done.stderr, done.stderr
    assert (
        'error: ephemeral containers are disabled for this cluster (error from server: "the '
        'server could not find the requested resource")'
    ) in done.stderr, done.stderr


def test_debug_of_a_missing_pod_says_not_found(kubectl: Kubectl) -> None:
    done = kubectl("debug", "-it", "ghost", "--image=busybox", check=False)
    assert done.returncode == 1
    assert 'pods "ghost" not found' in done.stderr, done.stderr
