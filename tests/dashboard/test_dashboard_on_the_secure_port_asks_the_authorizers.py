"""On the secure port the dashboard is authorized like the API it shows.

One real apiserver serves TLS with a ``--token-auth-file`` (``alice`` without bindings, an
admin in ``system:masters``); every call goes over HTTPS, verified against the CA it made.

* By default ``/ui/`` is refused to anonymous requests (403, a non-resource URL nobody was
  granted) and served to the admin.
* An administrator may make the page's files public — a ClusterRole allowing ``get`` on
  ``/ui`` and ``/ui/*`` bound to ``system:unauthenticated``, as the README describes — and the
  page then loads without credentials; but the trace endpoint, whose path that role also
  covers, still refuses anonymous requests and ``alice``: it asks the authorizers for ``get``
  on the pod and ``list`` on Events itself, worded as Kubernetes words a refused ``get pods``.
* A Role letting ``alice`` get pods is not enough (the trace shows Events: 403 for ``list``
  events); once it also lets her list Events in the namespace, she gets the trace.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubelite.testing import ComponentProcess, Processes
from kubelite.testing.waiting import poll_until
from tests.factories import pod, policy_rule, role, role_binding

pytestmark = pytest.mark.e2e

ALICE, ADMIN = "alice-token-0001", "admin-token-0003"
TOKENS = f"""{ALICE},alice,uid-alice
{ADMIN},root,uid-root,"system:masters"
"""
RBAC = "/apis/rbac.authorization.k8s.io/v1"
TRACE = "/ui/api/trace/namespaces/default/pods/web"


@dataclass(frozen=True)
class Secure:
    server: ComponentProcess

    def call(
        self, method: str, path: str, body: Any = None, *, token: str | None = None
    ) -> tuple[int, Any]:
        headers = {"Accept": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        url = f"https://127.0.0.1:{self.server.port_of('secure')}{path}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        assert self.server.state_dir is not None
        context = ssl.create_default_context(cafile=self.server.state_dir / "pki" / "ca.crt")
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                raw, code, kind = response.read(), response.status, response.headers
        except urllib.error.HTTPError as err:
            with err:
                raw, code, kind = err.read(), err.code, err.headers
        is_json = kind.get_content_type() == "application/json"
        return code, json.loads(raw) if is_json else raw.decode()

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        code, answer = self.call(method, path, body, token=ADMIN)
        assert 200 <= code < 300, (code, answer)
        return answer


@pytest.fixture
def secure(kubelite_processes: Processes, tmp_path: Path) -> Secure:
    (tmp_path / "tokens.csv").write_text(TOKENS)
    server = kubelite_processes.apiserver(
        store="memory://", secure=True, args=[f"--token-auth-file={tmp_path / 'tokens.csv'}"]
    )
    return Secure(server)


def _public_dashboard_files() -> tuple[dict[str, Any], dict[str, Any]]:
    viewer = role("dashboard-files", cluster=True)
    viewer["rules"] = [{"verbs": ["get"], "nonResourceURLs": ["/ui", "/ui/*"]}]
    binding = role_binding(
        "dashboard-files", role="dashboard-files", user="", role_kind="ClusterRole", cluster=True
    )
    binding["subjects"] = [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group}
        for group in ("system:authenticated", "system:unauthenticated")
    ]
    return viewer, binding


def test_trace_needs_get_pods_and_list_events_even_when_the_page_is_public(
    secure: Secure,
) -> None:
    secure.ok("POST", "/api/v1/namespaces/default/pods", pod("web"))
    assert secure.call("GET", "/ui/")[0] == 403
    code, page = secure.call("GET", "/ui/", token=ADMIN)
    assert code == 200 and "<title>kubelite dashboard</title>" in page

    viewer, binding = _public_dashboard_files()
    secure.ok("POST", f"{RBAC}/clusterroles", viewer)
    secure.ok("POST", f"{RBAC}/clusterrolebindings", binding)
    poll_until(lambda: secure.call("GET", "/ui/")[0] == 200, what="/ui/ public")
    assert secure.call("GET", "/ui/static/main.js")[0] == 200

    for token in (None, ALICE):
        code, status = secure.call("GET", TRACE, token=token)
        assert code == 403, (token, code, status)
        assert status["message"].startswith('pods "web" is forbidden: User ')
        assert (
            'cannot get resource "pods" in API group "" in the namespace "default"'
            in (status["message"])
        )

    # get pods alone is not enough: the trace also shows the namespace's Events
    reader = role("trace-reader", policy_rule(["get"], ["pods"]))
    secure.ok("POST", f"{RBAC}/namespaces/default/roles", reader)
    secure.ok(
        "POST",
        f"{RBAC}/namespaces/default/rolebindings",
        role_binding("trace-reader", role="trace-reader", user="alice"),
    )

    def past_get_pods() -> tuple[int, Any] | None:
        """The trace's answer to alice once her binding lets her get the pod."""
        answer = secure.call("GET", TRACE, token=ALICE)
        refused_pods = answer[0] == 403 and answer[1]["message"].startswith('pods "web"')
        return None if refused_pods else answer

    code, status = poll_until(past_get_pods, what="alice allowed to get pods")
    assert code == 403, (code, status)
    assert (
        'cannot list resource "events" in API group "" in the namespace "default"'
        in (status["message"])
    )

    reader["rules"].append(policy_rule(["list"], ["events"]))
    secure.ok("PUT", f"{RBAC}/namespaces/default/roles/trace-reader", reader)
    code, trace = poll_until(
        lambda: (answer := secure.call("GET", TRACE, token=ALICE))[0] == 200 and answer,
        what="alice's trace once her Role lets her list Events",
    )
    assert trace["kind"] == "PodTrace"
    assert [step["step"] for step in trace["steps"]] == ["created"]
