"""``fieldValidation=Strict|Warn|Ignore`` on create, update and patch, worded as Kubernetes words it.

Strict rejects a body with a field no Kubernetes type declares (400 on create/update, 422 on the
``patch`` field for a patch), Warn (the default) drops it and says so in a ``Warning`` header,
Ignore drops it silently. Every field the official client knows for the served kinds is
declared (so real manifests pass Strict), and the stock kubectl shows all of it as it does
against Kubernetes.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import pytest

from api.registry import REGISTRY
from kubelite.testing import ComponentProcess, Processes
from services.apiserver.fieldvalidation import unknown_fields
from tests.apiserver.conftest import Api, MakeApi
from tests.factories import pod
from tests.kubectl.harness import Kubectl

Obj = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
async def api(make_api: MakeApi) -> Api:
    return await make_api("memory")  # the check runs before the store: one backend is enough


def typo_pod(name: str) -> Obj:
    body = pod(name)
    body["spec"]["containers"][0]["imagee"] = "busybox"
    body["spec"]["restartPolicyy"] = "Never"
    body["metadata"]["labelz"] = {"a": "b"}
    return body


async def send(
    api: Api, method: str, path: str, body: Any, **kw: Any
) -> tuple[int, Any, list[str]]:
    """(status, body, Warning headers)."""
    content_type = kw.pop("content_type", "application/json")
    async with api.client.request(
        method, path, data=json.dumps(body), headers={"Content-Type": content_type}, **kw
    ) as resp:
        return resp.status, await resp.json(), resp.headers.getall("Warning", [])


# -- create and update -------------------------------------------------------------------------


async def test_strict_create_rejects_every_unknown_field_in_document_order(api: Api) -> None:
    status, body, _ = await send(
        api, "POST", PODS, typo_pod("typo"), params={"fieldValidation": "Strict"}
    )
    assert (status, body["reason"]) == (400, "BadRequest")
    assert body["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "metadata.labelz", unknown field "spec.containers[0].imagee", '
        'unknown field "spec.restartPolicyy"'
    )
    assert (await api.get(f"{PODS}/typo"))[0] == 404


async def test_warn_is_the_default_and_drops_the_fields_with_a_warning_each(api: Api) -> None:
    for name, params in (("warned", {"fieldValidation": "Warn"}), ("default", {})):
        status, created, warnings = await send(api, "POST", PODS, typo_pod(name), params=params)
        assert status == 201, created
        assert warnings == [
            '299 - "unknown field \\"metadata.labelz\\""',
            '299 - "unknown field \\"spec.containers[0].imagee\\""',
            '299 - "unknown field \\"spec.restartPolicyy\\""',
        ]
        stored = await api.ok("GET", f"{PODS}/{name}")
        assert "imagee" not in stored["spec"]["containers"][0]
        assert "restartPolicyy" not in stored["spec"] and "labelz" not in stored["metadata"]
        assert created["spec"] == stored["spec"]


async def test_ignore_drops_the_fields_silently(api: Api) -> None:
    status, created, warnings = await send(
        api, "POST", PODS, typo_pod("quiet"), params={"fieldValidation": "Ignore"}
    )
    assert (status, warnings) == (201, [])
    assert "imagee" not in created["spec"]["containers"][0]


async def test_an_unknown_directive_is_invalid(api: Api) -> None:
    status, body, _ = await send(api, "POST", PODS, pod("x"), params={"fieldValidation": "Loose"})
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )
    status, body, _ = await send(
        api, "PATCH", f"{PODS}/x", {}, params={"fieldValidation": "strict"},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    assert status == 422 and body["message"].startswith('PatchOptions.meta.k8s.io "" is invalid')


async def test_update_validates_like_create(api: Api) -> None:
    current = await api.create_pod("updated")
    body = {**current, "spec": {**current["spec"], "nodeNmae": "node1"}}
    status, answer, _ = await send(
        api, "PUT", f"{PODS}/updated", body, params={"fieldValidation": "Strict"}
    )
    assert (status, answer["message"]) == (
        400,
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.nodeNmae"',
    )
    status, answer, warnings = await send(api, "PUT", f"{PODS}/updated", body)
    assert status == 200 and warnings == ['299 - "unknown field \\"spec.nodeNmae\\""']
    assert "nodeNmae" not in answer["spec"]


async def test_other_groups_name_their_own_version(api: Api) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailible": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
    }
    status, body, _ = await send(
        api, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment,
        params={"fieldValidation": "Strict"},
    )  # fmt: skip
    assert (status, body["message"]) == (
        400,
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.strategy.rollingUpdate.maxUnavailible"',
    )


async def test_maps_and_free_form_fields_hold_any_keys(api: Api) -> None:
    body = pod("free", nodeSelector={"anything": "goes"})
    body["metadata"].update(labels={"x": "y"}, annotations={"any.thing/at-all": "1"})
    body["spec"]["containers"][0]["resources"] = {"limits": {"example.com/gpu": "1"}}
    body["spec"]["volumes"] = [{"name": "v", "nfs": {"server": "nfs.local", "path": "/x"}}]
    status, created, warnings = await send(
        api, "POST", PODS, body, params={"fieldValidation": "Strict"}
    )
    assert (status, warnings) == (201, []), created
    assert created["spec"]["volumes"][0]["nfs"] == {"server": "nfs.local", "path": "/x"}


# -- patch ---------------------------------------------------------------------------------------


async def test_strict_patch_is_invalid_on_the_patch_field(api: Api) -> None:
    await api.create_pod("patched")
    patch = {"spec": {"$setElementOrder/containers": [{"name": "main"}],
                      "containers": [{"name": "main", "imagee": "busybox"}]}}  # fmt: skip
    status, body, _ = await send(
        api, "PATCH", f"{PODS}/patched", patch, params={"fieldValidation": "Strict"},
        content_type="application/strategic-merge-patch+json",
    )  # fmt: skip
    assert (status, body["reason"]) == (422, "Invalid")
    detail = 'strict decoding error: unknown field "spec.containers[0].imagee"'
    shown = "map[spec:map[$setElementOrder/containers:[map[name:main]] containers:[map[imagee:busybox name:main]]]]"
    assert body["message"] == f' "" is invalid: patch: Invalid value: "{shown}": {detail}'
    assert body["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": f'Invalid value: "{shown}": {detail}', "field": "patch"}
    ]  # fmt: skip

    status, body, _ = await send(
        api, "PATCH", f"{PODS}/patched", {"spec": {"foo": 1}},
        params={"fieldValidation": "Strict"}, content_type="application/merge-patch+json",
    )  # fmt: skip
    assert status == 422
    assert re.fullmatch(
        r' "" is invalid: patch: Invalid value: "\{.*\}": strict decoding error: '
        r'unknown field "spec.foo"',
        body["message"],
    ), body["message"]


async def test_a_warned_patch_is_written_without_the_field(api: Api) -> None:
    await api.create_pod("warned")
    status, patched, warnings = await send(
        api, "PATCH", f"{PODS}/warned",
        [{"op": "add", "path": "/spec/activeDeadlineSecs", "value": 5}],
        content_type="application/json-patch+json",
    )  # fmt: skip
    assert status == 200 and warnings == ['299 - "unknown field \\"spec.activeDeadlineSecs\\""']
    assert "activeDeadlineSecs" not in patched["spec"]


# -- every field Kubernetes declares is declared -------------------------------------------------

OFFICIAL = {
    "Pod": k8s.V1Pod, "Node": k8s.V1Node, "Namespace": k8s.V1Namespace,
    "Event": k8s.CoreV1Event, "ReplicationController": k8s.V1ReplicationController,
    "Binding": k8s.V1Binding, "Deployment": k8s.V1Deployment, "ReplicaSet": k8s.V1ReplicaSet,
    "Lease": k8s.V1Lease,
}  # fmt: skip
NEWER_THAN_1_32 = {
    ("V1ConfigMapVolumeSource", "defaultUser"), ("V1SecretVolumeSource", "defaultUser"),
    ("V1DownwardAPIVolumeSource", "defaultUser"), ("V1ProjectedVolumeSource", "defaultUser"),
    ("V1KeyToPath", "user"), ("V1DownwardAPIVolumeFile", "user"),
    ("V1EmptyDirVolumeSource", "mode"), ("V1HTTPGetAction", "protocol"), ("V1GRPCAction", "mode"),
}  # fmt: skip
"""Fields of the official client (newer than the Kubernetes kubelite follows) absent from 1.32,
so kubelite need not declare them."""


def maximal(cls: Any, seen: frozenset[str] = frozenset()) -> Any:
    """An object of the official client's type ``cls`` with every field set (recursively)."""
    if cls.__name__ in seen:
        return {}
    obj: Obj = {}
    for attr, wire in cls.attribute_map.items():
        if (cls.__name__, wire) not in NEWER_THAN_1_32:
            obj[wire] = _value(cls.openapi_types[attr], seen | {cls.__name__})
    return obj


def _value(type_name: str, seen: frozenset[str]) -> Any:
    if m := re.fullmatch(r"List\[(.*)\]", type_name):
        return [_value(m.group(1), seen)]
    if m := re.fullmatch(r"Dict\[str, (.*)\]", type_name):
        return {"some-key": _value(m.group(1), seen)}
    model = getattr(k8s, type_name, None)
    if model is not None and hasattr(model, "attribute_map"):
        return maximal(model, seen)
    return {"str": "x", "int": 1, "bool": True, "float": 1.5}.get(type_name, "x")


@pytest.mark.parametrize(("kind", "official"), list(OFFICIAL.items()))
def test_every_field_the_official_client_knows_is_declared(kind: str, official: Any) -> None:
    rt = next(rt for rt in REGISTRY if rt.kind == kind)
    unknown = [u.path for u in unknown_fields(rt.model, maximal(official))]
    assert unknown == []


def test_a_field_the_models_do_not_declare_is_found_at_any_depth() -> None:
    rt = next(rt for rt in REGISTRY if rt.kind == "Deployment")
    obj = maximal(k8s.V1Deployment)
    obj["spec"]["template"]["spec"]["volumes"][0]["configMap"]["itemz"] = []
    obj["spec"]["template"]["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]["topologyKeys"] = "x"
    assert [u.path for u in unknown_fields(rt.model, obj)] == [
        "spec.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKeys",
        "spec.template.spec.volumes[0].configMap.itemz",
    ]


# -- the stock kubectl -----------------------------------------------------------------------------

TYPO = """\
apiVersion: v1
kind: Pod
metadata:
  name: typo
spec:
  containers:
  - name: main
    image: busybox
    imagee: busybox
"""


@pytest.fixture(scope="module")
def apiserver(session_processes: Processes) -> ComponentProcess:
    return session_processes.apiserver(store="memory://")


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="NO kubectl ON THE PATH")
def test_kubectl_strict_by_default_warn_and_false(
    apiserver: ComponentProcess, tmp_path: Path
) -> None:
    kubectl = Kubectl.on(apiserver.url, workdir=tmp_path)

    refused = kubectl("apply", "-f", "-", stdin=TYPO, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Pod in version "v1" cannot '
        'be handled as a Pod: strict decoding error: unknown field "spec.containers[0].imagee"'
    )
    warned = kubectl("apply", "-f", "-", "--validate=warn", stdin=TYPO)
    assert (warned.stdout.strip(), warned.stderr.strip()) == (
        "pod/typo created",
        'Warning: unknown field "spec.containers[0].imagee"',
    )
    quiet = kubectl("create", "-f", "-", "--validate=false", stdin=TYPO.replace("typo", "typo2"))
    assert (quiet.stdout.strip(), quiet.stderr) == ("pod/typo2 created", "")

    # what kubectl's own generators write, and what the server answers, pass Strict
    for generate in (
        ["run", "gen-pod", "--image=nginx", "--port=80", "--env=A=b", "--labels=app=x"],
        ["create", "deployment", "gen-deploy", "--image=nginx", "--replicas=2"],
        ["create", "namespace", "gen-ns"],
    ):
        manifest = kubectl(*generate, "--dry-run=client", "-o", "yaml").stdout
        created = kubectl("apply", "-f", "-", stdin=manifest)
        assert created.stderr == "" and created.stdout.strip().endswith("created")
    for resource in ("pod/gen-pod", "deployment/gen-deploy", "namespace/gen-ns"):
        live = kubectl("get", resource, "-o", "json").stdout
        replaced = kubectl("replace", "-f", "-", stdin=live)
        assert replaced.stderr == "" and replaced.stdout.strip().endswith("replaced")
