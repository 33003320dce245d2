"""Service-account tokens: the JWTs the TokenRequest API signs and the authenticator checks.

Why a module of its own: signing (``serviceaccounts/token``, ``token_request``) and checking
(``authentication``) must agree on every claim; both read them from here. The claims are
Kubernetes' bound-token claims::

    iss  the issuer (--service-account-issuer)       sub  system:serviceaccount:<ns>:<name>
    aud  the audiences asked for (default: the API's) exp / iat / nbf  seconds since the epoch
    jti  a random id
    kubernetes.io: {namespace, serviceaccount: {name, uid}, pod: {name, uid} | secret: {...}}

signed RS256 with the key of ``--service-account-signing-key-file``, the header's ``kid`` the
unpadded base64url SHA-256 of the public key's DER (as Kubernetes computes it).

What it owns: ``TokenKeys`` (issuer, API audiences, the verifying public keys, the signing
key), ``claims_for``, ``sign`` and ``decode``. ``decode`` checks the signature against every
public key of ``--service-account-key-file``, the issuer, that one audience is the API's, and
the validity window (no leeway); whether the service account and the bound object still exist
is the authenticator's business (it needs the store).

Not here: legacy Secret-based tokens (never issued by kubelite), OIDC discovery documents.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = [
    "DEFAULT_ISSUER",
    "InvalidToken",
    "TokenKeys",
    "claims_for",
    "service_account_username",
]

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
"""kubeadm's ``--service-account-issuer``."""
ALGORITHM = "RS256"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----\n?", re.S)

InvalidToken = jwt.InvalidTokenError
"""What ``decode`` raises for a token that is not one of ours or no longer valid."""


def service_account_username(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def _key_id(public: rsa.RSAPublicKey) -> str:
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()


def _public_keys(path: Path) -> list[rsa.RSAPublicKey]:
    """Every RSA public key in a PEM file (public keys, or private keys whose public half is
    meant), as ``--service-account-key-file`` accepts."""
    keys: list[rsa.RSAPublicKey] = []
    for block in _PEM_BLOCK.finditer(path.read_bytes()):
        pem = block.group(0)
        if b"PRIVATE KEY" in block.group(1):
            private = serialization.load_pem_private_key(pem, password=None)
            if isinstance(private, rsa.RSAPrivateKey):
                keys.append(private.public_key())
        elif block.group(1) == b"PUBLIC KEY":
            public = serialization.load_pem_public_key(pem)
            if isinstance(public, rsa.RSAPublicKey):
                keys.append(public)
    if not keys:
        raise ValueError(f"{path}: no RSA public key in it")
    return keys


@dataclass(frozen=True, slots=True)
class TokenKeys:
    issuer: str
    audiences: tuple[str, ...]
    """The API's audiences (``--api-audiences``, default the issuer): a token must name one."""
    public_keys: tuple[rsa.RSAPublicKey, ...]
    signing_key: rsa.RSAPrivateKey | None = None

    @classmethod
    def load(
        cls,
        *,
        issuer: str,
        audiences: Sequence[str],
        key_files: Sequence[Path],
        signing_key_file: Path | None,
    ) -> TokenKeys:
        """Read the keys; the signing key's public half verifies too. ``ValueError`` names a
        file that holds no usable key."""
        signing: rsa.RSAPrivateKey | None = None
        if signing_key_file is not None:
            key = serialization.load_pem_private_key(signing_key_file.read_bytes(), password=None)
            if not isinstance(key, rsa.RSAPrivateKey):
                raise ValueError(f"{signing_key_file}: not an RSA private key")
            signing = key
        publics = [k for path in key_files for k in _public_keys(path)]
        if signing is not None:
            publics.append(signing.public_key())
        return cls(
            issuer=issuer,
            audiences=tuple(audiences) or (issuer,),
            public_keys=tuple(publics),
            signing_key=signing,
        )

    def sign(self, claims: dict[str, Any]) -> str:
        if self.signing_key is None:
            raise RuntimeError("no --service-account-signing-key-file: cannot issue tokens")
        kid = _key_id(self.signing_key.public_key())
        return jwt.encode(claims, self.signing_key, algorithm=ALGORITHM, headers={"kid": kid})

    def decode(self, token: str, *, now: float) -> dict[str, Any]:
        """The verified claims of ``token`` at time ``now``; ``InvalidToken`` otherwise."""
        header = jwt.get_unverified_header(token)
        if header.get("alg") != ALGORITHM:
            raise InvalidToken(f"unexpected signing algorithm {header.get('alg')!r}")
        for key in self.public_keys:
            try:
                claims: dict[str, Any] = jwt.decode(
                    token,
                    key,
                    algorithms=[ALGORITHM],
                    audience=list(self.audiences),
                    issuer=self.issuer,
                    options={"require": ["exp", "iat", "sub", "iss", "aud"], "verify_exp": False},
                )
            except jwt.InvalidSignatureError:
                continue
            _check_window(claims, now=now)
            return claims
        raise jwt.InvalidSignatureError("no service-account key verifies the signature")


def _check_window(claims: dict[str, Any], *, now: float) -> None:
    """exp and nbf against the injected clock (PyJWT's own check reads the wall clock)."""
    if now >= float(claims["exp"]):
        raise jwt.ExpiredSignatureError("the token has expired")
    if "nbf" in claims and now < float(claims["nbf"]):
        raise jwt.ImmatureSignatureError("the token is not valid yet")


def claims_for(
    keys: TokenKeys,
    *,
    namespace: str,
    service_account: dict[str, Any],
    audiences: Sequence[str],
    now: float,
    expiration_seconds: int,
    bound: tuple[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Kubernetes' claims for a token of ``service_account``; ``bound`` is ``("pod" |
    "secret", the object)`` the token lives no longer than."""
    meta = service_account["metadata"]
    private: dict[str, Any] = {
        "namespace": namespace,
        "serviceaccount": {"name": meta["name"], "uid": meta.get("uid", "")},
    }
    if bound is not None:
        kind, obj = bound
        private[kind] = {"name": obj["metadata"]["name"], "uid": obj["metadata"].get("uid", "")}
    issued = int(now)
    return {
        "aud": list(audiences) or list(keys.audiences),
        "exp": issued + expiration_seconds,
        "iat": issued,
        "iss": keys.issuer,
        "jti": str(uuid.uuid4()),
        "kubernetes.io": private,
        "nbf": issued,
        "sub": service_account_username(namespace, meta["name"]),
    }
