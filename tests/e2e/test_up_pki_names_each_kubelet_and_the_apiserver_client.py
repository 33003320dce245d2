"""``kubelite up``'s PKI gives every kubelet a serving certificate and the apiserver a client
certificate for kubelets, both of the cluster CA, and ``kubelite certs rotate`` renews them."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from component import pki
from kubelite import cluster_pki


def _sans(cert: x509.Certificate) -> set[str]:
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    return ips | set(names.get_values_for_type(x509.DNSName))


def _usages(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_kubelets_serve_their_name_and_ip_and_the_apiserver_is_a_master(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = cluster_pki.ensure_cluster_pki(
        tmp_path, nodes=["node1", "node2"], service_cidr="127.130.0.0/20", bind_address="127.0.0.1"
    )
    ca = pki.read_certificate(made.ca.files.cert)
    assert set(made.kubelet_serving) == {"node1", "node2"}
    for node, files in made.kubelet_serving.items():
        cert = pki.read_certificate(files.cert)
        cert.verify_directly_issued_by(ca)
        assert _sans(cert) == {node, "127.0.0.1"}
        assert _usages(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
        assert (files.key.stat().st_mode & 0o777) == 0o600
    client = pki.read_certificate(made.kubelet_client.cert)
    client.verify_directly_issued_by(ca)
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == (
        "kube-apiserver-kubelet-client"
    )
    assert [o.value for o in client.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters"
    ]
    assert _usages(client) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert ipaddress.ip_address(cluster_pki.NODE_IP).is_loopback

    before = made.kubelet_serving["node1"].cert.read_bytes()
    assert cluster_pki.main(["rotate", "--state-dir", str(tmp_path), "--nodes", "2"]) == 0
    assert made.kubelet_serving["node1"].cert.read_bytes() != before
    out = capsys.readouterr().out
    assert f"re-issued {tmp_path / 'pki' / 'kubelet-node2.crt'}" in out
    assert f"re-issued {tmp_path / 'pki' / 'apiserver-kubelet-client.crt'}" in out
