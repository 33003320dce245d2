"""Schemathesis against the secure port: requests generated from the apiserver's own OpenAPI
document, sent over TLS with a valid bearer token, never get a 5xx.

A real apiserver process serves 6443-style TLS on a free port with a ``--token-auth-file``
whose one user is in ``system:masters``, so authorization lets every request through to the
handlers (the point is what the handlers do with hostile input, behind authentication). The
schema is the core group's ``/openapi/v3/api/v1`` document, fetched over the same HTTPS
connection; every operation of it gets a few generated requests (positive and negative data,
Hypothesis' explicit examples first), each sent with the token and checked with the CA the
apiserver made; a generated ``watch`` gets ``timeoutSeconds=1`` so that it ends. Any 5xx fails
the test, naming the operation and the request that caused it.

What it does not reach: most generated bodies are refused early (415 for a patch media type the
handler does not take, 404 for a random namespace, 400/422 for invalid objects), so this guards
the refusal paths and the parsers far more than the deep handling of valid objects.

Bounded: ``EXAMPLES`` requests per operation, no shrinking, no example database (nothing is
written outside ``tmp_path``), one kept-alive connection: about a minute on a shared two-core
machine (the timeout leaves room for a loaded one).
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from kubelite.testing import ComponentProcess, Processes

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

TOKEN = "schemathesis-admin-token"
EXAMPLES = 4
"""Generated requests per operation: the core group has about a hundred operations."""


@pytest.fixture(scope="module")
def secure_server(
    session_processes: Processes, tmp_path_factory: pytest.TempPathFactory
) -> ComponentProcess:
    tokens = tmp_path_factory.mktemp("schemathesis") / "tokens.csv"
    tokens.write_text(f'{TOKEN},fuzzer,uid-fuzzer,"system:masters"\n')
    return session_processes.apiserver(
        store="memory://", secure=True, args=[f"--token-auth-file={tokens}"]
    )


def _core_schema(base_url: str, context: ssl.SSLContext) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base_url}/openapi/v3/api/v1", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, context=context, timeout=60) as response:
        schema: dict[str, Any] = json.loads(response.read())
    return schema


def test_generated_requests_with_a_valid_token_get_no_5xx(
    secure_server: ComponentProcess,
) -> None:
    assert secure_server.state_dir is not None
    ca = secure_server.state_dir / "pki" / "ca.crt"
    base_url = f"https://127.0.0.1:{secure_server.port_of('secure')}"
    schema = schemathesis.openapi.from_dict(
        _core_schema(base_url, ssl.create_default_context(cafile=ca))
    )
    server_errors: list[str] = []
    operations = 0
    session = requests.Session()  # one kept-alive connection, one TLS handshake
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def no_server_error(case: schemathesis.Case) -> None:
            if isinstance(case.query, dict) and "watch" in case.query:
                case.query["timeoutSeconds"] = 1  # a watch ends, whatever else was generated
            response = case.call(
                base_url=base_url,
                session=session,
                headers={"Authorization": f"Bearer {TOKEN}"},
                verify=str(ca),
                timeout=30,
            )
            if response.status_code >= 500:
                server_errors.append(
                    f"{case.operation.label}: {response.status_code} for "
                    f"{response.request.method} {response.request.url} — {response.text[:300]}"
                )

        no_server_error()
    session.close()
    assert operations > 50, "the core group's document lists its operations"
    assert server_errors == []
