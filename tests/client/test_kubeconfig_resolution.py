"""Connection settings resolve as kubectl resolves them: --server wins, else the kubeconfig's
current context (or --context), with relative paths and *-data fields handled."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import pytest

from client.kubeconfig import ClientConfig, KubeconfigError, add_client_arguments, load_kubeconfig

KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: local
clusters:
- name: local
  cluster:
    server: http://127.0.0.1:8080
- name: secure
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: pki/ca.crt
contexts:
- name: local
  context: {cluster: local, user: admin, namespace: team-a}
- name: secure
  context: {cluster: secure, user: kubelet}
users:
- name: admin
  user: {token: abc123}
- name: kubelet
  user:
    tokenFile: token.txt
    client-certificate-data: %s
"""


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    (tmp_path / "token.txt").write_text("from-file\n")
    path = tmp_path / "config"
    path.write_text(KUBECONFIG % base64.b64encode(b"PEM").decode())
    return path


def test_current_context_gives_server_token_and_namespace(kubeconfig: Path) -> None:
    cfg = load_kubeconfig(kubeconfig)
    assert (cfg.server, cfg.token, cfg.namespace) == ("http://127.0.0.1:8080", "abc123", "team-a")


def test_another_context_resolves_relative_paths_and_token_files(kubeconfig: Path) -> None:
    cfg = load_kubeconfig(kubeconfig, context="secure")
    assert cfg.server == "https://127.0.0.1:6443"
    assert cfg.ca_file == str(kubeconfig.parent / "pki" / "ca.crt")
    assert cfg.token == "from-file"
    assert cfg.cert_data == b"PEM"


def test_server_flag_overrides_the_kubeconfig_but_keeps_its_credentials(kubeconfig: Path) -> None:
    cfg = ClientConfig.load(kubeconfig=kubeconfig, server="http://127.0.0.1:9999", qps=20.0)
    assert (cfg.server, cfg.token, cfg.qps) == ("http://127.0.0.1:9999", "abc123", 20.0)


def test_server_alone_needs_no_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert ClientConfig.load(server="http://127.0.0.1:1234").server == "http://127.0.0.1:1234"
    with pytest.raises(KubeconfigError, match="no apiserver"):
        ClientConfig.load()


def test_kubeconfig_env_is_used_when_no_flag(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    assert ClientConfig.load().token == "abc123"


def test_flags_parse_into_a_config(kubeconfig: Path) -> None:
    parser = argparse.ArgumentParser()
    add_client_arguments(parser)
    args = parser.parse_args(
        [
            "--kubeconfig",
            str(kubeconfig),
            "--context",
            "secure",
            "--kube-api-qps",
            "5",
            "--kube-api-burst",
            "7",
        ]
    )
    cfg = ClientConfig.from_args(args)
    assert (cfg.server, cfg.qps, cfg.burst) == ("https://127.0.0.1:6443", 5.0, 7)


def test_unsupported_and_broken_configs_are_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("current-context: x\ncontexts: []\n")
    with pytest.raises(KubeconfigError, match="no context named 'x'"):
        load_kubeconfig(bad)
    with pytest.raises(KubeconfigError, match="http"):
        ClientConfig(server="127.0.0.1:8080")
