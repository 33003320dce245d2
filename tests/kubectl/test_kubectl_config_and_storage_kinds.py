"""Stock kubectl with the configuration and storage kinds: ``create configmap`` from literals,
files and env files; ``create secret generic|tls|docker-registry``; ``create serviceaccount``;
``get cm,secret,sa,sc,pv,pvc`` printing Kubernetes' columns; an immutable ConfigMap and an
invalid Secret refused with the messages kubectl prints from a real cluster."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.kubectl.harness import Kubectl

pytestmark = pytest.mark.kubectl

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "config"


def get_json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(kubectl("get", *args, "-o", "json").stdout)
    return loaded


def rows(output: str) -> list[list[str]]:
    """``kubectl get`` output split into cells (columns are separated by 2+ spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def decoded(data: dict[str, str]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def test_create_configmap_from_literal_file_and_env_file(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "cfg")
    done = kubectl(
        "create", "configmap", "app", "-n", "cfg", "--from-literal=a=1",
        f"--from-file={FIXTURES / 'app.properties'}",
        f"--from-file=renamed={FIXTURES / 'app.properties'}",
    )  # fmt: skip
    assert (done.stdout.strip(), done.stderr) == ("configmap/app created", "")
    properties = (FIXTURES / "app.properties").read_text()
    cm = get_json(kubectl, "configmap", "app", "-n", "cfg")
    assert cm["data"] == {"a": "1", "app.properties": properties, "renamed": properties}

    kubectl("create", "configmap", "env", "-n", "cfg", f"--from-env-file={FIXTURES / 'app.env'}")
    assert get_json(kubectl, "cm", "env", "-n", "cfg")["data"] == {"MODE": "prod", "LEVEL": "3"}

    table = rows(kubectl("get", "cm", "-n", "cfg").stdout)
    assert table[0] == ["NAME", "DATA", "AGE"]
    assert {r[0]: r[1] for r in table[1:]} == {"app": "3", "env": "2"}


def test_create_secrets_generic_tls_and_docker_registry(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "sec")
    kubectl("create", "secret", "generic", "pw", "-n", "sec", "--from-literal=password=s3cret")
    kubectl(
        "create", "secret", "tls", "web-tls", "-n", "sec",
        f"--cert={FIXTURES / 'tls.crt'}", f"--key={FIXTURES / 'tls.key'}",
    )  # fmt: skip
    kubectl(
        "create", "secret", "docker-registry", "pull", "-n", "sec",
        "--docker-server=registry.invalid", "--docker-username=u", "--docker-password=p",
    )  # fmt: skip
    pw = get_json(kubectl, "secret", "pw", "-n", "sec")
    assert pw["type"] == "Opaque" and decoded(pw["data"]) == {"password": "s3cret"}
    tls = get_json(kubectl, "secret", "web-tls", "-n", "sec")
    assert tls["type"] == "kubernetes.io/tls"
    assert decoded(tls["data"])["tls.crt"] == (FIXTURES / "tls.crt").read_text()
    pull = get_json(kubectl, "secret", "pull", "-n", "sec")
    assert pull["type"] == "kubernetes.io/dockerconfigjson"
    config = json.loads(decoded(pull["data"])[".dockerconfigjson"])
    assert config["auths"]["registry.invalid"]["username"] == "u"

    table = rows(kubectl("get", "secrets", "-n", "sec").stdout)
    assert table[0] == ["NAME", "TYPE", "DATA", "AGE"]
    assert {r[0]: r[1:3] for r in table[1:]} == {
        "pw": ["Opaque", "1"],
        "web-tls": ["kubernetes.io/tls", "2"],
        "pull": ["kubernetes.io/dockerconfigjson", "1"],
    }

    bad = kubectl("apply", "-f", "-", check=False, stdin=json.dumps({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad", "namespace": "sec"},
        "type": "kubernetes.io/tls", "stringData": {"tls.crt": "x"},
    }))  # fmt: skip
    assert bad.returncode == 1
    assert 'The Secret "bad" is invalid: data[tls.key]: Required value' in bad.stderr


def test_immutable_configmap_is_refused_by_kubectl(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "frozen")
    kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "f", "namespace": "frozen"},
        "data": {"a": "1"}, "immutable": True,
    }))  # fmt: skip
    done = kubectl(
        "patch", "cm", "f", "-n", "frozen", "--type=merge", "-p", '{"data":{"a":"2"}}', check=False
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        'The ConfigMap "f" is invalid: data: Forbidden: field is immutable when `immutable` is set'
    )


def test_get_sa_sc_pv_pvc_print_kubernetes_columns(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "store")
    kubectl("create", "serviceaccount", "builder", "-n", "store")
    table = rows(kubectl("get", "sa", "builder", "-n", "store").stdout)
    assert table[0] == ["NAME", "SECRETS", "AGE"] and table[1][:2] == ["builder", "0"]

    table = rows(kubectl("get", "sc").stdout)
    assert table[0] == [
        "NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE",
    ]  # fmt: skip
    assert table[1][:5] == [
        "local-path (default)", "kubelite.io/local-path", "Delete", "WaitForFirstConsumer", "false",
    ]  # fmt: skip

    manifests = [
        {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "store-pv"},
            "spec": {
                "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/var/local/pv-store"}, "storageClassName": "manual",
            },
        },
        {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "store"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    ]  # fmt: skip
    kubectl("apply", "-f", "-", stdin="\n".join(json.dumps(m) for m in manifests))
    pvc = get_json(kubectl, "pvc", "data", "-n", "store")
    assert pvc["spec"]["storageClassName"] == "local-path"

    out = kubectl("get", "pv,pvc", "-n", "store", "-o", "wide").stdout
    pv_part, pvc_part = out.strip().split("\n\n")
    pv_rows = [r for r in rows(pv_part) if r[0] in ("NAME", "persistentvolume/store-pv")]
    assert pv_rows[0] == [
        "NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS",
        "VOLUMEATTRIBUTESCLASS", "REASON", "AGE", "VOLUMEMODE",
    ]  # fmt: skip
    cells = pv_rows[1]
    assert cells[:5] == ["persistentvolume/store-pv", "2Gi", "RWO", "Retain", "Pending"]
    assert cells[5:7] == ["manual", "<unset>"] and cells[-1] == "Filesystem"  # CLAIM is empty
    pvc_rows = rows(pvc_part)
    assert pvc_rows[0] == [
        "NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS",
        "VOLUMEATTRIBUTESCLASS", "AGE", "VOLUMEMODE",
    ]  # fmt: skip
    assert pvc_rows[1][:4] == ["persistentvolumeclaim/data", "Pending", "local-path", "<unset>"]
    assert pvc_rows[1][-1] == "Filesystem"
