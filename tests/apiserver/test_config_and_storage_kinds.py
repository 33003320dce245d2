"""ConfigMap, Secret, ServiceAccount, StorageClass, PersistentVolume and PersistentVolumeClaim
through the real apiserver app: the defaults a client reads back, the 422 causes Kubernetes gives
(``ValidateConfigMap``, ``ValidateSecret``, ``ValidateStorageClass``,
``ValidatePersistentVolume(Claim)`` and their update rules), ``stringData`` merged and never
returned, ``immutable`` enforced, the default ``local-path`` class from bootstrap and the
DefaultStorageClass admission of claims, and the Table columns kubectl prints."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.apiserver.conftest import Api

Obj = dict[str, Any]

CMS = "/api/v1/namespaces/default/configmaps"
SECRETS = "/api/v1/namespaces/default/secrets"
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"
PVS = "/api/v1/persistentvolumes"
SCS = "/apis/storage.k8s.io/v1/storageclasses"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def causes(answer: Obj) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in answer["details"]["causes"]]


async def refused(api: Api, method: str, path: str, body: Any, **kw: Any) -> Obj:
    if method == "PATCH":
        status, answer = await api.patch(path, body, **kw)
    else:
        status, answer = await api.request(method, path, body, **kw)
    assert status == 422, answer
    assert answer["reason"] == "Invalid" and answer["code"] == 422, answer
    return answer


async def merge(api: Api, path: str, doc: Obj) -> Obj:
    status, answer = await api.patch(path, doc)
    assert 200 <= status < 300, answer
    assert isinstance(answer, dict)
    return answer


def claim(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            **spec,
        },
    }


# -- ConfigMap ---------------------------------------------------------------------------------


async def test_configmap_keys_base64_and_size_are_validated(api: Api) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bad"},
        "data": {"a b": "1", "..x": "2", "dup": "3"},
        "binaryData": {"dup": "AAE=", "raw": "not base64!"},
    }
    answer = await refused(api, "POST", CMS, body)
    got = dict(causes(answer))
    assert set(got) == {"data[a b]", "data[..x]", "data[dup]", "binaryData[raw]"}
    assert got["data[a b]"].startswith(
        'Invalid value: "a b": a valid config key must consist of alphanumeric characters'
    )
    assert got["data[..x]"] == "Invalid value: \"..x\": must not start with '..'"
    assert got["data[dup]"] == 'Invalid value: "dup": duplicate of key present in binaryData'
    assert got["binaryData[raw]"].endswith("illegal base64 data at input byte 3")

    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}}
    big["data"] = {"a": "x" * (600 * 1024), "b": "y" * (600 * 1024)}
    answer = await refused(api, "POST", CMS, big)
    assert causes(answer) == [("", "Too long: must have at most 1048576 bytes")]


async def test_immutable_configmap_refuses_changes_but_not_labels(api: Api) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "frozen"},
        "data": {"a": "1"},
        "immutable": True,
    }
    await api.ok("POST", CMS, body)
    answer = await refused(api, "PATCH", f"{CMS}/frozen", {"data": {"a": "2"}})
    assert answer["message"] == (
        'ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when `immutable` is set'
    )
    answer = await refused(api, "PATCH", f"{CMS}/frozen", {"immutable": False})
    assert causes(answer) == [
        ("immutable", "Forbidden: field is immutable when `immutable` is set")
    ]
    patched = await merge(api, f"{CMS}/frozen", {"metadata": {"labels": {"ok": "yes"}}})
    assert patched["metadata"]["labels"] == {"ok": "yes"} and patched["data"] == {"a": "1"}


# -- Secret ------------------------------------------------------------------------------------


async def test_secret_string_data_is_merged_and_never_returned(api: Api) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds"},
        "data": {"user": b64("old"), "keep": b64("k")},
        "stringData": {"user": "admin"},
    }
    created = await api.ok("POST", SECRETS, body)
    assert created["type"] == "Opaque"
    assert "stringData" not in created
    assert created["data"] == {"user": b64("admin"), "keep": b64("k")}
    patched = await merge(api, f"{SECRETS}/creds", {"stringData": {"extra": "v"}})
    assert "stringData" not in patched
    assert patched["data"] == {"user": b64("admin"), "keep": b64("k"), "extra": b64("v")}
    for path in (f"{SECRETS}/creds", SECRETS):
        assert "stringData" not in str(await api.ok("GET", path))
    listed = await api.ok("GET", f"{SECRETS}?fieldSelector=type%3DOpaque")
    assert "creds" in [s["metadata"]["name"] for s in listed["items"]]
    listed = await api.ok("GET", f"{SECRETS}?fieldSelector=type%3Dkubernetes.io/tls")
    assert "creds" not in [s["metadata"]["name"] for s in listed["items"]]


@pytest.mark.parametrize(
    "stype,data,expected",
    [
        ("kubernetes.io/tls", {}, [("data[tls.crt]", "Required value"), ("data[tls.key]", "Required value")]),
        ("kubernetes.io/tls", {"tls.crt": b64("c")}, [("data[tls.key]", "Required value")]),
        ("kubernetes.io/ssh-auth", {}, [("data[ssh-privatekey]", "Required value")]),
        ("kubernetes.io/basic-auth", {}, [("data[username]", "Required value"), ("data[password]", "Required value")]),
        ("kubernetes.io/dockerconfigjson", {}, [("data[.dockerconfigjson]", "Required value")]),
        (
            "kubernetes.io/dockerconfigjson",
            {".dockerconfigjson": b64("[1]")},
            [
                (
                    "data[.dockerconfigjson]",
                    'Invalid value: "<secret contents redacted>": json: cannot unmarshal array '
                    "into Go value of type map[string]interface {}",
                )
            ],
        ),
        (
            "kubernetes.io/service-account-token",
            {},
            [("metadata.annotations[kubernetes.io/service-account.name]", "Required value")],
        ),
    ],
)  # fmt: skip
async def test_secret_types_require_their_keys(
    api: Api, stype: str, data: Obj, expected: list[tuple[str, str]]
) -> None:
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "typed"}, "type": stype}
    answer = await refused(api, "POST", SECRETS, {**body, "data": data})
    assert causes(answer) == expected


async def test_secret_types_with_their_keys_are_accepted_and_type_is_immutable(api: Api) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "basic"},
        "type": "kubernetes.io/basic-auth",
        "stringData": {"username": "u"},
    }
    await api.ok("POST", SECRETS, body)
    answer = await refused(api, "PATCH", f"{SECRETS}/basic", {"type": "Opaque"})
    assert causes(answer) == [("type", 'Invalid value: "Opaque": field is immutable')]
    answer = await refused(api, "PATCH", f"{SECRETS}/basic", {"data": {"x": "%%%"}})
    assert causes(answer) == [
        (
            "data[x]",
            'Invalid value: "<secret contents redacted>": illegal base64 data at input byte 0',
        )
    ]


# -- storage -----------------------------------------------------------------------------------


async def test_bootstrap_creates_the_default_local_path_class(api: Api) -> None:
    sc = await api.ok("GET", f"{SCS}/local-path")
    assert sc["provisioner"] == "kubelite.io/local-path"
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"
    assert sc["reclaimPolicy"] == "Delete"
    assert sc["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    table = await api.ok("GET", SCS, headers=TABLE)
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == [
        "Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age",
    ]  # fmt: skip
    (row,) = table["rows"]
    assert row["cells"][:5] == [
        "local-path (default)", "kubelite.io/local-path", "Delete", "WaitForFirstConsumer", False,
    ]  # fmt: skip


async def test_claims_get_the_default_class_unless_they_name_one(api: Api) -> None:
    plain = await api.ok("POST", PVCS, claim("plain"))
    assert plain["spec"]["storageClassName"] == "local-path"
    assert plain["spec"]["volumeMode"] == "Filesystem"
    assert plain["status"] == {"phase": "Pending"}
    none = await api.ok("POST", PVCS, claim("no-class", storageClassName=""))
    assert none["spec"]["storageClassName"] == ""
    named = await api.ok("POST", PVCS, claim("named", storageClassName="fast"))
    assert named["spec"]["storageClassName"] == "fast"

    # a newer default wins; with no default at all, nothing is assigned
    newer = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": "zz-newer",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "example.com/x",
    }
    newer_sc = await api.ok("POST", SCS, newer)
    assert newer_sc["reclaimPolicy"] == "Delete" and newer_sc["volumeBindingMode"] == "Immediate"
    local = await api.ok("GET", f"{SCS}/local-path")
    newer_claim = await api.ok("POST", PVCS, claim("second"))
    if newer_sc["metadata"]["creationTimestamp"] > local["metadata"]["creationTimestamp"]:
        assert newer_claim["spec"]["storageClassName"] == "zz-newer"
    else:  # same second: the first by name
        assert newer_claim["spec"]["storageClassName"] == "local-path"
    for name in ("zz-newer", "local-path"):
        await api.ok("DELETE", f"{SCS}/{name}")
    orphan = await api.ok("POST", PVCS, claim("orphan"))
    assert "storageClassName" not in orphan["spec"]


async def test_claim_spec_is_immutable_except_binding_and_expansion(api: Api) -> None:
    await api.ok("POST", PVCS, claim("data"))
    answer = await refused(
        api, "PATCH", f"{PVCS}/data", {"spec": {"accessModes": ["ReadWriteMany"]}}
    )
    assert causes(answer) == [
        (
            "spec",
            "Forbidden: spec is immutable after creation except resources.requests and "
            "volumeAttributesClassName for bound claims",
        )
    ]
    # unbound: the request cannot grow yet
    grow = {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    await refused(api, "PATCH", f"{PVCS}/data", grow)
    # the PV controller binds it once ...
    bound = await merge(api, f"{PVCS}/data", {"spec": {"volumeName": "pv-1"}})
    assert bound["spec"]["volumeName"] == "pv-1"
    await refused(api, "PATCH", f"{PVCS}/data", {"spec": {"volumeName": "pv-2"}})
    await merge(api, f"{PVCS}/data/status", {"status": {"phase": "Bound"}})
    # ... and a bound claim may grow, never shrink
    grown = await merge(api, f"{PVCS}/data", grow)
    assert grown["spec"]["resources"]["requests"]["storage"] == "2Gi"
    shrink = {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    answer = await refused(api, "PATCH", f"{PVCS}/data", shrink)
    assert causes(answer) == [
        ("spec.resources.requests.storage", "Forbidden: field can not be less than previous value")
    ]


async def test_invalid_volumes_claims_and_classes_get_causes(api: Api) -> None:
    answer = await refused(api, "POST", PVCS, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "x"}})  # fmt: skip
    assert causes(answer) == [
        ("spec.accessModes", "Required value: at least 1 access mode is required"),
        ("spec.resources[storage]", "Required value"),
    ]
    answer = await refused(api, "POST", PVCS, claim("x", accessModes=["ReadWriteAlways"]))
    assert causes(answer) == [
        (
            "spec.accessModes",
            'Unsupported value: "ReadWriteAlways": supported values: "ReadOnlyMany", '
            '"ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"',
        )
    ]
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-bad"},
        "spec": {
            "capacity": {"storage": "0"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Keep",
            "local": {"path": "/data"},
        },
    }
    answer = await refused(api, "POST", PVS, pv)
    assert causes(answer) == [
        ("spec.capacity[storage]", 'Invalid value: "0": must be greater than zero'),
        (
            "spec.persistentVolumeReclaimPolicy",
            'Unsupported value: "Keep": supported values: "Delete", "Recycle", "Retain"',
        ),
        ("spec.nodeAffinity", "Required value: Local volume requires node affinity"),
    ]
    pv["spec"] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    answer = await refused(api, "POST", PVS, pv)
    assert causes(answer) == [("spec", "Required value: must specify a volume type")]
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}}
    answer = await refused(api, "POST", SCS, {**sc, "volumeBindingMode": "Later"})
    assert causes(answer) == [
        ("provisioner", "Required value"),
        (
            "volumeBindingMode",
            'Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer"',
        ),
    ]
    await api.ok("POST", SCS, {**sc, "provisioner": "example.com/s", "parameters": {"a": "1"}})
    answer = await refused(api, "PATCH", f"{SCS}/s", {"parameters": {"a": "2"}})
    assert causes(answer) == [("parameters", "Forbidden: updates to parameters are forbidden.")]


async def test_volume_defaults_status_and_table(api: Api) -> None:
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-host"},
        "spec": {
            "capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
            "hostPath": {"path": "/var/local/pv-data"},
            "storageClassName": "manual",
            "claimRef": {"namespace": "default", "name": "data"},
        },
        "status": {"phase": "Bound"},
    }
    created = await api.ok("POST", PVS, pv)
    assert created["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert created["spec"]["volumeMode"] == "Filesystem"
    assert created["status"]["phase"] == "Pending"  # status is the PV controller's to write
    assert created["status"]["lastPhaseTransitionTime"]
    answer = await refused(api, "PATCH", f"{PVS}/pv-host", {"spec": {"hostPath": {"path": "/x"}}})
    assert causes(answer) == [
        (
            "spec.persistentvolumesource",
            "Forbidden: spec.persistentvolumesource is immutable after creation",
        )
    ]
    await merge(api, f"{PVS}/pv-host/status", {"status": {"phase": "Available"}})
    table = await api.ok("GET", f"{PVS}/pv-host", headers=TABLE)
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == [
        "Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass",
        "VolumeAttributesClass", "Reason", "Age", "VolumeMode",
    ]  # fmt: skip
    assert table["rows"][0]["cells"][:9] == [
        "pv-host", "5Gi", "RWO,RWX", "Retain", "Available", "default/data", "manual", "<unset>", "",
    ]  # fmt: skip
    assert table["rows"][0]["cells"][10] == "Filesystem"
