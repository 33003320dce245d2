"""Client certificates as Kubernetes takes them: asked for in the handshake, judged after it.

Why: kube-apiserver serves TLS with Go's ``tls.RequestClientCert`` — the handshake asks for a
client certificate and takes whatever comes — and its x509 authenticator verifies the
certificate afterwards; one that does not verify authenticates nobody, so the client gets an
HTTP 401 ``Status`` (or is served by its bearer token), never a broken handshake. Python's
``ssl`` cannot say that: ``CERT_OPTIONAL`` is OpenSSL's ``SSL_VERIFY_PEER`` with OpenSSL's
default verify callback (CPython's ``_ssl`` keeps whatever callback the ``SSL_CTX`` has and
never installs one), and that callback aborts the handshake with an ``unknown ca`` alert on the
first chain error. Loading no CA does not help (the chain then never verifies), and no verify
flag makes an unknown chain acceptable.

What it owns:

* ``request_client_certificates``: gives a server ``ssl.SSLContext`` the verify callback Go's
  ``RequestClientCert`` amounts to — it accepts every chain — by calling OpenSSL's
  ``SSL_CTX_set_verify`` through ``ctypes`` on the context's ``SSL_CTX``. The pointer is the
  first field after the object header of CPython's ``PySSLContext`` (the layout every CPython
  3 release has had, which uvloop and other C extensions rely on too); the OpenSSL functions
  are looked up through ``_ssl``'s own shared object, so they are those of the library the
  context lives in. It answers ``False`` — and changes nothing — where that cannot be checked
  (not CPython, an ``_ssl`` without those symbols, an OpenSSL whose version is not ``ssl``'s,
  or a pointer whose ``SSL_CTX`` does not report the context's own options); the handshake
  then refuses a certificate it cannot verify, as before.
* ``serving_context(cert, key, client_ca)``: the server context the apiserver and the kubelet
  both serve with — TLS 1.2 or newer, their certificate, and (given a client CA) client
  certificates asked for and taken unchecked as above, a warning logged where they cannot be;
  ``peer_certificate(transport)``: the DER leaf a connection's client presented, if any.
* ``verify_client_certificate``: what Go's ``x509.Certificate.Verify`` does for the
  authenticator, given the leaf and the ``--client-ca-file`` pool: the leaf must be signed by
  a certificate of the pool (each is a trust anchor, as in Go's ``Roots``), both must be
  within their validity, and the extended key usages of both must allow client
  authentication (none at all allows everything, as in Go). ``UntrustedCertificate`` says why
  not, in Go's words.

What it does not guarantee: only the leaf reaches Python (``SSLObject`` gives no peer chain
before Python 3.13), so an intermediate CA must be in the pool file itself, not only in the
client's presented chain; no revocation (CRL, OCSP), as Kubernetes has none. The handshake
still proves the client holds the certificate's private key (OpenSSL checks its
``CertificateVerify`` whatever the callback says).
"""

from __future__ import annotations

import asyncio
import ctypes
import datetime
import logging
import ssl
import sys
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID

__all__ = [
    "UntrustedCertificate",
    "load_authorities",
    "peer_certificate",
    "request_client_certificates",
    "serving_context",
    "verify_client_certificate",
]

log = logging.getLogger(__name__)

INCOMPATIBLE_USAGE = "x509: certificate specifies an incompatible key usage"
SSL_VERIFY_PEER = 1
"""OpenSSL's flag: ask for the peer's certificate (not ``..._FAIL_IF_NO_PEER_CERT``)."""

_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def _accept(_preverify_ok: int, _store: int | None) -> int:
    return 1


_ACCEPT_EVERY_CHAIN = _VerifyCallback(_accept)
"""OpenSSL's verify callback, as a C function kept alive for the process's lifetime."""


class UntrustedCertificate(Exception):
    """A client certificate that authenticates nobody; the message says why."""


def _openssl() -> ctypes.CDLL | None:
    """The OpenSSL that ``_ssl`` uses (``dlsym`` through ``_ssl`` searches its dependencies)."""
    if sys.implementation.name != "cpython":
        return None
    import _ssl

    try:
        library = ctypes.CDLL(_ssl.__file__)
        library.OpenSSL_version_num.restype = ctypes.c_ulong
        library.SSL_CTX_get_options.restype = ctypes.c_uint64
        library.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
        library.SSL_CTX_get_verify_mode.restype = ctypes.c_int
        library.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
        library.SSL_CTX_set_verify.restype = None
        library.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback]
    except (OSError, AttributeError):
        return None
    if library.OpenSSL_version_num() != ssl.OPENSSL_VERSION_NUMBER:
        return None
    return library


def request_client_certificates(context: ssl.SSLContext) -> bool:
    """Make server ``context`` ask for a client certificate and accept any in the handshake,
    leaving its verification to ``verify_client_certificate``. ``False``: not possible here;
    ``context`` is as it was."""
    library = _openssl()
    if library is None:
        return False
    context.verify_mode = ssl.CERT_OPTIONAL
    address = id(context) + object.__basicsize__  # PySSLContext: PyObject_HEAD, SSL_CTX *ctx
    ssl_ctx = ctypes.c_void_p.from_address(address).value
    if not ssl_ctx or library.SSL_CTX_get_options(ssl_ctx) != context.options:
        return False
    if library.SSL_CTX_get_verify_mode(ssl_ctx) != SSL_VERIFY_PEER:
        return False
    library.SSL_CTX_set_verify(ssl_ctx, SSL_VERIFY_PEER, _ACCEPT_EVERY_CHAIN)
    return True


def serving_context(
    cert_file: str | Path, key_file: str | Path, client_ca_file: str | Path | None
) -> ssl.SSLContext:
    """A server's TLS context; with ``client_ca_file``, client certificates requested."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file is not None:
        context.load_verify_locations(cafile=client_ca_file)
        context.verify_mode = ssl.CERT_OPTIONAL
        if not request_client_certificates(context):
            log.warning(
                "this Python's ssl cannot take an unverified client certificate: the TLS "
                "handshake refuses one that does not chain to --client-ca-file (not a 401)"
            )
    return context


def peer_certificate(transport: asyncio.BaseTransport | None) -> bytes | None:
    """The DER certificate the client of ``transport`` presented (None: none, or not TLS)."""
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
        return None
    return ssl_object.getpeercert(binary_form=True) or None


def load_authorities(path: Path) -> tuple[x509.Certificate, ...]:
    """The certificates of a PEM bundle (``--client-ca-file``); ``ValueError`` if it has none."""
    return tuple(x509.load_pem_x509_certificates(path.read_bytes()))


def _allows_client_auth(cert: x509.Certificate) -> bool:
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True
    return (
        ExtendedKeyUsageOID.CLIENT_AUTH in usages
        or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usages
    )


def _check_validity(cert: x509.Certificate, now: datetime.datetime) -> None:
    if now < cert.not_valid_before_utc or now > cert.not_valid_after_utc:
        raise UntrustedCertificate(
            f"x509: certificate has expired or is not yet valid: current time "
            f"{now:%Y-%m-%dT%H:%M:%SZ} is outside {cert.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ}"
            f"..{cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
        )


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def verify_client_certificate(
    der: bytes, authorities: Sequence[x509.Certificate], *, now: datetime.datetime
) -> x509.Certificate:
    """The leaf certificate ``der``, once it checks out against ``authorities`` at ``now``
    (an aware datetime); ``UntrustedCertificate`` otherwise."""
    try:
        leaf = x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise UntrustedCertificate(f"x509: malformed certificate: {exc}") from None
    _check_validity(leaf, now)
    if not _allows_client_auth(leaf):
        raise UntrustedCertificate(INCOMPATIBLE_USAGE)
    why = "x509: certificate signed by unknown authority"
    for authority in authorities:
        if not _issued_by(leaf, authority):
            continue
        try:
            _check_validity(authority, now)
        except UntrustedCertificate as exc:
            why = str(exc)
            continue
        if _allows_client_auth(authority):
            return leaf
        why = INCOMPATIBLE_USAGE
    raise UntrustedCertificate(why)
