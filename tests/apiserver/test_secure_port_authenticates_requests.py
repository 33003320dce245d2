"""The secure port of a real apiserver process: TLS its own CA verifies, and who may ask.

Counted over real HTTPS on loopback: the serving certificate verifies against the CA the
apiserver made in ``<state-dir>/pki`` (and not without it); anonymous requests reach only the
public health and version paths (403 elsewhere, 401 with ``--anonymous-auth=false``); a client
certificate from another CA, expired, or for servers only is 401 (not a failed handshake, and
not anonymous; curl and the official client see the Status), unless a good bearer token comes
with it; a wrong bearer token is 401 while a
``--token-auth-file`` token, an admin certificate (also through the official client and
kubectl with a kubeconfig) and a TokenRequest token are let in — the latter no longer once
its bound pod is deleted, or once expired, or when signed by another key.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID
from kubernetes import client as k8s

from component import pki
from kubelite.testing import ComponentProcess, Processes
from tests.factories import client_cert, pod

TOKEN = "s3cret-token-for-tests"
DISCOVERY = "/api"
"""Readable by every authenticated user (``system:discovery``), by no anonymous one."""


def _tls(server: ComponentProcess, *, cert: pki.KeyPair | None = None) -> ssl.SSLContext:
    assert server.state_dir is not None
    context = ssl.create_default_context(cafile=server.state_dir / "pki" / "ca.crt")
    if cert is not None:
        context.load_cert_chain(cert.cert, cert.key)
    return context


def _call(
    server: ComponentProcess,
    path: str,
    *,
    method: str = "GET",
    body: Any = None,
    token: str | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any]:
    url = f"https://127.0.0.1:{server.port_of('secure')}{path}"
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, context=context or _tls(server), timeout=30) as r:
            body = r.read()
            is_json = r.headers.get_content_type() == "application/json"
            return r.status, json.loads(body) if is_json else body.decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read() or b"null")


def _insecure(server: ComponentProcess, path: str, body: Any = None, method: str = "POST") -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{server.url}{path}",
        data=data,
        headers={"Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def secure_server(
    session_processes: Processes, tmp_path_factory: pytest.TempPathFactory
) -> ComponentProcess:
    tokens = tmp_path_factory.mktemp("tokens") / "tokens.csv"
    tokens.write_text(f'{TOKEN},alice,uid-1,"dev,ops"\n')
    return session_processes.apiserver(
        store="memory://", secure=True, args=[f"--token-auth-file={tokens}"]
    )


def _admin(server: ComponentProcess) -> pki.KeyPair:
    assert server.state_dir is not None
    directory = server.state_dir / "pki"
    ca = pki.ensure_ca(directory)
    return pki.ensure_client_cert(
        ca, directory, name="admin", user="kubernetes-admin", groups=["system:masters"]
    )


def test_tls_verifies_with_the_cluster_ca_only(secure_server: ComponentProcess) -> None:
    assert _call(secure_server, "/version")[0] == 200
    with pytest.raises(urllib.error.URLError) as refused:
        _call(secure_server, "/version", context=ssl.create_default_context())
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)


def test_anonymous_requests_see_only_public_paths(secure_server: ComponentProcess) -> None:
    for path in ("/healthz", "/livez", "/readyz", "/version"):
        assert _call(secure_server, path)[0] == 200, path
    for path in ("/api/v1/namespaces", "/api/v1/namespaces/default/pods", DISCOVERY):
        code, status = _call(secure_server, path)
        assert (code, status["reason"]) == (403, "Forbidden"), path
        assert 'User "system:anonymous" cannot' in status["message"]


def test_credentials_that_do_not_check_out_are_401(secure_server: ComponentProcess) -> None:
    code, status = _call(secure_server, "/api/v1/namespaces", token="wrong")
    assert code == 401
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def _wrong_certificates(server: ComponentProcess, directory: Path) -> dict[str, pki.KeyPair]:
    """Client certificates that authenticate nobody, each named for why."""
    assert server.state_dir is not None
    ours = pki.ensure_ca(server.state_dir / "pki")
    other = pki.ensure_ca(directory / "other-ca")
    return {
        "another CA": pki.ensure_client_cert(
            other, directory, name="stranger", user="kubernetes-admin", groups=["system:masters"]
        ),
        "expired": client_cert(
            ours, directory, user="expired", groups=("system:masters",), valid_days=(-3, -1)
        ),
        "server only": client_cert(
            ours,
            directory,
            user="server-only",
            groups=("system:masters",),
            usage=ExtendedKeyUsageOID.SERVER_AUTH,
        ),
    }


def test_a_client_certificate_that_does_not_verify_is_401(
    secure_server: ComponentProcess, tmp_path: Path
) -> None:
    """The handshake takes it (as Go's RequestClientCert); authentication refuses it — with
    Kubernetes' 401 Status, whatever anonymous requests may do, unless a token is good."""
    for why, cert in _wrong_certificates(secure_server, tmp_path).items():
        context = _tls(secure_server, cert=cert)
        code, status = _call(secure_server, "/api/v1/namespaces", context=context)
        assert (code, status["reason"]) == (401, "Unauthorized"), why
        assert _call(secure_server, "/version", context=context)[0] == 401, why
        assert _call(secure_server, DISCOVERY, token=TOKEN, context=context)[0] == 200, why


def test_curl_and_the_official_client_get_401_for_a_stranger_certificate(
    secure_server: ComponentProcess, tmp_path: Path
) -> None:
    stranger = _wrong_certificates(secure_server, tmp_path)["another CA"]
    assert secure_server.state_dir is not None
    url = f"https://127.0.0.1:{secure_server.port_of('secure')}/api/v1/namespaces"
    curl = subprocess.run(
        [
            "curl",
            "-sS",
            "--cacert",
            str(secure_server.state_dir / "pki" / "ca.crt"),
            "--cert",
            str(stranger.cert),
            "--key",
            str(stranger.key),
            "-w",
            "\n%{http_code}",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert curl.returncode == 0, curl.stderr
    body, code = curl.stdout.rsplit("\n", 1)
    assert code == "401"
    assert json.loads(body)["reason"] == "Unauthorized"

    kubeconfig = _kubeconfig(secure_server, tmp_path / "kubeconfig", user=stranger)
    with k8s.ApiClient(_official_config(kubeconfig)) as api:
        with pytest.raises(k8s.ApiException) as refused:
            k8s.CoreV1Api(api).list_namespace()
    assert refused.value.status == 401


def test_a_static_token_and_an_admin_certificate_authenticate(
    secure_server: ComponentProcess,
) -> None:
    assert _call(secure_server, DISCOVERY, token=TOKEN)[0] == 200
    admin = _admin(secure_server)
    code, namespaces = _call(
        secure_server, "/api/v1/namespaces", context=_tls(secure_server, cert=admin)
    )
    assert code == 200
    assert "kube-system" in {item["metadata"]["name"] for item in namespaces["items"]}


def _kubeconfig(server: ComponentProcess, path: Path, *, user: pki.KeyPair | None = None) -> Path:
    admin = user or _admin(server)
    assert server.state_dir is not None

    def data(file: Path) -> str:
        return base64.b64encode(file.read_bytes()).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": f"https://127.0.0.1:{server.port_of('secure')}",
                    "certificate-authority-data": data(server.state_dir / "pki" / "ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate": str(admin.cert), "client-key": str(admin.key)},
            }
        ],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "admin"}}],
        "current-context": "c",
    }
    path.write_text(json.dumps(doc))
    return path


def test_kubectl_and_the_official_client_use_a_certificate_kubeconfig(
    secure_server: ComponentProcess, tmp_path: Path
) -> None:
    kubeconfig = _kubeconfig(secure_server, tmp_path / "kubeconfig")
    done = subprocess.run(
        [
            "kubectl",
            f"--kubeconfig={kubeconfig}",
            f"--cache-dir={tmp_path / 'cache'}",
            "get",
            "namespaces",
            "-o",
            "name",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "namespace/kube-system" in done.stdout.split()

    api = k8s.ApiClient(_official_config(kubeconfig))
    with api:
        names = [ns.metadata.name for ns in k8s.CoreV1Api(api).list_namespace().items]
    assert "default" in names


def _official_config(kubeconfig: Path) -> k8s.Configuration:
    from kubernetes import config

    configuration = k8s.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return configuration


def _service_account_and_pod(server: ComponentProcess, name: str) -> tuple[dict[str, Any], Any]:
    account = _insecure(
        server,
        "/api/v1/namespaces/default/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    created = _insecure(server, "/api/v1/namespaces/default/pods", pod(f"{name}-pod"))
    return account, created


def test_a_token_request_token_dies_with_its_pod(secure_server: ComponentProcess) -> None:
    account, bound = _service_account_and_pod(secure_server, "robot")
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
    answer = _insecure(
        secure_server, "/api/v1/namespaces/default/serviceaccounts/robot/token", request
    )
    assert answer["kind"] == "TokenRequest"
    assert answer["spec"]["expirationSeconds"] == 3600
    token = answer["status"]["token"]
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == "system:serviceaccount:default:robot"
    assert claims["exp"] - claims["iat"] == 3600
    assert claims["kubernetes.io"] == {
        "namespace": "default",
        "serviceaccount": {"name": "robot", "uid": account["metadata"]["uid"]},
        "pod": {"name": "robot-pod", "uid": bound["metadata"]["uid"]},
    }

    assert _call(secure_server, DISCOVERY, token=token)[0] == 200
    _insecure(
        secure_server,
        "/api/v1/namespaces/default/pods/robot-pod?gracePeriodSeconds=0",
        method="DELETE",
    )
    assert _call(secure_server, DISCOVERY, token=token)[0] == 401


def test_token_requests_are_validated(secure_server: ComponentProcess) -> None:
    _service_account_and_pod(secure_server, "short")
    path = "/api/v1/namespaces/default/serviceaccounts/short/token"
    too_short = {"spec": {"expirationSeconds": 300}}
    with pytest.raises(urllib.error.HTTPError) as refused:
        _insecure(secure_server, path, too_short)
    with refused.value:
        status = json.loads(refused.value.read())
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'TokenRequest.authentication.k8s.io "short" is invalid: spec.expirationSeconds: '
        "Invalid value: 300: may not specify a duration less than 10 minutes"
    )
    wrong_kind = {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Node", "name": "x"}}}
    with pytest.raises(urllib.error.HTTPError) as refused:
        _insecure(secure_server, path, wrong_kind)
    with refused.value:
        assert refused.value.code == 400


def _forged(account: dict[str, Any], *, key: Any, exp_offset: int) -> str:
    """A token with our claims for ``account``, signed with ``key``, expiring ``exp_offset``
    seconds from now."""
    now = int(time.time())
    claims = {
        "aud": ["https://kubernetes.default.svc.cluster.local"],
        "iss": "https://kubernetes.default.svc.cluster.local",
        "sub": "system:serviceaccount:default:forger",
        "iat": now - 7200,
        "nbf": now - 7200,
        "exp": now + exp_offset,
        "kubernetes.io": {
            "namespace": "default",
            "serviceaccount": {"name": "forger", "uid": account["metadata"]["uid"]},
        },
    }
    return jwt.encode(claims, key, algorithm="RS256")


def test_expired_or_foreign_service_account_tokens_are_401(
    secure_server: ComponentProcess, tmp_path: Path
) -> None:
    account, _ = _service_account_and_pod(secure_server, "forger")
    assert secure_server.state_dir is not None
    ours = (secure_server.state_dir / "pki" / "sa.key").read_bytes()
    theirs = pki.ensure_signing_key(tmp_path).key.read_bytes()
    valid = _forged(account, key=ours, exp_offset=600)
    assert _call(secure_server, DISCOVERY, token=valid)[0] == 200
    expired = _forged(account, key=ours, exp_offset=-1)
    assert _call(secure_server, DISCOVERY, token=expired)[0] == 401
    foreign = _forged(account, key=theirs, exp_offset=600)
    assert _call(secure_server, DISCOVERY, token=foreign)[0] == 401


def test_anonymous_auth_off_answers_401(session_processes: Processes) -> None:
    server = session_processes.apiserver(
        store="memory://", secure=True, args=["--anonymous-auth=false"]
    )
    code, status = _call(server, "/api/v1/namespaces")
    assert (code, status["reason"]) == (401, "Unauthorized")
