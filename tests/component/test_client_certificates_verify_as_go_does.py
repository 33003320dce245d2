"""A client certificate checks out as Go's x509.Verify would have it for kube-apiserver's
authenticator: signed by a CA of the pool, both within validity, for client authentication
(or for no declared usage at all); anything else names its reason. And a server context made
by ``request_client_certificates`` takes a certificate from an unknown CA in the handshake.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from component import pki
from component.client_certificates import (
    UntrustedCertificate,
    request_client_certificates,
    verify_client_certificate,
)
from tests.factories import client_cert


def _now() -> datetime.datetime:
    """The moment of the check, not of the import: the certificates are made by the test itself
    (valid from five minutes back), and a file collected long before it runs — a busy machine,
    another xdist worker's backlog — would otherwise check them at a time before they begin."""
    return datetime.datetime.now(datetime.UTC)


def _der(files: pki.KeyPair) -> bytes:
    return pki.read_certificate(files.cert).public_bytes(serialization.Encoding.DER)


@pytest.fixture
def ca(tmp_path: Path) -> pki.CertificateAuthority:
    return pki.ensure_ca(tmp_path / "ca")


def test_a_client_certificate_of_the_pool_verifies(
    ca: pki.CertificateAuthority, tmp_path: Path
) -> None:
    good = pki.ensure_client_cert(ca, tmp_path, name="a", user="alice", groups=["dev"])
    leaf = verify_client_certificate(_der(good), [ca.certificate], now=_now())
    assert leaf == pki.read_certificate(good.cert)
    no_usage = client_cert(ca, tmp_path, user="bob", usage=None)
    verify_client_certificate(_der(no_usage), [ca.certificate], now=_now())
    anything = client_cert(
        ca, tmp_path, user="carol", usage=ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE
    )
    verify_client_certificate(_der(anything), [ca.certificate], now=_now())


def test_an_unknown_authority_is_refused(ca: pki.CertificateAuthority, tmp_path: Path) -> None:
    other = pki.ensure_ca(tmp_path / "other")
    stranger = pki.ensure_client_cert(other, tmp_path, name="s", user="eve")
    with pytest.raises(UntrustedCertificate, match="signed by unknown authority"):
        verify_client_certificate(_der(stranger), [ca.certificate], now=_now())
    verify_client_certificate(_der(stranger), [ca.certificate, other.certificate], now=_now())


@pytest.mark.parametrize("days", [(-3, -1), (1, 3)], ids=["expired", "not-yet-valid"])
def test_a_certificate_outside_its_validity_is_refused(
    ca: pki.CertificateAuthority, tmp_path: Path, days: tuple[int, int]
) -> None:
    files = client_cert(ca, tmp_path, user="late", valid_days=days)
    with pytest.raises(UntrustedCertificate, match="expired or is not yet valid"):
        verify_client_certificate(_der(files), [ca.certificate], now=_now())


def test_a_pool_certificate_outside_its_validity_verifies_nothing(
    ca: pki.CertificateAuthority, tmp_path: Path
) -> None:
    files = pki.ensure_client_cert(ca, tmp_path, name="a", user="alice")
    later = ca.certificate.not_valid_after_utc + datetime.timedelta(days=1)
    with pytest.raises(UntrustedCertificate, match="expired or is not yet valid"):
        verify_client_certificate(_der(files), [ca.certificate], now=later)


def test_a_server_only_certificate_is_refused(ca: pki.CertificateAuthority, tmp_path: Path) -> None:
    serving = client_cert(ca, tmp_path, user="web", usage=ExtendedKeyUsageOID.SERVER_AUTH)
    with pytest.raises(UntrustedCertificate, match="incompatible key usage"):
        verify_client_certificate(_der(serving), [ca.certificate], now=_now())


def test_garbage_is_refused(ca: pki.CertificateAuthority) -> None:
    with pytest.raises(UntrustedCertificate, match="malformed certificate"):
        verify_client_certificate(b"not a certificate", [ca.certificate], now=_now())


async def test_the_handshake_takes_a_certificate_of_an_unknown_authority(
    ca: pki.CertificateAuthority, tmp_path: Path
) -> None:
    serving = pki.ensure_serving_cert(ca, tmp_path, name="server", hosts=["127.0.0.1"])
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(serving.cert, serving.key)
    server.load_verify_locations(cafile=ca.files.cert)
    assert request_client_certificates(server)
    assert server.verify_mode == ssl.CERT_OPTIONAL

    other = pki.ensure_ca(tmp_path / "other")
    stranger = pki.ensure_client_cert(other, tmp_path, name="s", user="eve")
    seen: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.set_result(writer.get_extra_info("ssl_object").getpeercert(binary_form=True))
        writer.close()

    listener = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server)
    async with listener:
        port = listener.sockets[0].getsockname()[1]
        client = ssl.create_default_context(cafile=ca.files.cert)
        client.load_cert_chain(stranger.cert, stranger.key)
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        assert await seen == _der(stranger)
        writer.close()
