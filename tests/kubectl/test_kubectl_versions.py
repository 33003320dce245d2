"""Every kubectl minor from 1.29 on works unmodified; 1.27/1.28 need OpenAPI v2 (protobuf).

kubectl <= 1.28 validates manifests and explains types from ``/openapi/v2`` in protobuf, which
kubelite does not serve, so ``apply`` without ``--validate=false`` fails there; the PATH
dispatcher never picks them (kubelite reports minor 32).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelite.testing import ComponentProcess
from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


@pytest.mark.parametrize("minor", [29, 30, 31, 32, 33])
def test_kubectl_minor_applies_lists_and_labels(
    minor: int, kubectl_apiserver: ComponentProcess, tmp_path: Path
) -> None:
    kubectl = Kubectl.on(kubectl_apiserver.url, workdir=tmp_path, minor=minor)
    ns = f"minor-{minor}"
    assert kubectl.apply(factories.namespace(ns)).stdout.strip() == f"namespace/{ns} created"
    created = kubectl.apply(factories.sleeper("p", image="busybox:1.36"), "-n", ns)
    assert (created.stdout.strip(), created.stderr) == ("pod/p created", "")
    configured = kubectl.apply(factories.sleeper("p", image="busybox:1.37"), "-n", ns)
    assert (configured.stdout.strip(), configured.stderr) == ("pod/p configured", "")
    rows = kubectl("get", "po", "-o", "wide", "-n", ns).stdout.splitlines()
    assert rows[0].split()[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert rows[1].split()[:3] == ["p", "0/1", "Pending"]
    assert kubectl("label", "po", "p", "k=v", "-n", ns).stdout.strip() == "pod/p labeled"
    assert "rc" in kubectl("api-resources").stdout.split()
