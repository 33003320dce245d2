"""Every kind of bad request gets a 4xx ``Status`` body, and the server keeps serving."""

from __future__ import annotations

import pytest

from tests.apiserver.conftest import Api
from tests.factories import pod

PODS = "/api/v1/namespaces/default/pods"

BAD_CREATES = [
    # (description, raw body, content type, expected code, expected reason)
    ("malformed json", b'{"metadata": {', "application/json", 400, "BadRequest"),
    ("json array", b"[1, 2]", "application/json", 400, "BadRequest"),
    ("json string", b'"pod"', "application/json", 400, "BadRequest"),
    ("json null", b"null", "application/json", 400, "BadRequest"),
    ("empty body", b"", "application/json", 400, "BadRequest"),
    ("NaN", b'{"metadata":{"name":"p"},"spec":{"x":NaN}}', "application/json", 400, "BadRequest"),
    ("not utf-8", b"\xff\xfe{}", "application/json", 400, "BadRequest"),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, "application/json", 400, "BadRequest"),
    ("malformed yaml", b"metadata: [unclosed", "application/yaml", 400, "BadRequest"),
    ("two yaml documents", b"a: 1\n---\nb: 2\n", "application/yaml", 400, "BadRequest"),
    ("yaml binary", b"metadata: !!binary aGk=\n", "application/yaml", 400, "BadRequest"),
    ("protobuf, no kind", b"k8s\x00", "application/vnd.kubernetes.protobuf", 400, "BadRequest"),
    ("form", b"a=b", "application/x-www-form-urlencoded", 415, "UnsupportedMediaType"),
    (
        "wrong kind",
        b'{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}',
        "application/json",
        400,
        "BadRequest",
    ),
    (
        "wrong type",
        b'{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x"}],"terminationGracePeriodSeconds":"30"}}',
        "application/json",
        422,
        "Invalid",
    ),
    (
        "metadata not an object",
        b'{"metadata":"p","spec":{}}',
        "application/json",
        400,
        "BadRequest",
    ),
    (
        "bad name",
        b'{"metadata":{"name":"Not_Valid"},"spec":{"containers":[{"name":"c","image":"x"}]}}',
        "application/json",
        422,
        "Invalid",
    ),
    (
        "resourceVersion on create",
        b'{"metadata":{"name":"p","resourceVersion":"5"},"spec":{"containers":[{"name":"c","image":"x"}]}}',
        "application/json",
        400,
        "BadRequest",
    ),
]


async def still_serving(api: Api) -> None:
    status, body = await api.get("/healthz")
    assert status == 200 and body == "ok"
    created = await api.ok(
        "POST",
        PODS,
        {
            "metadata": {"generateName": "alive-"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        },
    )
    assert created["metadata"]["name"].startswith("alive-")


@pytest.mark.parametrize(
    ("raw", "content_type", "code", "reason"),
    [case[1:] for case in BAD_CREATES],
    ids=[case[0] for case in BAD_CREATES],
)
async def test_bad_create_bodies(
    api: Api, raw: bytes, content_type: str, code: int, reason: str
) -> None:
    status, out = await api.post(PODS, raw=raw, content_type=content_type)
    assert status == code, out
    assert out["kind"] == "Status" and out["status"] == "Failure"
    assert out["code"] == code and out["reason"] == reason
    await still_serving(api)


async def test_oversized_body_is_413(api: Api) -> None:
    big = b'{"metadata":{"name":"p","annotations":{"a":"' + b"x" * (3 * 1024 * 1024) + b'"}}}'
    status, out = await api.post(PODS, raw=big)
    assert status == 413, out
    assert out["reason"] == "RequestEntityTooLarge"
    assert out["message"] == "Request entity too large: limit is 3145728"
    await still_serving(api)


async def test_invalid_object_lists_field_causes(api: Api) -> None:
    body = pod("p")
    body["spec"]["containers"] = [{"name": "c"}, {"image": "x"}]
    body["spec"]["restartPolicy"] = "Sometimes"
    status, out = await api.post(PODS, body)
    assert status == 422
    fields = {c["field"] for c in out["details"]["causes"]}
    assert {"spec.containers[0].image", "spec.containers[1].name", "spec.restartPolicy"} <= fields
    assert out["message"].startswith('Pod "p" is invalid: [')


async def test_routes_and_methods(api: Api) -> None:
    for path in (
        "/api/v1/foos",
        "/apis/nope/v1/things",
        "/api/v2/pods",
        "/nothing/here",
        f"{PODS}/p/x/y",
    ):
        status, out = await api.get(path)
        assert status == 404 and out["kind"] == "Status", (path, out)
    await api.create_pod("p")
    status, out = await api.request("POST", f"{PODS}/p", pod("p"))
    assert status == 405 and out["reason"] == "MethodNotAllowed"
    status, out = await api.request("PUT", PODS, pod("p"))
    assert status == 405
    status, out = await api.get("/api/v1/namespaces/default/bindings")
    assert status == 405
    status, out = await api.request("POST", "/api/v1/pods", pod("q"))
    assert status == 405
    await still_serving(api)


async def test_bad_patches(api: Api) -> None:
    await api.create_pod("p")
    path = f"{PODS}/p"
    status, out = await api.request("PATCH", path, raw=b'{"a":1}', content_type="application/json")
    assert status == 415
    status, out = await api.request(
        "PATCH", path, raw=b"{bad", content_type="application/merge-patch+json"
    )
    assert status == 400
    status, out = await api.request(
        "PATCH", path, raw=b'{"op":"add"}', content_type="application/json-patch+json"
    )
    assert status == 400
    status, out = await api.request(
        "PATCH",
        path,
        raw=b'[{"op":"test","path":"/metadata/name","value":"q"}]',
        content_type="application/json-patch+json",
    )
    assert 400 <= status < 500 and out["kind"] == "Status"
    status, out = await api.patch(path, {"metadata": {"name": "other"}})
    assert status == 400
    status, out = await api.patch(path, {"spec": {"restartPolicy": "Sometimes"}})
    assert status == 422
    status, out = await api.request(
        "PATCH", path, raw=b'"x"', content_type="application/strategic-merge-patch+json"
    )
    assert status == 400
    status, out = await api.patch("/api/v1/namespaces/default/pods/ghost", {"metadata": {}})
    assert status == 404
    await still_serving(api)


async def test_bad_query_parameters(api: Api) -> None:
    for query in (
        "watch=maybe",
        "limit=x",
        "timeoutSeconds=soon",
        "labelSelector=a%20in%20(",
        "includeObject=All",
    ):
        status, out = await api.get(f"{PODS}?{query}")
        assert status == 400, (query, out)
        assert out["kind"] == "Status"
    status, out = await api.delete(f"{PODS}/x?gracePeriodSeconds=soon")
    assert status == 400
    status, out = await api.delete(f"{PODS}/x", raw=b"{bad")
    assert status == 400
    status, out = await api.delete(f"{PODS}/x", {"propagationPolicy": "Sideways"})
    assert status == 400
    await still_serving(api)


async def test_malformed_shapes_in_patches_are_4xx_not_500(api: Api) -> None:
    """Found by fuzzing: shapes the strategy code must not trip over before validation."""
    await api.create_pod("p")
    await api.patch(f"{PODS}/p", {"metadata": {"finalizers": ["example.com/x"]}})
    await api.request("POST", f"{PODS}/p/binding", {"target": {"kind": "Node", "name": "n1"}})
    await api.delete(f"{PODS}/p")  # terminating: the finalizer check on updates is live
    for path, patch in (
        (f"{PODS}/p/status", {"status": [1]}),
        (f"{PODS}/p", {"metadata": {"finalizers": True}}),
        (f"{PODS}/p", {"spec": {"containers": "x"}}),
    ):
        for kind in ("merge", "strategic"):
            status, out = await api.patch(path, patch, kind=kind)
            assert 400 <= status < 500, (path, patch, kind, out)
    await still_serving(api)


@pytest.mark.parametrize(
    ("raw", "content_type", "code"),
    [
        (b'{"metadata":{"name":"p","annotations":{"a":"x\\ud800y"}},', "application/json", 201),
        (b'{"metadata":{"name":"p","annotations":{"a":"x\\udfffy"}},', "", 201),
        (b'{"metadata":{"name":"p","annotations":{"\\udfff":"x"}},', "application/json", 422),
        (b'metadata: {name: p, annotations: {a: "x\\ud800y"}}\n', "application/yaml", 201),
    ],
    ids=["json value", "no content type", "json key", "yaml"],
)
async def test_lone_surrogates_read_as_replacement_characters(
    api: Api, raw: bytes, content_type: str, code: int
) -> None:
    """Go's JSON decoder reads a lone ``\\ud800`` as U+FFFD; before, storing it was a 500."""
    if raw.startswith(b"{"):
        raw += b'"spec":{"containers":[{"name":"c","image":"x"}]}}'
    else:
        raw += b"spec: {containers: [{name: c, image: x}]}\n"
    status, out = await api.post(PODS, raw=raw, headers={"Content-Type": content_type})
    assert status == code, out
    if code != 201:
        return  # an annotation key of U+FFFD is invalid, as in Kubernetes
    assert out["metadata"]["annotations"]["a"] == "x\ufffdy"
    status, out = await api.request(
        "PATCH",
        f"{PODS}/p",
        raw=b'{"metadata":{"annotations":{"b":"\\udc00"}}}',
        content_type="application/merge-patch+json",
    )
    assert status == 200, out
    assert out["metadata"]["annotations"]["b"] == "\ufffd"
