"""The secure port end to end: who is refused, who is let in, and every refusal in the audit log.

One real apiserver process serves TLS on a free port with a ``--token-auth-file`` (``alice``,
``bob`` and an admin in ``system:masters``) and an audit policy at Metadata for everything.
Everything below goes over HTTPS with bearer tokens, verified against the CA the apiserver made
in ``<state-dir>/pki``, and is counted:

* no token is ``system:anonymous`` (403 on a resource), a wrong token is 401, and so is a
  client certificate from another CA, expired, or not for client authentication;
* each of the 8 verbs on configmaps is 403 for ``alice`` without a binding and allowed after a
  RoleBinding (200, create 201);
* a node's certificate (``system:node:node1``) is 403 on a Secret only another node's pod
  references and on another node's Node (when the Node authorizer is there);
* ``alice`` impersonating ``bob`` is 403 worded as Kubernetes words it, and allowed after a
  ClusterRole granting ``impersonate`` on users is bound to her;
* ``kubectl auth whoami`` and ``kubectl auth can-i --list`` with a kubeconfig holding her token;
* a TokenReview of a TokenRequest token names the service account, its pod and the API audience,
  and says why a wrong or orphaned token authenticates no one;

and each refused attempt is matched, by the ``Audit-Id`` its response carried, to exactly one
``ResponseComplete`` event with its code, its user (``{}`` for a 401) and, for a 403, the
``authorization.k8s.io/decision`` ``forbid``.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from component import pki
from kubelite.testing import ComponentProcess, Processes
from kubelite.testing.waiting import poll_until
from tests.factories import client_cert, node, pod, policy_rule, role, role_binding

ALICE, BOB, ADMIN = "alice-token-0001", "bob-token-0002", "admin-token-0003"
TOKENS = f"""{ALICE},alice,uid-alice
{BOB},bob,uid-bob,"dev"
{ADMIN},root,uid-root,"system:masters"
"""
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
"""
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ISSUER = "https://kubernetes.default.svc.cluster.local"


@dataclass(frozen=True)
class Answer:
    code: int
    body: Any
    audit_id: str


@dataclass(frozen=True)
class Secure:
    server: ComponentProcess
    audit_log: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.port_of('secure')}"

    @property
    def ca(self) -> Path:
        assert self.server.state_dir is not None
        return self.server.state_dir / "pki" / "ca.crt"

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        cert: pki.KeyPair | None = None,
    ) -> Answer:
        sent = {"Accept": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = (
                "application/merge-patch+json" if method == "PATCH" else "application/json"
            )
        request = urllib.request.Request(self.url + path, data=data, headers=sent, method=method)
        context = ssl.create_default_context(cafile=self.ca)
        if cert is not None:
            context.load_cert_chain(cert.cert, cert.key)
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                raw, code, got = response.read(), response.status, response.headers
        except urllib.error.HTTPError as err:
            with err:
                raw, code, got = err.read(), err.code, err.headers
        streamed = "watch=1" in path  # a watch's body is a JSON line per event
        is_json = got.get_content_type() == "application/json" and raw and not streamed
        return Answer(code, json.loads(raw) if is_json else raw, got["Audit-Id"])

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        answer = self.call(method, path, body, token=ADMIN)
        assert 200 <= answer.code < 300, answer
        return answer.body

    def completed(self, answers: Iterable[Answer]) -> dict[str, dict[str, Any]]:
        """The ResponseComplete event of each answer, by Audit-Id, once all are in the log
        (written in batches, soon after the response)."""
        wanted = {a.audit_id for a in answers}

        def logged() -> dict[str, dict[str, Any]] | None:
            lines = self.audit_log.read_text().splitlines() if self.audit_log.exists() else []
            found: dict[str, list[dict[str, Any]]] = {}
            for line in lines:
                event = json.loads(line)
                if event["auditID"] in wanted and event["stage"] == "ResponseComplete":
                    found.setdefault(event["auditID"], []).append(event)
            if set(found) != wanted:
                return None
            assert all(len(events) == 1 for events in found.values()), found
            return {audit_id: events[0] for audit_id, events in found.items()}

        return poll_until(logged, what=f"{len(wanted)} ResponseComplete events in the audit log")


@pytest.fixture(scope="module")
def secure(session_processes: Processes, tmp_path_factory: pytest.TempPathFactory) -> Secure:
    files = tmp_path_factory.mktemp("secure-port-rbac")
    (files / "tokens.csv").write_text(TOKENS)
    (files / "policy.yaml").write_text(POLICY)
    audit_log = files / "audit.log"
    server = session_processes.apiserver(
        store="memory://",
        secure=True,
        args=[
            f"--token-auth-file={files / 'tokens.csv'}",
            f"--audit-policy-file={files / 'policy.yaml'}",
            f"--audit-log-path={audit_log}",
        ],
    )
    return Secure(server, audit_log)


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_no_token_is_anonymous_and_a_wrong_token_401_each_audited(secure: Secure) -> None:
    anonymous = [secure.call("GET", CONFIGMAPS), secure.call("POST", CONFIGMAPS, configmap("a"))]
    wrong = [
        secure.call("GET", CONFIGMAPS, token="not-a-token"),
        secure.call("GET", CONFIGMAPS, token=ALICE + "x"),
        secure.call("GET", CONFIGMAPS, token="a.b.c"),
    ]
    assert [a.code for a in anonymous] == [403, 403]
    assert [a.code for a in wrong] == [401, 401, 401]
    assert all(a.body["reason"] == "Unauthorized" for a in wrong)

    events = secure.completed([*anonymous, *wrong])
    assert len(events) == 5
    for answer in anonymous:
        event = events[answer.audit_id]
        assert event["user"] == {
            "username": "system:anonymous",
            "groups": ["system:unauthenticated"],
        }
        assert event["responseStatus"]["code"] == 403
        assert event["annotations"]["authorization.k8s.io/decision"] == "forbid"
    for answer in wrong:
        event = events[answer.audit_id]
        assert event["user"] == {}
        assert event["responseStatus"]["code"] == 401
        assert "annotations" not in event  # refused before authorization


def _pki(secure: Secure) -> pki.CertificateAuthority:
    assert secure.server.state_dir is not None
    return pki.ensure_ca(secure.server.state_dir / "pki")


def test_certificates_that_do_not_verify_are_401_each_audited(
    secure: Secure, tmp_path: Path
) -> None:
    ours, other = _pki(secure), pki.ensure_ca(tmp_path / "other-ca")
    masters = ("system:masters",)
    wrong = [
        pki.ensure_client_cert(other, tmp_path, name="s", user="stranger", groups=masters),
        client_cert(ours, tmp_path, user="expired", groups=masters, valid_days=(-3, -1)),
        client_cert(
            ours, tmp_path, user="server", groups=masters, usage=ExtendedKeyUsageOID.SERVER_AUTH
        ),
    ]
    refused = [secure.call("GET", CONFIGMAPS, cert=cert) for cert in wrong]
    assert [(a.code, a.body["reason"]) for a in refused] == [(401, "Unauthorized")] * 3
    events = secure.completed(refused)
    assert len(events) == 3
    for answer in refused:
        event = events[answer.audit_id]
        assert (event["user"], event["verb"]) == ({}, "list")
        assert event["responseStatus"]["code"] == 401

    good = pki.ensure_client_cert(ours, tmp_path, name="carol", user="carol", groups=masters)
    assert secure.call("GET", CONFIGMAPS, cert=good).code == 200


def test_a_node_is_refused_another_nodes_objects_each_audited(
    secure: Secure, tmp_path: Path
) -> None:
    pytest.importorskip("services.apiserver.node_authorizer", reason="no Node authorizer yet")
    ca = _pki(secure)

    def node_cert(name: str) -> pki.KeyPair:
        return pki.ensure_client_cert(
            ca, tmp_path, name=name, user=f"system:node:{name}", groups=["system:nodes"]
        )

    for name in ("node1", "node2"):
        secure.ok("POST", "/api/v1/nodes", node(name))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "n2-only"}}
    secure.ok("POST", "/api/v1/namespaces/default/secrets", secret)
    uses = pod("n2-pod", nodeName="node2")
    uses["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "n2-only"}}]
    secure.ok("POST", "/api/v1/namespaces/default/pods", uses)
    path = "/api/v1/namespaces/default/secrets/n2-only"
    poll_until(
        lambda: secure.call("GET", path, cert=node_cert("node2")).code == 200,
        what="node2 allowed its pod's Secret",
    )

    node1 = node_cert("node1")
    refused = {
        "get": secure.call("GET", path, cert=node1),
        "patch": secure.call(
            "PATCH", "/api/v1/nodes/node2", {"metadata": {"labels": {"a": "b"}}}, cert=node1
        ),
    }
    assert {verb: a.code for verb, a in refused.items()} == {"get": 403, "patch": 403}
    events = secure.completed(refused.values())
    for verb, answer in refused.items():
        event = events[answer.audit_id]
        assert (event["verb"], event["user"]["username"]) == (verb, "system:node:node1")
        assert event["responseStatus"]["code"] == 403


VERBS = ("create", "get", "list", "watch", "update", "patch", "delete", "deletecollection")


def every_verb(secure: Secure, token: str) -> dict[str, Answer]:
    """One request per verb on configmaps in ``default`` with ``token``; the seed is recreated
    by the admin first, so get, update, patch and delete have something to act on."""
    secure.call("DELETE", f"{CONFIGMAPS}/mine", token=ADMIN)
    if secure.call("GET", f"{CONFIGMAPS}/seed", token=ADMIN).code == 404:
        secure.ok("POST", CONFIGMAPS, configmap("seed", a="1"))
    seed = f"{CONFIGMAPS}/seed"
    return {
        "create": secure.call("POST", CONFIGMAPS, configmap("mine"), token=token),
        "get": secure.call("GET", seed, token=token),
        "list": secure.call("GET", CONFIGMAPS, token=token),
        "watch": secure.call("GET", CONFIGMAPS + "?watch=1&timeoutSeconds=1", token=token),
        "update": secure.call("PUT", seed, configmap("seed", a="2"), token=token),
        "patch": secure.call("PATCH", seed, {"data": {"b": "3"}}, token=token),
        "delete": secure.call("DELETE", seed, token=token),
        "deletecollection": secure.call("DELETE", CONFIGMAPS, token=token),
    }


def test_every_verb_is_forbidden_for_alice_until_a_role_binding_each_audited(
    secure: Secure,
) -> None:
    denied = every_verb(secure, ALICE)
    assert {verb: a.code for verb, a in denied.items()} == dict.fromkeys(VERBS, 403)
    assert denied["list"].body["message"] == (
        'configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group ""'
        ' in the namespace "default"'
    )
    events = secure.completed(denied.values())
    assert len(events) == len(VERBS)
    for verb, answer in denied.items():
        event = events[answer.audit_id]
        assert event["verb"] == verb
        assert event["user"]["username"] == "alice"
        assert event["responseStatus"]["code"] == 403
        assert event["annotations"]["authorization.k8s.io/decision"] == "forbid"

    secure.ok(
        "POST",
        f"{RBAC}/namespaces/default/roles",
        role("cm", policy_rule([*VERBS], ["configmaps"])),
    )
    secure.ok(
        "POST",
        f"{RBAC}/namespaces/default/rolebindings",
        role_binding("alice-cm", role="cm", user="alice"),
    )
    poll_until(
        lambda: secure.call("GET", CONFIGMAPS, token=ALICE).code == 200,
        what="alice's RoleBinding in force",
    )
    granted = every_verb(secure, ALICE)
    assert {verb: a.code for verb, a in granted.items()} == {
        **dict.fromkeys(VERBS, 200),
        "create": 201,
    }
    for answer in secure.completed(granted.values()).values():
        assert answer["annotations"]["authorization.k8s.io/decision"] == "allow"
        assert answer["annotations"]["authorization.k8s.io/reason"] == (
            'RBAC: allowed by RoleBinding "alice-cm/default" of Role "cm" to User "alice"'
        )


def test_impersonation_needs_the_impersonate_verb_each_attempt_audited(secure: Secure) -> None:
    as_bob = {"Impersonate-User": "bob"}
    whoami = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    refused = secure.call("POST", WHOAMI, whoami, token=ALICE, headers=as_bob)
    assert refused.code == 403
    assert refused.body["message"] == (
        'users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group'
        ' "" at the cluster scope'
    )
    event = secure.completed([refused])[refused.audit_id]
    assert event["user"]["username"] == "alice"
    assert "impersonatedUser" not in event
    assert event["annotations"]["authorization.k8s.io/decision"] == "forbid"

    secure.ok(
        "POST",
        f"{RBAC}/clusterroles",
        role("impersonator", policy_rule(["impersonate"], ["users"]), cluster=True),
    )
    secure.ok(
        "POST",
        f"{RBAC}/clusterrolebindings",
        role_binding(
            "alice-impersonates",
            role="impersonator",
            user="alice",
            role_kind="ClusterRole",
            cluster=True,
        ),
    )

    def as_bob_once_allowed() -> Answer | None:
        answer = secure.call("POST", WHOAMI, whoami, token=ALICE, headers=as_bob)
        return answer if answer.code == 201 else None

    allowed = poll_until(as_bob_once_allowed, what="alice's impersonate binding in force")
    assert allowed.body["status"]["userInfo"] == {
        "username": "bob",
        "groups": ["system:authenticated"],
    }
    event = secure.completed([allowed])[allowed.audit_id]
    assert event["user"]["username"] == "alice"
    assert event["impersonatedUser"] == {"username": "bob", "groups": ["system:authenticated"]}
    assert event["annotations"]["authorization.k8s.io/decision"] == "allow"


def _kubectl(secure: Secure, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "kubelite",
                        "cluster": {"server": secure.url, "certificate-authority": str(secure.ca)},
                    }
                ],
                "users": [{"name": "alice", "user": {"token": ALICE}}],
                "contexts": [
                    {"name": "alice", "context": {"cluster": "kubelite", "user": "alice"}}
                ],
                "current-context": "alice",
            }
        )
    )
    return subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={tmp_path / 'cache'}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_kubectl_auth_whoami_and_can_i_list_with_alices_token(
    secure: Secure, tmp_path: Path
) -> None:
    whoami = _kubectl(secure, tmp_path, "auth", "whoami", "-o", "json")
    assert whoami.returncode == 0, whoami.stderr
    assert json.loads(whoami.stdout)["status"]["userInfo"] == {
        "username": "alice",
        "uid": "uid-alice",
        "groups": ["system:authenticated"],
    }
    listed = _kubectl(secure, tmp_path, "auth", "can-i", "--list", "-n", "default")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert "[create]" in rows["selfsubjectreviews.authentication.k8s.io"]
    assert "[create]" in rows["selfsubjectaccessreviews.authorization.k8s.io"]


def _service_account_token(secure: Secure, name: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A TokenRequest token of a new service account, bound to a new pod of it."""
    account = secure.ok(
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    bound = secure.ok("POST", "/api/v1/namespaces/default/pods", pod(f"{name}-pod"))
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": bound["metadata"]["name"],
                "uid": bound["metadata"]["uid"],
            }
        },
    }
    issued = secure.ok("POST", f"/api/v1/namespaces/default/serviceaccounts/{name}/token", request)
    return issued["status"]["token"], account, bound


def _review(secure: Secure, token: str, **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token, **spec},
    }
    status: dict[str, Any] = secure.ok("POST", TOKEN_REVIEWS, body)["status"]
    return status


def test_a_token_review_names_the_service_account_of_a_token_request_token(
    secure: Secure,
) -> None:
    token, account, bound = _service_account_token(secure, "robot")
    status = _review(secure, token)
    assert status["authenticated"] is True
    assert status["audiences"] == [ISSUER]
    user = status["user"]
    assert user["username"] == "system:serviceaccount:default:robot"
    assert user["uid"] == account["metadata"]["uid"]
    assert user["groups"] == [
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    ]
    assert user["extra"]["authentication.kubernetes.io/pod-name"] == ["robot-pod"]
    assert user["extra"]["authentication.kubernetes.io/pod-uid"] == [bound["metadata"]["uid"]]
    (credential,) = user["extra"]["authentication.kubernetes.io/credential-id"]
    assert credential.startswith("JTI=")

    other_audience = _review(secure, token, audiences=["vault"])
    assert other_audience == {
        "authenticated": False,
        "user": {},
        "error": f'[invalid bearer token, token audiences ["{ISSUER}"] is invalid for the target'
        ' audiences ["vault"]]',
    }
    assert _review(secure, ALICE)["user"] == {
        "username": "alice",
        "uid": "uid-alice",
        "groups": ["system:authenticated"],
    }
    assert _review(secure, "not-a-token") == {
        "authenticated": False,
        "user": {},
        "error": "invalid bearer token",
    }

    secure.ok("DELETE", "/api/v1/namespaces/default/pods/robot-pod?gracePeriodSeconds=0")
    assert _review(secure, token)["error"] == (
        "[invalid bearer token, service account token has been invalidated]"
    )
    no_token = secure.call(
        "POST",
        TOKEN_REVIEWS,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}},
        token=ADMIN,
    )
    assert (no_token.code, no_token.body["message"]) == (
        400,
        "token is required for TokenReview in authentication",
    )
