"""The cluster's PKI: a CA, the certificates it signs, and the service-account signing key.

Why a module of its own, here: the apiserver needs certificates to serve TLS on its secure
port, and ``kubelite up`` needs the same CA to give the admin user and each component a client
certificate; both import this module (``component/`` sits below every service and the
command). It holds kubeadm's layout in one directory (``<state-dir>/pki`` by default)::

    ca.crt ca.key                 the cluster CA (10 years)
    apiserver.crt apiserver.key   the apiserver's serving certificate (1 year; SANs below)
    <name>.crt <name>.key         client certificates: CN = user, O = groups (1 year)
    sa.key sa.pub                 the RSA key pair service-account tokens are signed with

What it does:

* ``ensure_*`` functions create a file pair when it is missing and reuse it otherwise — a
  certificate is re-issued only when it no longer fits (signed by another CA, expiring within
  a day, a serving certificate missing a wanted name, a client certificate naming another
  user or groups);
* every private key is written with mode 0600, every file atomically (a temp file renamed);
* ``issue_*`` with ``force=True`` re-issues a leaf from the same CA (``kubelite certs rotate``).

Keys are ECDSA P-256 (fast to make, accepted by kubectl and the official client); the
service-account key is RSA 2048, since RS256 is what every JWT library verifies.

What it does not do: no certificate revocation, no CSR API, no key-usage policy beyond
serverAuth/clientAuth; a CA key that leaks means a new state dir.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CA_DAYS",
    "LEAF_DAYS",
    "CertificateAuthority",
    "KeyPair",
    "ensure_ca",
    "ensure_client_cert",
    "ensure_serving_cert",
    "ensure_signing_key",
    "read_certificate",
    "write_private",
]

CA_DAYS = 3650
"""The CA lives ten years (kubeadm's)."""
LEAF_DAYS = 365
"""Leaf certificates live one year (kubeadm's); ``kubelite certs rotate`` renews them."""
RENEW_BEFORE = datetime.timedelta(days=1)
"""A certificate expiring sooner than this is re-issued on the next start."""
BACKDATE = datetime.timedelta(minutes=5)
"""``notBefore`` is set this far in the past, so a peer's slightly slow clock accepts it."""


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate file and its private key file."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """The cluster CA, loaded: its files, its certificate and its key."""

    files: KeyPair
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def write_private(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` atomically, the file never readable beyond ``mode``."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _save(files: KeyPair, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    files.cert.parent.mkdir(parents=True, exist_ok=True)
    write_private(files.key, _key_pem(key))
    write_private(files.cert, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)


def _fresh(cert: x509.Certificate) -> bool:
    return cert.not_valid_after_utc - _now() > RENEW_BEFORE


def ensure_ca(directory: Path, *, common_name: str = "kubernetes") -> CertificateAuthority:
    """The CA in ``directory`` (``ca.crt``/``ca.key``), created if missing or expiring."""
    files = KeyPair(directory / "ca.crt", directory / "ca.key")
    if files.cert.exists() and files.key.exists():
        cert = read_certificate(files.cert)
        key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey) and _fresh(cert):
            return CertificateAuthority(files=files, certificate=cert, key=key)
    key = _new_key()
    name = _name(common_name)
    cert = (
        _builder(subject=name, issuer=name, key=key, is_ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _save(files, cert, key)
    return CertificateAuthority(files=files, certificate=cert, key=key)


def _builder(
    *, subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, is_ca: bool
) -> x509.CertificateBuilder:
    """What a CA and a leaf certificate share: a random serial, backdated validity (``CA_DAYS``
    or ``LEAF_DAYS``), basic constraints and key usage (signing certificates only for a CA)."""
    now = _now()
    days = CA_DAYS if is_ca else LEAF_DAYS
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=is_ca,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def _issue(
    ca: CertificateAuthority,
    *,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    names: Sequence[x509.GeneralName] = (),
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    builder = (
        _builder(subject=subject, issuer=ca.certificate.subject, key=key, is_ca=False)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
    return builder.sign(ca.key, hashes.SHA256()), key


def _signed_by(cert: x509.Certificate, ca: CertificateAuthority) -> bool:
    try:
        cert.verify_directly_issued_by(ca.certificate)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def _general_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _sans(cert: x509.Certificate) -> set[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    ips = {str(ip) for ip in ext.get_values_for_type(x509.IPAddress)}
    return ips | set(ext.get_values_for_type(x509.DNSName))


def ensure_serving_cert(
    ca: CertificateAuthority,
    directory: Path,
    *,
    name: str,
    hosts: Sequence[str],
    force: bool = False,
) -> KeyPair:
    """``<name>.crt``/``.key``: a serverAuth certificate for every name and address in
    ``hosts`` (CN = the first), re-issued when one is missing from it."""
    files = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    wanted = {str(ipaddress.ip_address(h)) if _is_ip(h) else h for h in hosts}
    if not force and files.cert.exists() and files.key.exists():
        cert = read_certificate(files.cert)
        if _fresh(cert) and _signed_by(cert, ca) and wanted <= _sans(cert):
            return files
    cert, key = _issue(
        ca,
        subject=_name(hosts[0] if hosts else name),
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        names=_general_names(hosts),
    )
    _save(files, cert, key)
    return files


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def ensure_client_cert(
    ca: CertificateAuthority,
    directory: Path,
    *,
    name: str,
    user: str,
    groups: Sequence[str] = (),
    force: bool = False,
) -> KeyPair:
    """``<name>.crt``/``.key``: a clientAuth certificate for ``user`` (CN) in ``groups`` (O),
    as Kubernetes' x509 authenticator reads them."""
    files = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    subject = _name(user, sorted(groups))
    if not force and files.cert.exists() and files.key.exists():
        cert = read_certificate(files.cert)
        if _fresh(cert) and _signed_by(cert, ca) and cert.subject == subject:
            return files
    cert, key = _issue(ca, subject=subject, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    _save(files, cert, key)
    return files


def ensure_signing_key(directory: Path) -> KeyPair:
    """``sa.key``/``sa.pub``: the RSA key service-account tokens are signed (and checked) with;
    ``cert`` names the public key file. Never rotated by ``force``: every token would die."""
    files = KeyPair(directory / "sa.pub", directory / "sa.key")
    if files.cert.exists() and files.key.exists():
        return files
    directory.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_private(files.key, _key_pem(key))
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    write_private(files.cert, public, mode=0o644)
    return files
