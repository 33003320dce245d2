"""Status bodies byte for byte as kube-apiserver writes them; every JSON body ends in a newline.

kube-apiserver encodes with Go's ``json.Encoder``: struct fields in declaration order (kind,
apiVersion, metadata, status, message, reason, details, code), ``details`` present whenever the
error was built with it — ``{}`` for a 404 of an unknown path, which kubectl 1.32's ``debug``
dereferences — and a newline after the body. Some clients compare bodies as text.
"""

from __future__ import annotations

import json

import pytest

from tests.apiserver.conftest import MakeApi
from tests.factories import pod

NOT_FOUND_ROUTE = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
    b'"message":"the server could not find the requested resource","reason":"NotFound",'
    b'"details":{},"code":404}\n'
)

FIELD_ORDER = ["kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code"]


@pytest.mark.parametrize(
    "path",
    [
        "/nothing/here",
        "/api/v1/foos",
        "/apis/nope/v1",
        "/apis/nope/v1/things",
        "/api/v1/namespaces/default/pods/p/ephemeralcontainers",
        "/api/v1/namespaces/default/pods/p/nosuchsubresource",
    ],
)
async def test_unknown_paths_answer_kube_apiservers_exact_404(make_api: MakeApi, path: str) -> None:
    api = await make_api("memory")
    await api.create_pod("p")
    for method in ("GET", "PATCH") if path.startswith("/api/v1/namespaces") else ("GET",):
        async with api.client.request(
            method, path, data=b"{}", headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status == 404
            assert resp.headers["Content-Type"] == "application/json"
            assert await resp.read() == NOT_FOUND_ROUTE, (method, path)


async def test_not_found_object_names_it_in_details(make_api: MakeApi) -> None:
    api = await make_api("memory")
    async with api.client.get("/api/v1/namespaces/default/pods/ghost") as resp:
        raw = await resp.read()
    assert raw == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"pods \\"ghost\\" not found","reason":"NotFound",'
        b'"details":{"name":"ghost","kind":"pods"},"code":404}\n'
    )


async def test_details_only_where_kubernetes_builds_them(make_api: MakeApi) -> None:
    api = await make_api("memory")
    await api.create_pod("p")
    pods = "/api/v1/namespaces/default/pods"
    cases = {
        # NewBadRequest: no details
        ("GET", f"{pods}?limit=x", None): (400, None),
        # NewAlreadyExists / NewConflict / NewInvalid: details with name and kind
        ("POST", pods, json.dumps(pod("p"))): (409, {"name": "p", "kind": "pods"}),
        (
            "PUT",
            f"{pods}/p",
            json.dumps({**pod("p"), "metadata": {"name": "p", "resourceVersion": "1"}}),
        ): (
            409,
            {"name": "p", "kind": "pods"},
        ),
        # NewMethodNotSupported: details (kubelite names no resource there: {})
        ("POST", f"{pods}/p", json.dumps(pod("p"))): (405, {}),
        # RequestEntityTooLarge / UnsupportedMediaType: none
        ("POST", pods, "a=b"): (415, None),
    }
    for (method, path, body), (code, details) in cases.items():
        headers = {
            "Content-Type": "application/x-www-form-urlencoded"
            if body == "a=b"
            else "application/json"
        }
        async with api.client.request(method, path, data=body, headers=headers) as resp:
            raw = await resp.read()
        assert resp.status == code, (method, path, raw)
        assert raw.endswith(b"}\n"), raw
        out = json.loads(raw)
        assert list(out) == [k for k in FIELD_ORDER if k != "details" or details is not None], out
        assert out.get("details") == details, (method, path, out)


async def test_every_json_body_ends_with_a_newline(make_api: MakeApi) -> None:
    api = await make_api("memory")
    pods = "/api/v1/namespaces/default/pods"
    async with api.client.post(pods, json=pod("p")) as resp:
        assert resp.status == 201
        assert (await resp.read()).endswith(b"}\n")
    table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    for path, accept in (
        (f"{pods}/p", "application/json"),
        (pods, "application/json"),
        (f"{pods}?limit=1", "application/json"),
        (f"{pods}/p", table),
        (pods, table),
        ("/apis/apps/v1/namespaces/default/deployments", "application/json"),
    ):
        async with api.client.get(path, headers={"Accept": accept}) as resp:
            raw = await resp.read()
        assert resp.status == 200, raw
        assert raw.endswith(b"}\n") and not raw.endswith(b"\n\n"), (path, accept, raw[-40:])
        json.loads(raw)
