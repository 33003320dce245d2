"""apiserver.config.k8s.io/v1: ``EncryptionConfiguration``, what ``--encryption-provider-config`` reads.

Why: the same file that configures encryption at rest for kube-apiserver configures it for
kubelite, so an operator's runbook (add a key first, restart, rewrite every Secret, drop the old
key) carries over unchanged.

Shape: ``resources`` is a list of ``{resources: [plural or plural.group, ...], providers:
[...]}``; each provider is exactly one of ``aesgcm``, ``aescbc``, ``secretbox`` (each with
``keys: [{name, secret}]``, the secret base64) or ``identity: {}``. The first provider of a
group encrypts writes; all are tried on reads. Read strictly: an unknown field is an error.

Limits: shapes and the one-provider-per-entry rule only; key sizes and which providers this
apiserver can run are ``services.apiserver.encryption``'s. ``kms`` is not modelled.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from api.meta import KubeModel

__all__ = [
    "AESConfiguration",
    "EncryptionConfiguration",
    "IdentityConfiguration",
    "Key",
    "ProviderConfiguration",
    "ResourceConfiguration",
    "SecretboxConfiguration",
]


class _Strict(KubeModel):
    model_config = ConfigDict(extra="forbid")


class Key(_Strict):
    name: str = Field(min_length=1)
    secret: str = Field(min_length=1)
    """The key's bytes, base64."""


class AESConfiguration(_Strict):
    keys: list[Key] = Field(min_length=1)


class SecretboxConfiguration(_Strict):
    keys: list[Key] = Field(min_length=1)


class IdentityConfiguration(_Strict):
    pass


class ProviderConfiguration(_Strict):
    aesgcm: AESConfiguration | None = None
    aescbc: AESConfiguration | None = None
    secretbox: SecretboxConfiguration | None = None
    identity: IdentityConfiguration | None = None

    def provider(self) -> tuple[str, AESConfiguration | SecretboxConfiguration | None]:
        """The one provider this entry names, and its keys (None for identity)."""
        for name in ("aesgcm", "aescbc", "secretbox"):
            config = getattr(self, name)
            if config is not None:
                return name, config
        return "identity", None

    @model_validator(mode="after")
    def _exactly_one(self) -> ProviderConfiguration:
        named = [
            n for n in ("aesgcm", "aescbc", "secretbox", "identity") if getattr(self, n) is not None
        ]
        if len(named) != 1:
            raise ValueError(
                "each provider must name exactly one of aesgcm, aescbc, secretbox, identity"
            )
        return self


class ResourceConfiguration(_Strict):
    resources: list[str] = Field(min_length=1)
    providers: list[ProviderConfiguration] = Field(min_length=1)


class EncryptionConfiguration(_Strict):
    api_version: Literal["apiserver.config.k8s.io/v1"] = "apiserver.config.k8s.io/v1"
    kind: Literal["EncryptionConfiguration"] = "EncryptionConfiguration"
    resources: list[ResourceConfiguration] = Field(min_length=1)
