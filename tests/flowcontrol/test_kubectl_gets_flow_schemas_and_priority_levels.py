"""The real ``kubectl`` lists the default FlowSchemas and PriorityLevelConfigurations with
Kubernetes' columns, and a schema pointing at a missing level shows ``MissingPL True`` once the
apiserver has set its ``Dangling`` condition (the default ones read ``False``)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kubelite.testing.waiting import poll_until
from tests.conftest import StartApiServer

pytestmark = pytest.mark.kubectl


def kubectl(server: str, cache: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", "-s", server, f"--cache-dir={cache}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def rows(output: str) -> dict[str, list[str]]:
    """``kubectl get`` output by name (cells are separated by 2+ spaces), the header as ``NAME``."""
    lines = [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]
    return {line[0]: line for line in lines}


def test_kubectl_lists_the_defaults_with_kubernetes_columns(
    apiserver_process: StartApiServer, tmp_path: Path
) -> None:
    server = apiserver_process(store="memory://").url
    levels = rows(kubectl(server, tmp_path, "get", "prioritylevelconfigurations"))
    assert levels["NAME"] == [
        "NAME", "TYPE", "NOMINALCONCURRENCYSHARES", "QUEUES", "HANDSIZE", "QUEUELENGTHLIMIT", "AGE"
    ]  # fmt: skip
    assert levels["exempt"][1:6] == ["Exempt", "<none>", "<none>", "<none>", "<none>"]
    assert levels["catch-all"][1:6] == ["Limited", "5", "<none>", "<none>", "<none>"]
    assert levels["node-high"][1:6] == ["Limited", "40", "64", "6", "50"]
    assert levels["workload-low"][1:6] == ["Limited", "100", "128", "6", "50"]
    assert set(levels) - {"NAME"} == {
        "exempt", "catch-all", "system", "node-high", "leader-election", "workload-high",
        "workload-low", "global-default",
    }  # fmt: skip

    orphan: dict[str, Any] = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": "orphan"},
        "spec": {
            "priorityLevelConfiguration": {"name": "nowhere"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": "bob"}}],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/version"]}],
                }
            ],
        },
    }
    kubectl(server, tmp_path, "apply", "-f", "-", stdin=json.dumps(orphan))

    def schemas() -> dict[str, list[str]] | None:
        got = rows(kubectl(server, tmp_path, "get", "flowschemas"))
        return got if got.get("orphan", [""])[-1] == "True" else None

    got = poll_until(schemas, what="the orphan schema marked Dangling")
    assert got["NAME"] == [
        "NAME", "PRIORITYLEVEL", "MATCHINGPRECEDENCE", "DISTINGUISHERMETHOD", "AGE", "MISSINGPL"
    ]  # fmt: skip
    assert got["orphan"][1:4] == ["nowhere", "1000", "*"]
    assert got["exempt"][1:4] == ["exempt", "1", "*"] and got["exempt"][5] == "False"
    assert got["system-node-high"][1:4] == ["node-high", "400", "ByUser"]
    assert got["kube-scheduler"][1:4] == ["workload-high", "800", "ByNamespace"]
    assert got["catch-all"][1:4] == ["catch-all", "10000", "ByUser"]
