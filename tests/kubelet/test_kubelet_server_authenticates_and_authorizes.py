"""The kubelet's server over TLS: who it refuses, who it lets in, and who the apiserver trusts.

One real apiserver (its audit log recording every TokenReview and SubjectAccessReview with its
answer) and one real kubelet (process runtime) serving TLS with a certificate of the test's
kubelet CA, ``--client-ca-file`` that CA, ``--authentication-token-webhook`` and
``--authorization-mode=Webhook``. The apiserver dials it with ``--kubelet-client-certificate``
(``kube-apiserver-kubelet-client`` in ``system:masters``) and checks its serving certificate
against ``--kubelet-certificate-authority``. A pod ``shell`` runs on it; then, counted:

* an exec straight to the kubelet with no credentials is 401 ``Unauthorized`` (said in the
  kubelet's log, the only place it can be: nobody was asked), and so is its ``/healthz`` —
  while the separate health port answers anyone;
* ``bob``'s valid token, with no right on ``nodes/proxy``, is 403 with Kubernetes' words, and
  the TokenReview (at Metadata: its body holds the token) and the denied SubjectAccessReview
  the kubelet asked are in the audit log;
* ``alice``'s token, once a ClusterRole grants ``nodes/proxy``, runs ``echo hi``;
* a client certificate of another CA is 401 (the handshake takes it, as Go's does; the
  authenticator refuses it, and says why in the kubelet's log);
* through the apiserver — its kubelet client certificate — logs and exec work;
* a second kubelet serving a certificate of another CA is never trusted by the apiserver: an
  exec to its pod is a 500 naming the failed verification.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from component import pki
from kubelite.testing import ComponentProcess
from kubelite.testing.waiting import apoll_until
from tests import factories
from tests.factories import sh
from tests.kubelet.conftest import Cluster, StartKubelet
from tests.kubelet.pods import create_and_wait, phase, pod_log
from tests.kubelet.waits import wait_for_object

pytestmark = [pytest.mark.e2e]

V5 = "v5.channel.k8s.io"
ALICE, BOB = "alice-token-0001", "bob-token-0002"
TOKENS = f"{ALICE},alice,uid-alice\n{BOB},bob,uid-bob\n"
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: RequestResponse
  resources:
  - group: authentication.k8s.io
    resources: [tokenreviews]
  - group: authorization.k8s.io
    resources: [subjectaccessreviews]
"""


@dataclass(frozen=True)
class Pki:
    ca: pki.CertificateAuthority
    kubelet: pki.KeyPair
    apiserver_client: pki.KeyPair
    other_ca: pki.CertificateAuthority
    other_client: pki.KeyPair
    other_kubelet: pki.KeyPair


def make_pki(directory: Path, *, node: str, other_node: str) -> Pki:
    ca = pki.ensure_ca(directory / "kubelet-ca")
    other = pki.ensure_ca(directory / "other-ca", common_name="someone-else")
    hosts = ["127.0.0.1"]
    return Pki(
        ca=ca,
        kubelet=pki.ensure_serving_cert(ca, directory, name="kubelet", hosts=[node, *hosts]),
        apiserver_client=pki.ensure_client_cert(
            ca,
            directory,
            name="apiserver-kubelet-client",
            user="kube-apiserver-kubelet-client",
            groups=("system:masters",),
        ),
        other_ca=other,
        other_client=pki.ensure_client_cert(
            other, directory, name="intruder", user="alice", groups=("system:masters",)
        ),
        other_kubelet=pki.ensure_serving_cert(
            other, directory, name="other-kubelet", hosts=[other_node, *hosts]
        ),
    )


def kubelet_args(ca: Path, serving: pki.KeyPair) -> list[str]:
    return [
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        f"--client-ca-file={ca}",
        "--authentication-token-webhook",
        "--authorization-mode=Webhook",
        f"--pod-cidr=127.{random.randint(150, 199)}.{random.randint(0, 255)}.0/24",
    ]


@dataclass(frozen=True)
class Secured:
    cluster: Cluster
    pki: Pki
    kubelet: ComponentProcess
    audit_log: Path

    def context(self, client: pki.KeyPair | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.pki.ca.files.cert)
        if client is not None:
            context.load_cert_chain(client.cert, client.key)
        return context

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.kubelet.port_of('server')}"

    def audit_events(self) -> list[dict[str, Any]]:
        if not self.audit_log.exists():
            return []
        lines = self.audit_log.read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["stage"] == "ResponseComplete"]


async def direct_exec(
    s: Secured, command: list[str], *, token: str | None = None, client: pki.KeyPair | None = None
) -> tuple[int, str]:
    """An exec straight to the kubelet's server; (101, stdout) or (status, body)."""
    params = [("command", part) for part in command] + [("output", "1"), ("error", "1")]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"{s.url}/exec/default/shell/main"
    connector = aiohttp.TCPConnector(ssl=s.context(client))
    async with aiohttp.ClientSession(connector=connector) as session, asyncio.timeout(30):
        try:
            ws = await session.ws_connect(url, params=params, protocols=[V5], headers=headers)
        except aiohttp.WSServerHandshakeError as refused:
            async with session.get(url, params=params, headers=headers) as answer:
                assert answer.status == refused.status
                return answer.status, await answer.text()
        out = b""
        async with ws:
            async for msg in ws:
                if msg.data[0] == 1:
                    out += msg.data[1:]
        return 101, out.decode()


@pytest.fixture
async def secured(
    apiserver_process: Any, start_kubelet: StartKubelet, tmp_path: Path
) -> AsyncIterator[Secured]:
    node = f"node-{random.randint(1000, 9999)}"
    keys = make_pki(tmp_path / "pki", node=node, other_node=f"{node}-other")
    (tmp_path / "tokens.csv").write_text(TOKENS)
    (tmp_path / "policy.yaml").write_text(POLICY)
    audit_log = tmp_path / "audit.log"
    api = apiserver_process(
        store="memory://",
        args=[
            f"--token-auth-file={tmp_path / 'tokens.csv'}",
            f"--audit-policy-file={tmp_path / 'policy.yaml'}",
            f"--audit-log-path={audit_log}",
            f"--kubelet-client-certificate={keys.apiserver_client.cert}",
            f"--kubelet-client-key={keys.apiserver_client.key}",
            f"--kubelet-certificate-authority={keys.ca.files.cert}",
        ],
    )
    kubelet = start_kubelet(
        api.url, node, runtime="process", args=kubelet_args(keys.ca.files.cert, keys.kubelet)
    )
    client = ApiClient(server=api.url)
    try:
        cluster = Cluster(server=api.url, client=client, kubelet=kubelet, node=node, tmp=tmp_path)
        await create_and_wait(
            cluster,
            factories.pod("shell", sh("echo started; sleep 3600"), nodeName=node),
            lambda p: phase(p) == "Running",
        )
        yield Secured(cluster=cluster, pki=keys, kubelet=kubelet, audit_log=audit_log)
    finally:
        await client.close()


async def logged(s: Secured, text: str) -> None:
    """Wait until the kubelet's log shows ``text`` (its lines reach the file after the answer
    may have reached us)."""

    async def shown() -> bool:
        return text in s.kubelet.tail(200)

    await apoll_until(
        shown, what=f"the kubelet to log {text!r}", describe=lambda: s.kubelet.tail(20)
    )


async def test_kubelet_refuses_unauthenticated_and_unauthorized_requests(
    secured: Secured,
) -> None:
    s = secured
    # no credentials: 401, on exec and on the server's /healthz alike
    assert await direct_exec(s, ["echo", "hi"]) == (401, "Unauthorized")
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=s.context())) as session,
        session.get(f"{s.url}/healthz") as answer,
    ):
        assert (answer.status, await answer.text()) == (401, "Unauthorized")
    await logged(s, "Unauthorized: GET /exec/default/shell/main")
    # the separate health port asks nobody
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{s.kubelet.url_of('health')}/healthz") as answer,
    ):
        assert answer.status == 200

    # bob's token is valid, but bob may not proxy to nodes: 403, worded as the kubelet words it
    forbidden = "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[proxy])\n"
    assert await direct_exec(s, ["echo", "hi"], token=BOB) == (403, forbidden)

    async def reviews_of_bob() -> tuple[dict[str, Any], dict[str, Any]] | None:
        # a TokenReview is audited at Metadata at most (its body holds the token)
        events = s.audit_events()
        token = [e for e in events if e["objectRef"]["resource"] == "tokenreviews"]
        access = [
            e
            for e in events
            if e["objectRef"]["resource"] == "subjectaccessreviews"
            and e["requestObject"]["spec"]["user"] == "bob"
        ]
        return (token[0], access[0]) if token and access else None

    token_review, access_review = await apoll_until(
        reviews_of_bob, what="the kubelet's reviews of bob in the audit log"
    )
    assert token_review["verb"] == "create" and token_review["responseStatus"]["code"] == 201
    asked = access_review["requestObject"]["spec"]["resourceAttributes"]
    assert asked == {
        "namespace": "",
        "verb": "get",
        "group": "",
        "version": "v1",
        "resource": "nodes",
        "subresource": "proxy",
        "name": s.cluster.node,
    }
    assert access_review["responseObject"]["status"]["allowed"] is False

    # a certificate from another CA (naming alice in system:masters) authenticates nobody
    assert await direct_exec(s, ["echo", "hi"], client=s.pki.other_client) == (
        401,
        "Unauthorized",
    )
    unknown = "client certificate: x509: certificate signed by unknown authority"
    await logged(s, f"Unable to authenticate the request: {unknown}")


async def test_kubelet_lets_in_a_token_with_nodes_proxy_and_the_apiserver(
    secured: Secured,
) -> None:
    s = secured
    client = s.cluster.client
    rule = factories.policy_rule(["get", "create"], ["nodes/proxy"])
    await client.create(
        REGISTRY.require("rbac.authorization.k8s.io", "ClusterRole"),
        factories.role("node-proxier", rule, cluster=True),
    )
    await client.create(
        REGISTRY.require("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        factories.role_binding(
            "alice-proxies",
            role="node-proxier",
            role_kind="ClusterRole",
            user="alice",
            cluster=True,
        ),
    )
    assert await direct_exec(s, ["echo", "hi"], token=ALICE) == (101, "hi\n")

    # through the apiserver, which shows its kubelet client certificate
    assert "started" in await pod_log(s.cluster, "shell")
    url = f"{s.cluster.server}/api/v1/namespaces/default/pods/shell/exec"
    params = [("command", "echo"), ("command", "hi"), ("stdout", "true")]
    async with aiohttp.ClientSession() as session, asyncio.timeout(30):
        async with session.ws_connect(url, params=params, protocols=[V5]) as ws:
            out = b"".join([msg.data[1:] async for msg in ws if msg.data[0] == 1])
    assert out == b"hi\n"


async def test_apiserver_refuses_a_kubelet_whose_certificate_another_ca_signed(
    secured: Secured, start_kubelet: StartKubelet
) -> None:
    s = secured
    node = f"{s.cluster.node}-other"
    start_kubelet(
        s.cluster.server,
        node,
        runtime="process",
        args=kubelet_args(s.pki.ca.files.cert, s.pki.other_kubelet),
    )
    nodes = REGISTRY.require("", "Node")
    await wait_for_object(s.cluster.client, nodes, node, lambda n: n is not None, within=30)
    await create_and_wait(
        s.cluster,
        factories.pod("elsewhere", sh("sleep 3600"), nodeName=node),
        lambda p: phase(p) == "Running",
    )
    url = f"{s.cluster.server}/api/v1/namespaces/default/pods/elsewhere/exec"
    params = [("command", "echo"), ("command", "hi"), ("stdout", "true")]
    async with aiohttp.ClientSession() as session:
        async with session.get(
            url, params=params, headers={"Connection": "Upgrade", "Upgrade": "websocket"}
        ) as answer:
            assert answer.status == 500
            status = await answer.json()
    assert status["message"].startswith("error dialing backend:")
    assert "certificate verify failed" in status["message"]
