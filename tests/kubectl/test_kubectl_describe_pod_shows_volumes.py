"""``kubectl describe pod`` shows a pod's volumes and each container's mounts, as Kubernetes'."""

from __future__ import annotations

import re

import pytest

from tests import factories
from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl


def test_describe_pod_lists_volumes_and_mounts(kubectl: Kubectl) -> None:
    kubectl.apply(factories.namespace("mounting"))
    container = factories.sh("sleep 3600") | {
        "volumeMounts": [
            {"name": "cfg", "mountPath": "/etc/config", "readOnly": True},
            {"name": "scratch", "mountPath": "/scratch"},
            {"name": "data", "mountPath": "/data", "subPath": "app"},
        ]
    }
    pod = factories.pod(
        "mounted",
        container,
        volumes=[
            {"name": "cfg", "configMap": {"name": "app-config", "optional": True}},
            {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "app-data"}},
        ],
    )
    kubectl.apply(pod, "-n", "mounting")

    out = kubectl("describe", "pod", "mounted", "-n", "mounting").stdout
    mounts = out.split("Mounts:", 1)[1].split("Conditions:", 1)[0]
    assert re.search(r"/etc/config from cfg \(ro\)", mounts)
    assert re.search(r"/scratch from scratch \(rw\)", mounts)
    assert re.search(r"/data from data \(rw,path=\"app\"\)", mounts)
    volumes = out.split("Volumes:", 1)[1]
    assert re.search(
        r"cfg:\s+Type:\s+ConfigMap .*\n\s+Name:\s+app-config\n\s+Optional:\s+true", volumes
    )
    assert re.search(
        r"scratch:\s+Type:\s+EmptyDir .*\n\s+Medium:\s+Memory\n\s+SizeLimit:\s+64Mi", volumes
    )
    assert re.search(r"data:\s+Type:\s+PersistentVolumeClaim .*\n\s+ClaimName:\s+app-data", volumes)
