"""ServiceAccount admission on pod create, as Kubernetes' plugin does it: the account defaults to
``default`` (``serviceAccount`` mirrored), a named account must exist (403 with Kubernetes'
message), and the ``kube-api-access-<5>`` projected volume — token, ``ca.crt``, ``namespace`` —
is added and mounted read-only at ``/var/run/secrets/kubernetes.io/serviceaccount`` in every
init and app container unless the pod or its account turns automount off. Also: the account's
``imagePullSecrets``, ``kubernetes.io/enforce-mountable-secrets``, mirror pods, and the
deliberate differences (no ``default`` account or no signing key: no token volume)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from component import pki
from tests.apiserver.conftest import Api, MakeApi

Obj = dict[str, Any]

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
PODS = "/api/v1/namespaces/default/pods"
ACCOUNTS = "/api/v1/namespaces/default/serviceaccounts"

TOKEN_VOLUME_SOURCE = {
    "defaultMode": 420,
    "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {
            "downwardAPI": {
                "items": [
                    {
                        "path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                    }
                ]
            }
        },
    ],
}
"""What ``kubectl get pod -o yaml`` shows of a kube-api-access volume in Kubernetes 1.22+."""


@pytest.fixture
async def api(make_api: MakeApi, tmp_path: Path) -> Api:
    key = pki.ensure_signing_key(tmp_path).key
    api = await make_api("memory", service_account_signing_key_file=key)
    status, _ = await api.post(ACCOUNTS, {"metadata": {"name": "default"}})
    assert status == 201
    return api


def pod(name: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


async def create(api: Api, body: Obj) -> Obj:
    status, created = await api.post(PODS, body)
    assert status == 201, created
    return created


def token_volumes(created: Obj) -> list[Obj]:
    return [v for v in created["spec"].get("volumes") or [] if v["name"].startswith("kube-api")]


async def test_a_pod_gets_default_and_the_token_volume_in_every_container(api: Api) -> None:
    created = await create(
        api,
        pod(
            "web",
            initContainers=[{"name": "init", "image": "busybox"}],
            containers=[
                {"name": "main", "image": "busybox"},
                {
                    "name": "own",
                    "image": "busybox",
                    "volumeMounts": [{"name": "mine", "mountPath": MOUNT_PATH}],
                },
            ],
            volumes=[{"name": "mine", "emptyDir": {}}],
        ),
    )
    spec = created["spec"]
    assert spec["serviceAccountName"] == spec["serviceAccount"] == "default"
    [volume] = token_volumes(created)
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", volume["name"])
    assert volume["projected"] == TOKEN_VOLUME_SOURCE
    mount = {"name": volume["name"], "readOnly": True, "mountPath": MOUNT_PATH}
    assert spec["initContainers"][0]["volumeMounts"] == [mount]
    assert spec["containers"][0]["volumeMounts"] == [mount]
    # a container that mounts something at the path already keeps its own
    assert spec["containers"][1]["volumeMounts"] == [{"name": "mine", "mountPath": MOUNT_PATH}]


async def test_the_deprecated_service_account_field_is_read_and_mirrored(api: Api) -> None:
    assert (await api.post(ACCOUNTS, {"metadata": {"name": "robot"}}))[0] == 201
    created = await create(api, pod("old-style", serviceAccount="robot"))
    assert created["spec"]["serviceAccountName"] == created["spec"]["serviceAccount"] == "robot"


async def test_a_missing_account_is_refused_as_kubernetes_refuses_it(api: Api) -> None:
    status, body = await api.post(PODS, pod("lost", serviceAccountName="robot"))
    assert status == 403
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'pods "lost" is forbidden: error looking up service account default/robot: '
        'serviceaccount "robot" not found'
    )


async def test_automount_false_on_the_pod_or_the_account_leaves_the_volume_out(
    api: Api,
) -> None:
    off = await create(api, pod("off", automountServiceAccountToken=False))
    assert token_volumes(off) == []
    assert "volumeMounts" not in off["spec"]["containers"][0]

    quiet = {"metadata": {"name": "quiet"}, "automountServiceAccountToken": False}
    assert (await api.post(ACCOUNTS, quiet))[0] == 201
    assert token_volumes(await create(api, pod("q", serviceAccountName="quiet"))) == []
    # the pod's word wins over its account's
    wants = pod("q2", serviceAccountName="quiet", automountServiceAccountToken=True)
    assert len(token_volumes(await create(api, wants))) == 1


async def test_an_existing_token_volume_is_kept(api: Api) -> None:
    own = {"name": "kube-api-access-mine", "projected": TOKEN_VOLUME_SOURCE}
    created = await create(api, pod("kept", volumes=[own]))
    assert [v["name"] for v in created["spec"]["volumes"]] == ["kube-api-access-mine"]
    assert created["spec"]["containers"][0]["volumeMounts"][0]["name"] == "kube-api-access-mine"


async def test_the_accounts_image_pull_secrets_and_mountable_secrets(api: Api) -> None:
    account = {
        "metadata": {
            "name": "strict",
            "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"},
        },
        "secrets": [{"name": "allowed"}],
        "imagePullSecrets": [{"name": "registry"}],
    }
    assert (await api.post(ACCOUNTS, account))[0] == 201
    created = await create(api, pod("pulls", serviceAccountName="strict"))
    assert created["spec"]["imagePullSecrets"] == [{"name": "registry"}]

    secret_volume = [{"name": "s", "secret": {"secretName": "other"}}]
    status, body = await api.post(
        PODS, pod("sneaky", serviceAccountName="strict", volumes=secret_volume)
    )
    assert status == 403
    assert body["message"] == (
        'pods "sneaky" is forbidden: volume with secret.secretName="other" is not allowed '
        "because service account strict does not reference that secret"
    )
    env = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]
    containers = [{"name": "main", "image": "busybox", "env": env}]
    status, body = await api.post(
        PODS, pod("sneaky", serviceAccountName="strict", containers=containers)
    )
    assert status == 403
    assert body["message"] == (
        'pods "sneaky" is forbidden: container main with envVar X referencing '
        'secret.secretName="other" is not allowed because service account strict does not '
        "reference that secret"
    )
    allowed = [{"name": "s", "secret": {"secretName": "allowed"}}]
    await create(api, pod("fine", serviceAccountName="strict", volumes=allowed))


async def test_a_mirror_pod_is_left_alone_and_may_not_name_an_account(api: Api) -> None:
    mirror = pod("static")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    created = await create(api, mirror)
    assert "serviceAccountName" not in created["spec"]
    assert token_volumes(created) == []

    named = pod("static2", serviceAccountName="default")
    named["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
    status, body = await api.post(PODS, named)
    assert status == 403
    assert body["message"] == (
        'pods "static2" is forbidden: a mirror pod may not reference service accounts'
    )


async def test_without_a_default_account_or_a_signing_key_no_token_is_mounted(
    make_api: MakeApi, tmp_path: Path
) -> None:
    key = pki.ensure_signing_key(tmp_path).key
    no_default = await make_api("memory", service_account_signing_key_file=key)
    created = await create(no_default, pod("early"))
    assert created["spec"]["serviceAccountName"] == "default"
    assert token_volumes(created) == []

    unsigned = await make_api("memory")
    assert (await unsigned.post(ACCOUNTS, {"metadata": {"name": "default"}}))[0] == 201
    assert token_volumes(await create(unsigned, pod("plain"))) == []
