"""The audit log of a real apiserver: audit.k8s.io/v1 Events, one JSON line each, as the policy says.

What is pinned: every request a rule matches is logged (a 404 with its Status message, kubectl's
creates, a watch with ResponseStarted and ResponseComplete), each line validates as an
``api.audit.Event``; ``Audit-Id`` on the response is the event's ``auditID`` (and a client's own
``Audit-ID`` is kept); the policy's ``omitStages`` and a ``level: None`` rule leave lines out;
a Secret is logged at Metadata under a RequestResponse rule, its value nowhere in the log, while a
ConfigMap carries its request and response objects; lines are flushed while the server runs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from api.audit import Event
from kubelite.testing import ComponentProcess, Processes
from kubelite.testing.waiting import apoll_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/api", "/apis*", "/openapi*"]
- level: None
  resources: [{group: "", resources: [namespaces]}]
  verbs: [get]
- level: RequestResponse
"""


def kubectl(server: ComponentProcess, *args: str) -> str:
    done = subprocess.run(
        ["kubectl", "-s", server.url, "--cache-dir", str(server.state_dir / "kcache"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            resp.read()
            return resp.status, resp.headers["Audit-Id"]
    except urllib.error.HTTPError as err:
        err.read()
        return err.code, err.headers["Audit-Id"]


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def audited(kubelite_processes: Processes, tmp_path: Path) -> tuple[ComponentProcess, Path]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    log = tmp_path / "audit" / "audit.log"
    server = kubelite_processes.apiserver(
        args=["--audit-policy-file", str(policy), "--audit-log-path", str(log)]
    )
    return server, log


async def test_requests_are_logged_as_audit_events_the_policy_shapes(
    audited: tuple[ComponentProcess, Path],
) -> None:
    server, log = audited
    value = "pw-" + secrets.token_hex(12)
    await asyncio.to_thread(
        kubectl, server, "create", "secret", "generic", "s1", f"--from-literal=password={value}"
    )
    await asyncio.to_thread(kubectl, server, "create", "configmap", "c1", "--from-literal=k=v")
    await asyncio.to_thread(kubectl, server, "get", "namespace", "default")
    code, missing_id = await asyncio.to_thread(
        http_get, server.url + "/api/v1/namespaces/default/pods/nope"
    )
    assert code == 404
    _, own_id = await asyncio.to_thread(
        http_get, server.url + "/api/v1/namespaces/default/configmaps", {"Audit-ID": "mine-1"}
    )
    assert own_id == "mine-1"
    await asyncio.to_thread(
        http_get, server.url + "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1"
    )

    async def watch_completed() -> list[dict[str, Any]]:
        seen = events(log)
        done = any(e["verb"] == "watch" and e["stage"] == "ResponseComplete" for e in seen)
        return seen if done else []

    seen = await apoll_until(watch_completed, what="the watch's ResponseComplete in the log")
    for event in seen:
        Event.model_validate(event)
    assert all(e["stage"] != "RequestReceived" for e in seen)
    assert not any((e.get("objectRef") or {}).get("resource") == "namespaces" for e in seen)
    assert not any(e["requestURI"].startswith(("/healthz", "/readyz", "/api?")) for e in seen)

    (not_found,) = [e for e in seen if e["auditID"] == missing_id]
    assert not_found["verb"] == "get"
    assert not_found["objectRef"] == {
        "resource": "pods", "namespace": "default", "name": "nope", "apiVersion": "v1"
    }  # fmt: skip
    assert not_found["responseStatus"]["code"] == 404
    assert not_found["responseStatus"]["message"] == 'pods "nope" not found'
    assert not_found["user"]["username"] == "system:unsecured"
    assert not_found["sourceIPs"] == ["127.0.0.1"]
    assert [e["verb"] for e in seen if e["auditID"] == "mine-1"] == ["list"]

    (secret_create,) = [
        e for e in seen if e["verb"] == "create" and e["objectRef"]["resource"] == "secrets"
    ]
    assert secret_create["level"] == "Metadata"
    assert "requestObject" not in secret_create and "responseObject" not in secret_create
    text = log.read_text()
    assert value not in text and base64.b64encode(value.encode()).decode() not in text

    (cm_create,) = [
        e for e in seen if e["verb"] == "create" and e["objectRef"]["resource"] == "configmaps"
    ]
    assert cm_create["level"] == "RequestResponse"
    assert cm_create["requestObject"]["data"] == {"k": "v"}
    assert cm_create["responseObject"]["metadata"]["name"] == "c1"
    assert cm_create["responseStatus"] == {"metadata": {}, "code": 201}
    assert cm_create["userAgent"].startswith("kubectl")

    stages = [e["stage"] for e in seen if e["verb"] == "watch"]
    assert stages == ["ResponseStarted", "ResponseComplete"]
