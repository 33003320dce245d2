"""Secrets encrypted at rest: a real apiserver with ``--encryption-provider-config`` over SQLite.

What is pinned: the store file and its WAL never hold a Secret's value (nor its base64); the
live value carries Kubernetes' ``k8s:enc:aesgcm:v1:<key>:`` prefix; kubectl reads it back equal,
also after a restart; rotation by rewrite (new key first, ``kubectl get secrets -A -o json |
kubectl replace -f -``) leaves only the new key's prefix, and the old key can then go; ``identity``
first writes plaintext and still reads the encrypted; rotation to ``secretbox`` writes
Kubernetes' secretbox form (NaCl opens it with the key); a value no provider can read is a 500
with Kubernetes' message while the server keeps serving; a key of the wrong size is refused
at start.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from nacl.bindings import crypto_secretbox_open
from nacl.secret import SecretBox

from kubelite.testing import ComponentProcess, Processes
from services.apiserver.main import parse_args

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

SECRETS_PREFIX = "/registry/core/secrets/"


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def _write_config(path: Path, *providers: dict[str, Any]) -> None:
    config = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "EncryptionConfiguration",
        "resources": [{"resources": ["secrets"], "providers": list(providers)}],
    }
    path.write_text(json.dumps(config))  # JSON is YAML


def aesgcm(name: str, secret: str) -> dict[str, Any]:
    return {"aesgcm": {"keys": [{"name": name, "secret": secret}]}}


def secretbox(name: str, secret: str) -> dict[str, Any]:
    return {"secretbox": {"keys": [{"name": name, "secret": secret}]}}


def kubectl(server: ComponentProcess, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [
            "kubectl",
            "-s",
            server.url,
            "--cache-dir",
            str(server.state_dir / "kubectl-cache"),
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def read_secret_value(server: ComponentProcess, name: str, key: str) -> str:
    secret = json.loads(kubectl(server, "get", "secret", name, "-o", "json"))
    return base64.b64decode(secret["data"][key]).decode()


def store_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


async def live_values(db: Path) -> dict[str, bytes]:
    """Each live Secret key's latest stored value, read from the file beside the running
    server (the SQLite store's schema: one row per write, the newest per name is current)."""
    return await asyncio.to_thread(_live_values, db)


def _live_values(db: Path) -> dict[str, bytes]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute(
            "SELECT name, value, deleted FROM kv WHERE id IN "
            "(SELECT MAX(id) FROM kv WHERE name LIKE ? GROUP BY name)",
            (SECRETS_PREFIX + "%",),
        ).fetchall()
    return {name: bytes(value) for name, value, deleted in rows if not deleted}


@pytest.fixture
def encrypted(kubelite_processes: Processes, tmp_path: Path) -> tuple[ComponentProcess, Path, Path]:
    config = tmp_path / "encryption.yaml"
    _write_config(config, aesgcm("k1", _key()))
    db = tmp_path / "encrypted.db"
    server = kubelite_processes.apiserver(
        store=f"sqlite:///{db}", args=["--encryption-provider-config", str(config)]
    )
    return server, config, db


async def test_secret_values_never_reach_the_store_file_and_read_back_after_restart(
    encrypted: tuple[ComponentProcess, Path, Path],
) -> None:
    server, _config, db = encrypted
    plaintext = "pw-" + secrets.token_hex(16)
    await asyncio.to_thread(
        kubectl, server, "create", "secret", "generic", "s1", f"--from-literal=password={plaintext}"
    )

    on_disk = store_bytes(db)
    assert plaintext.encode() not in on_disk
    assert base64.b64encode(plaintext.encode()) not in on_disk
    values = await live_values(db)
    assert values[SECRETS_PREFIX + "default/s1"].startswith(b"k8s:enc:aesgcm:v1:k1:")
    assert await asyncio.to_thread(read_secret_value, server, "s1", "password") == plaintext

    await asyncio.to_thread(server.restart)
    assert await asyncio.to_thread(read_secret_value, server, "s1", "password") == plaintext


async def test_rotation_by_rewrite_leaves_only_the_new_keys_prefix(
    encrypted: tuple[ComponentProcess, Path, Path],
) -> None:
    server, config, db = encrypted
    values = {f"s{i}": secrets.token_hex(8) for i in range(3)}
    await asyncio.to_thread(kubectl, server, "create", "namespace", "other")
    for i, (name, value) in enumerate(values.items()):
        ns = "other" if i == 0 else "default"
        await asyncio.to_thread(
            kubectl, server, "create", "secret", "generic", name, "-n", ns,
            f"--from-literal=v={value}",
        )  # fmt: skip
    old_key = json.loads(config.read_text())["resources"][0]["providers"][0]
    _write_config(config, aesgcm("k2", _key()), old_key)
    await asyncio.to_thread(server.restart)

    listed = await asyncio.to_thread(kubectl, server, "get", "secrets", "-A", "-o", "json")
    # --validate=false: kubectl validates a List against /openapi/v2, which kubelite does not
    # serve (only v3); the objects themselves are validated by the server as always
    await asyncio.to_thread(kubectl, server, "replace", "--validate=false", "-f", "-", stdin=listed)

    stored = await live_values(db)
    assert len(stored) == len(values)
    assert all(v.startswith(b"k8s:enc:aesgcm:v1:k2:") for v in stored.values()), stored.keys()

    _write_config(config, json.loads(config.read_text())["resources"][0]["providers"][0])
    await asyncio.to_thread(server.restart)  # the old key is gone now
    for name in ("s1", "s2"):
        assert await asyncio.to_thread(read_secret_value, server, name, "v") == values[name]


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def test_identity_first_writes_plaintext_and_an_unknown_key_is_a_500_not_an_outage(
    encrypted: tuple[ComponentProcess, Path, Path],
) -> None:
    server, config, db = encrypted
    await asyncio.to_thread(
        kubectl, server, "create", "secret", "generic", "sealed", "--from-literal=v=one"
    )
    aes = json.loads(config.read_text())["resources"][0]["providers"][0]
    _write_config(config, {"identity": {}}, aes)
    await asyncio.to_thread(server.restart)
    await asyncio.to_thread(
        kubectl, server, "create", "secret", "generic", "plain", "--from-literal=v=two"
    )
    stored = await live_values(db)
    assert stored[SECRETS_PREFIX + "default/plain"].startswith(b"{")
    assert stored[SECRETS_PREFIX + "default/sealed"].startswith(b"k8s:enc:aesgcm:v1:k1:")
    assert await asyncio.to_thread(read_secret_value, server, "sealed", "v") == "one"

    _write_config(config, aesgcm("other", _key()), {"identity": {}})  # k1 is lost
    await asyncio.to_thread(server.restart)  # starts all the same
    status, body = await asyncio.to_thread(
        _get, server.url + "/api/v1/namespaces/default/secrets/sealed"
    )
    assert status == 500, body
    assert body["reason"] == "InternalError"
    assert body["message"] == (
        "Internal error occurred: unable to transform key "
        f'"{SECRETS_PREFIX}default/sealed": no matching prefix found'
    )
    status, _ = await asyncio.to_thread(
        _get, server.url + "/api/v1/namespaces/default/secrets/plain"
    )
    assert status == 200
    status, _ = await asyncio.to_thread(_get, server.url + "/api/v1/namespaces/default/configmaps")
    assert status == 200


async def test_rotation_to_secretbox_by_rewrite_writes_kubernetes_secretbox_values(
    encrypted: tuple[ComponentProcess, Path, Path],
) -> None:
    """From aesgcm to secretbox by rewrite: every value then is Kubernetes' secretbox form —
    ``k8s:enc:secretbox:v1:<name>:``, a 24-byte nonce, NaCl's box — which NaCl itself opens
    with the configured key, and the aesgcm key can go."""
    server, config, db = encrypted
    values = {f"b{i}": secrets.token_hex(8) for i in range(2)}
    for name, value in values.items():
        await asyncio.to_thread(
            kubectl, server, "create", "secret", "generic", name, f"--from-literal=v={value}"
        )
    old_key = json.loads(config.read_text())["resources"][0]["providers"][0]
    box_key = _key()
    _write_config(config, secretbox("box", box_key), old_key)
    await asyncio.to_thread(server.restart)
    listed = await asyncio.to_thread(kubectl, server, "get", "secrets", "-o", "json")
    await asyncio.to_thread(kubectl, server, "replace", "--validate=false", "-f", "-", stdin=listed)

    stored = await live_values(db)
    prefix = b"k8s:enc:secretbox:v1:box:"
    for name, value in values.items():
        sealed = stored[SECRETS_PREFIX + f"default/{name}"]
        assert sealed.startswith(prefix), sealed[:32]
        body = sealed[len(prefix) :]
        nonce, box = body[: SecretBox.NONCE_SIZE], body[SecretBox.NONCE_SIZE :]
        opened = crypto_secretbox_open(box, nonce, base64.b64decode(box_key))
        assert json.loads(opened)["data"]["v"] == base64.b64encode(value.encode()).decode()
    assert not any(v.encode() in store_bytes(db) for v in values.values())

    _write_config(config, secretbox("box", box_key))
    await asyncio.to_thread(server.restart)  # the aesgcm key is gone now
    for name, value in values.items():
        assert await asyncio.to_thread(read_secret_value, server, name, "v") == value


@pytest.mark.parametrize(
    "provider",
    [
        secretbox("k", base64.b64encode(os.urandom(16)).decode()),
        aesgcm("k", base64.b64encode(b"short").decode()),
        aesgcm("k", "not base64!"),
    ],
    ids=["secretbox-16-bytes", "aesgcm-5-bytes", "not-base64"],
)
def test_keys_of_the_wrong_size_are_refused_at_start(
    tmp_path: Path, provider: dict[str, Any]
) -> None:
    config = tmp_path / "encryption.yaml"
    _write_config(config, provider)
    with pytest.raises(SystemExit):
        parse_args(["--encryption-provider-config", str(config)])
