"""Protobuf request bodies (kubectl 1.32+ typed clients) decode to the JSON the JSON path sees.

The captured bodies in ``fixtures/protobuf`` (see its README) are checked against oracles made
without kubelite: kubectl's own ``--dry-run=client -o json`` of the same command, and the pod a
``debug --copy-to`` copied. Hand-built bodies (``_Msg`` below, a dozen-line encoder) pin the
wire-format corners kubectl's captures do not reach, and corrupted bodies must always answer a
4xx ``Status``: the decoder never raises anything else.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from api.errors import BadRequest, StatusError, UnsupportedMediaType
from services.apiserver.protobuf import CONTENT_TYPE, MAGIC, decodable_kinds, decode_object
from tests.apiserver.conftest import Api

FIXTURES = Path(__file__).parent / "fixtures" / "protobuf"

Obj = dict[str, Any]


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def oracle(name: str) -> Obj:
    return _without_nulls(json.loads((FIXTURES / name).read_text()))


def _without_nulls(value: Any) -> Any:
    """Go prints a zero ``metav1.Time`` as ``null``; the decoder leaves the field out."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


# --- a minimal encoder for hand-built bodies -------------------------------------------------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative numbers: two's complement, ten bytes, as Go writes them
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


class _Msg:
    """``_Msg().s(1, "x").v(2, 3).m(3, _Msg()...)`` -> protobuf bytes via ``bytes(msg)``."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def v(self, number: int, value: int) -> _Msg:
        self.buf += _varint(number << 3) + _varint(value)
        return self

    def b(self, number: int, payload: bytes) -> _Msg:
        self.buf += _varint(number << 3 | 2) + _varint(len(payload)) + payload
        return self

    def s(self, number: int, text: str) -> _Msg:
        return self.b(number, text.encode())

    def m(self, number: int, msg: _Msg) -> _Msg:
        return self.b(number, bytes(msg))

    def entry(self, number: int, key: str, value: str | _Msg) -> _Msg:
        item = _Msg().s(1, key)
        item = item.s(2, value) if isinstance(value, str) else item.m(2, value)
        return self.m(number, item)

    def raw(self, data: bytes) -> _Msg:
        self.buf += data
        return self

    def __bytes__(self) -> bytes:
        return bytes(self.buf)


def envelope(api_version: str, kind: str, obj: _Msg | bytes, *, encoding: str = "") -> bytes:
    unknown = _Msg().m(1, _Msg().s(1, api_version).s(2, kind)).b(2, bytes(obj))
    if encoding:
        unknown.s(3, encoding)
    return MAGIC + bytes(unknown)


def meta(name: str) -> _Msg:
    return _Msg().s(1, name)


# --- captured kubectl bodies -----------------------------------------------------------------

DRY_RUN_PAIRS = [
    ("create-namespace-team-a.kubectl-1.32.pb", "create-namespace-team-a.dry-run.json"),
    ("create-deployment-web.pb", "create-deployment-web.dry-run.json"),
    ("create-deployment-sleeper.pb", "create-deployment-sleeper.dry-run.json"),
    ("create-deployment-multi.pb", "create-deployment-multi.dry-run.json"),
]


@pytest.mark.parametrize(("body", "expected"), DRY_RUN_PAIRS, ids=[p[0] for p in DRY_RUN_PAIRS])
def test_kubectl_bodies_decode_to_kubectls_own_json(body: str, expected: str) -> None:
    assert decode_object(fixture(body)) == oracle(expected)


def test_explicit_zero_replicas_survive_so_the_default_of_one_does_not_apply() -> None:
    decoded = decode_object(fixture("create-deployment-multi.pb"))
    assert decoded["spec"]["replicas"] == 0
    assert decoded["metadata"]["namespace"] == "team-a"


def test_kubectl_1_33_sends_the_same_namespace_body() -> None:
    expected = oracle("create-namespace-team-a.dry-run.json")
    expected["metadata"]["name"] = "team-b"
    assert decode_object(fixture("create-namespace-team-b.kubectl-1.33.pb")) == expected


def test_debug_copy_is_the_source_pod_spec_plus_the_debug_container() -> None:
    source = oracle("debug-copy-rich.source-pod.json")
    decoded = decode_object(fixture("debug-copy-rich.pb"))

    expected = copy.deepcopy(source["spec"])
    # What Go's omitempty drops from the copy: an empty env value, a false non-pointer bool.
    empty_env = next(e for e in expected["containers"][0]["env"] if e["name"] == "EMPTY")
    del empty_env["value"]
    assert expected.pop("hostNetwork") is False
    expected["containers"].append(
        {"name": "dbg", "image": "busybox", "resources": {}, "terminationMessagePolicy": "File"}
    )
    assert decoded["spec"] == expected
    assert decoded["metadata"] == {
        "name": "rich-copy",
        "namespace": "default",
        "annotations": source["metadata"]["annotations"],
    }
    assert decoded["status"] == {}
    # A few of the values the comparison covers, spelled out.
    spec = decoded["spec"]
    assert spec["priority"] == -5
    assert spec["terminationGracePeriodSeconds"] == 0
    assert spec["automountServiceAccountToken"] is False
    assert spec["tolerations"][0]["tolerationSeconds"] == 0
    assert spec["containers"][0]["livenessProbe"]["httpGet"]["port"] == "http"
    assert spec["containers"][0]["readinessProbe"]["tcpSocket"]["port"] == 80
    assert {v["name"] for v in spec["volumes"]} >= {"cfg", "sec", "proj", "data", "info"}


def test_debug_node_pod() -> None:
    decoded = decode_object(fixture("debug-node-n1.pb"))
    assert decoded["metadata"]["name"].startswith("node-debugger-n1-")
    assert decoded["spec"] == {
        "volumes": [{"name": "host-root", "hostPath": {"path": "/"}}],
        "containers": [
            {
                "name": "debugger",
                "image": "busybox",
                "resources": {},
                "volumeMounts": [{"name": "host-root", "mountPath": "/host"}],
                "terminationMessagePolicy": "File",
            }
        ],
        "restartPolicy": "Never",
        "nodeName": "n1",
        "hostNetwork": True,
        "hostPID": True,
        "hostIPC": True,
        "tolerations": [{"operator": "Exists"}],
    }


# --- wire-format corners, hand-built ---------------------------------------------------------


def test_go_json_presence_rules() -> None:
    container = (
        _Msg().s(1, "c").s(2, "").m(6, _Msg().s(1, "").v(2, 0).v(3, 0)).v(16, 0).m(8, _Msg())
    )
    spec = (
        _Msg()
        .v(1, 0)  # replicas: *int32, explicit zero kept
        .v(5, 0)  # minReadySeconds: int32 omitempty, dropped
        .v(7, 0)  # paused: bool omitempty, dropped
        .m(3, _Msg().m(2, _Msg().m(2, container).v(4, 0).v(25, 0)))
    )
    body = envelope("apps/v1", "Deployment", _Msg().m(1, meta("d").s(3, "").v(7, 0)).m(2, spec))
    assert decode_object(body) == {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 0,
            "template": {
                "spec": {
                    # containerPort has no omitempty; resources is a present empty struct
                    "containers": [{"name": "c", "ports": [{"containerPort": 0}], "resources": {}}],
                    "terminationGracePeriodSeconds": 0,
                    "priority": 0,
                }
            },
        },
    }


def test_negative_numbers_packed_repeats_and_maps_with_empty_values() -> None:
    security = _Msg().v(4, 1000).v(4, 2000).b(4, _varint(3000) + _varint(4000)).v(2, -1)
    spec = (
        _Msg()
        .m(2, _Msg().s(1, "c"))
        .v(25, -5)
        .v(4, -1)
        .m(14, security)
        .entry(7, "disk", "")
        .entry(7, "zone", "a")
    )
    pod = decode_object(envelope("v1", "Pod", _Msg().m(1, meta("p")).m(2, spec)))
    assert pod["spec"]["priority"] == -5
    assert pod["spec"]["terminationGracePeriodSeconds"] == -1
    assert pod["spec"]["securityContext"] == {
        "supplementalGroups": [1000, 2000, 3000, 4000],
        "runAsUser": -1,
    }
    assert pod["spec"]["nodeSelector"] == {"disk": "", "zone": "a"}


def test_times_quantities_and_int_or_string() -> None:
    t = _Msg().v(1, 1_700_000_000).v(2, 123_456_789)
    lease = _Msg().s(1, "holder").m(3, t).m(4, _Msg()).v(2, 15)
    decoded = decode_object(
        envelope("coordination.k8s.io/v1", "Lease", _Msg().m(1, meta("l").m(8, t)).m(2, lease))
    )
    assert decoded["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert decoded["spec"]["acquireTime"] == "2023-11-14T22:13:20.123456Z"
    assert "renewTime" not in decoded["spec"]  # an empty time message is Go's zero time
    assert decoded["spec"]["leaseDurationSeconds"] == 15

    rolling = _Msg().m(1, _Msg().v(1, 0).v(2, 2)).m(2, _Msg().v(1, 1).s(3, "25%"))
    resources = _Msg().entry(1, "cpu", _Msg().s(1, "500m")).entry(2, "memory", _Msg())
    template = _Msg().m(2, _Msg().m(2, _Msg().s(1, "c").m(8, resources)))
    spec = _Msg().m(4, _Msg().s(1, "RollingUpdate").m(2, rolling)).m(3, template)
    decoded = decode_object(envelope("apps/v1", "Deployment", _Msg().m(1, meta("d")).m(2, spec)))
    assert decoded["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 2, "maxSurge": "25%"},
    }
    container = decoded["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"cpu": "500m"}, "requests": {"memory": ""}}


def test_embedded_structs_are_inlined() -> None:
    volume = _Msg().s(1, "cfg").m(2, _Msg().m(19, _Msg().m(1, _Msg().s(1, "app")).v(3, 420)))
    probe = _Msg().m(1, _Msg().m(1, _Msg().s(1, "true"))).v(4, 10)
    container = _Msg().s(1, "c").m(10, probe)
    ephemeral = _Msg().m(1, _Msg().s(1, "dbg").s(2, "busybox")).s(2, "c")
    spec = _Msg().m(1, volume).m(2, container).m(34, ephemeral)
    pod = decode_object(envelope("v1", "Pod", _Msg().m(1, meta("p")).m(2, spec)))["spec"]
    assert pod["volumes"] == [{"name": "cfg", "configMap": {"name": "app", "defaultMode": 420}}]
    assert pod["containers"][0]["livenessProbe"] == {
        "exec": {"command": ["true"]},
        "periodSeconds": 10,
    }
    assert pod["ephemeralContainers"] == [
        {"name": "dbg", "image": "busybox", "targetContainerName": "c"}
    ]


def test_unknown_fields_of_every_wire_type_are_skipped() -> None:
    unknown = (
        _Msg()
        .v(900, 7)  # varint
        .raw(_varint(901 << 3 | 1) + b"\x01" * 8)  # fixed64
        .raw(_varint(902 << 3 | 5) + b"\x02" * 4)  # fixed32
        .s(903, "a new field")  # length-delimited
    )
    body = envelope(
        "v1", "Namespace", _Msg().m(1, meta("ns").raw(bytes(unknown))).raw(bytes(unknown))
    )
    assert decode_object(body) == {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": "ns"},
    }


def test_not_utf8_strings_print_replacement_characters_as_go_does() -> None:
    body = envelope("v1", "Namespace", _Msg().m(1, _Msg().b(1, b"ab\xff")))
    assert decode_object(body)["metadata"]["name"] == "ab\ufffd"


MALFORMED = [
    ("no magic", b'{"kind":"Pod"}'),
    ("magic only: no kind", MAGIC),
    ("kind missing", MAGIC + bytes(_Msg().m(1, _Msg().s(1, "v1")))),
    ("truncated varint", envelope("v1", "Namespace", b"\x38\xff")),
    ("varint over ten bytes", envelope("v1", "Namespace", b"\x38" + b"\xff" * 11 + b"\x01")),
    ("length past the end", envelope("v1", "Namespace", b"\x0a\x05ab")),
    ("field number zero", envelope("v1", "Namespace", b"\x00\x01")),
    ("group wire type", envelope("v1", "Namespace", b"\x0b")),
    ("varint where a message belongs", envelope("v1", "Namespace", _Msg().v(1, 3))),
    (
        "message where a varint belongs",
        envelope("apps/v1", "Deployment", _Msg().m(2, _Msg().s(1, "x"))),
    ),
    ("truncated fixed64", envelope("v1", "Namespace", b"\x09\x01\x02")),
    ("envelope truncated", MAGIC + b"\x0a\x20\x0a"),
    (
        "time out of range",
        envelope("v1", "Namespace", _Msg().m(1, _Msg().m(8, _Msg().v(1, 1 << 60)))),
    ),
    (
        "fieldsV1 not JSON",
        envelope("v1", "Namespace", _Msg().m(1, _Msg().m(17, _Msg().m(7, _Msg().s(1, "{"))))),
    ),
]


@pytest.mark.parametrize("body", [m[1] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_bodies_are_bad_requests(body: bytes) -> None:
    with pytest.raises(BadRequest):
        decode_object(body)


def test_kinds_without_a_schema_and_compressed_payloads_are_415() -> None:
    with pytest.raises(UnsupportedMediaType, match="Ingress"):
        decode_object(envelope("networking.k8s.io/v1", "Ingress", meta("i")))
    with pytest.raises(UnsupportedMediaType, match="gzip"):
        decode_object(envelope("v1", "Namespace", meta("n"), encoding="gzip"))


def test_every_served_kind_has_a_schema() -> None:
    assert decodable_kinds() >= {
        ("v1", kind)
        for kind in ("Namespace", "Pod", "Node", "Event", "ReplicationController", "Binding")
    } | {
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("coordination.k8s.io/v1", "Lease"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("policy/v1", "PodDisruptionBudget"),
    }


CAPTURES = sorted(p.name for p in FIXTURES.glob("*.pb"))


@pytest.mark.parametrize("name", CAPTURES)
def test_every_truncation_of_a_capture_is_a_clean_answer(name: str) -> None:
    body = fixture(name)
    for cut in range(len(body)):
        try:
            decode_object(body[:cut])
        except StatusError as exc:
            assert exc.code in (400, 415), (cut, exc)


@pytest.mark.parametrize("name", CAPTURES)
def test_random_corruptions_are_clean_answers(name: str) -> None:
    body = bytearray(fixture(name))
    rng = random.Random(name)
    for _ in range(300):
        corrupt = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            corrupt[rng.randrange(len(MAGIC), len(corrupt))] = rng.randrange(256)
        try:
            decoded = decode_object(bytes(corrupt))
        except StatusError as exc:
            assert exc.code in (400, 415)
        else:
            json.dumps(decoded)  # whatever decodes is JSON


# --- through the real server -----------------------------------------------------------------

PROTOBUF_ACCEPT = {"Accept": f"{CONTENT_TYPE},application/json"}


async def post_protobuf(api: Api, path: str, body: bytes) -> tuple[int, Any]:
    return await api.post(path, raw=body, content_type=CONTENT_TYPE, headers=PROTOBUF_ACCEPT)


async def test_server_creates_what_kubectl_sent_as_protobuf(api: Api) -> None:
    status, ns = await post_protobuf(
        api, "/api/v1/namespaces", fixture("create-namespace-team-a.kubectl-1.32.pb")
    )
    assert status == 201, ns
    assert ns["metadata"]["name"] == "team-a" and ns["status"]["phase"] == "Active"

    status, deploy = await post_protobuf(
        api, "/apis/apps/v1/namespaces/team-a/deployments", fixture("create-deployment-multi.pb")
    )
    assert status == 201, deploy
    assert deploy["spec"]["replicas"] == 0  # not defaulted to 1
    assert deploy["spec"]["revisionHistoryLimit"] == 10  # defaults still apply

    # The captured pod names PriorityClass "high" with its value and policy; Priority admission
    # refuses a pod whose class is missing or disagrees with it.
    status, pc = await api.post(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": -5,
            "preemptionPolicy": "Never",
        },
    )
    assert status == 201, pc

    # Strict: the decoder emits no field name the apiserver does not know.
    status, pod = await post_protobuf(
        api, "/api/v1/namespaces/default/pods?fieldValidation=Strict", fixture("debug-copy-rich.pb")
    )
    assert status == 201, pod
    assert pod["spec"]["terminationGracePeriodSeconds"] == 0
    assert [c["name"] for c in pod["spec"]["containers"]] == ["main", "dbg"]


async def test_protobuf_preferring_clients_get_json(api: Api) -> None:
    await post_protobuf(
        api, "/api/v1/namespaces", fixture("create-namespace-team-a.kubectl-1.32.pb")
    )
    async with api.client.get("/api/v1/namespaces/team-a", headers=PROTOBUF_ACCEPT) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("application/json")
        assert (await resp.json())["metadata"]["name"] == "team-a"


async def test_server_answers_a_corrupt_protobuf_body_with_a_400_status(api: Api) -> None:
    body = fixture("create-deployment-web.pb")[:-7]
    status, out = await post_protobuf(api, "/apis/apps/v1/namespaces/default/deployments", body)
    assert status == 400, out
    assert out["kind"] == "Status" and out["reason"] == "BadRequest"
    assert "protobuf" in out["message"]


async def test_kind_in_the_envelope_must_match_the_url(api: Api) -> None:
    status, out = await post_protobuf(
        api, "/api/v1/namespaces/default/pods", fixture("create-deployment-web.pb")
    )
    assert status == 400, out
    assert out["kind"] == "Status"
