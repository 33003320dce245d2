"""Encryption at rest: Secrets (and any resource the config lists) are ciphertext in the store.

Why: the store file (SQLite and its WAL, an etcd data dir, a backup of either) is the easiest
thing on a machine to copy. With ``--encryption-provider-config`` naming an
``EncryptionConfiguration`` (``api.apiserver_config``), the values of the listed resources are
encrypted on their way into the store and decrypted on their way out, exactly at the store
boundary: ``EncryptingStore`` wraps the store, so the watch caches, the handlers and every
response see plaintext, and the store never does.

Stored form, as kube-apiserver writes it: ``k8s:enc:<provider>:v1:<key name>:`` then

* ``aesgcm``: a random 12-byte nonce, then AES-GCM ciphertext and tag; the store key is the
  authenticated data, so a value copied under another key does not decrypt;
* ``aescbc``: a random 16-byte IV, then AES-CBC ciphertext of the PKCS#7-padded value;
* ``secretbox``: a random 24-byte nonce, then NaCl's XSalsa20-Poly1305 box (tag, then
  ciphertext; no authenticated data), with a 32-byte key — Go's ``secretbox.Seal`` output, so
  kube-apiserver and kubelite read each other's values. ``cryptography`` has no XSalsa20:
  PyNaCl (libsodium) seals and opens it;
* ``identity``: the plaintext JSON, no prefix.

The first provider of a resource's list encrypts every write; reads try every provider whose
prefix matches (identity reads anything not starting ``k8s:enc:``), so a value written under an
older key or before encryption was turned on stays readable. **Key rotation by rewrite**: put
the new key first (keep the old one after it), restart, rewrite every Secret
(``kubectl get secrets -A -o json | kubectl replace -f -``), then drop the old key. Turning
encryption off: ``identity: {}`` first, keep the old providers after it, rewrite.

A value no provider can read is an ``InternalError`` 500 for the request that touches it
(``Internal error occurred: unable to transform key "...": no matching prefix found``), as in
Kubernetes; a list that meets one fails whole, as Kubernetes' does. The watch cache is fed
around it (``Undecryptable.readable``): the rest of the resource and the server keep serving,
and the error is logged with the key.

Limits: ``kms`` is not offered. Keys live in the config file in the clear, as they do for
kube-apiserver: protect that file (0600). Nothing re-encrypts values on its own; a rewrite does.
A watch event whose value cannot be decrypted (written by an apiserver with another config) is
logged and left out of the watch.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Protocol

import yaml
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from nacl.exceptions import CryptoError
from nacl.secret import SecretBox
from pydantic import ValidationError

from api.apiserver_config import EncryptionConfiguration, ProviderConfiguration
from api.errors import InternalError
from api.registry import Registry
from store.base import Event, KeyValue, ListResult, RevisionMismatch, Store

__all__ = [
    "EncryptingStore",
    "EncryptionConfigError",
    "StaleValue",
    "Undecryptable",
    "ValueTransformer",
    "load_encryption_config",
]

log = logging.getLogger(__name__)

ENCRYPTED_PREFIX = b"k8s:enc:"
AES_KEY_SIZES = (16, 24, 32)
"""AES-128/192/256, the sizes kube-apiserver accepts for aesgcm and aescbc keys."""
SECRETBOX_KEY_SIZES = (SecretBox.KEY_SIZE,)
"""XSalsa20-Poly1305 takes 32-byte keys only."""
_GCM_NONCE = 12
_CBC_BLOCK = 16


class EncryptionConfigError(ValueError):
    """The encryption configuration cannot be used; the message says why (one line)."""


class Undecryptable(InternalError):
    """A stored value no configured provider can decrypt: a 500 for whoever asked.

    ``readable`` (on a list) is what could be read, the undecryptable items left out; the watch
    cache loads from it so one bad value does not stop a whole resource.
    """

    def __init__(self, key: str, reason: str, *, readable: ListResult | None = None) -> None:
        super().__init__(f'Internal error occurred: unable to transform key "{key}": {reason}')
        self.key = key
        self.readable = readable


@dataclasses.dataclass(frozen=True, slots=True)
class StaleValue(KeyValue):
    """A value read through a provider other than the first (an older key, or identity):
    an update writes it again even when the object did not change, which is what makes
    rotation by rewrite work (Kubernetes' transformers report the same ``stale``)."""


class _Cipher(Protocol):
    def seal(self, plaintext: bytes, *, key: str) -> bytes: ...

    def open(self, ciphertext: bytes, *, key: str) -> bytes:
        """The plaintext; raises ``ValueError`` when this cipher cannot read ``ciphertext``."""
        ...


class _AESGCM:
    def __init__(self, secret: bytes) -> None:
        self._aead = AESGCM(secret)

    def seal(self, plaintext: bytes, *, key: str) -> bytes:
        nonce = os.urandom(_GCM_NONCE)
        return nonce + self._aead.encrypt(nonce, plaintext, key.encode())

    def open(self, ciphertext: bytes, *, key: str) -> bytes:
        if len(ciphertext) < _GCM_NONCE:
            raise ValueError("the stored data was shorter than the required size")
        nonce, sealed = ciphertext[:_GCM_NONCE], ciphertext[_GCM_NONCE:]
        try:
            return self._aead.decrypt(nonce, sealed, key.encode())
        except InvalidTag:
            raise ValueError("cipher: message authentication failed") from None


class _AESCBC:
    def __init__(self, secret: bytes) -> None:
        self._algorithm = algorithms.AES(secret)

    def seal(self, plaintext: bytes, *, key: str) -> bytes:
        iv = os.urandom(_CBC_BLOCK)
        padder = padding.PKCS7(_CBC_BLOCK * 8).padder()
        padded = padder.update(plaintext) + padder.finalize()
        encryptor = Cipher(self._algorithm, modes.CBC(iv)).encryptor()
        return iv + encryptor.update(padded) + encryptor.finalize()

    def open(self, ciphertext: bytes, *, key: str) -> bytes:
        if len(ciphertext) < 2 * _CBC_BLOCK or len(ciphertext) % _CBC_BLOCK:
            raise ValueError("the stored data is not a multiple of the block size")
        iv, body = ciphertext[:_CBC_BLOCK], ciphertext[_CBC_BLOCK:]
        decryptor = Cipher(self._algorithm, modes.CBC(iv)).decryptor()
        padded = decryptor.update(body) + decryptor.finalize()
        unpadder = padding.PKCS7(_CBC_BLOCK * 8).unpadder()
        try:
            return unpadder.update(padded) + unpadder.finalize()
        except ValueError:
            raise ValueError("invalid padding on input") from None


class _SecretBox:
    def __init__(self, secret: bytes) -> None:
        self._box = SecretBox(secret)

    def seal(self, plaintext: bytes, *, key: str) -> bytes:
        return bytes(self._box.encrypt(plaintext, os.urandom(SecretBox.NONCE_SIZE)))

    def open(self, ciphertext: bytes, *, key: str) -> bytes:
        if len(ciphertext) < SecretBox.NONCE_SIZE + SecretBox.MACBYTES:
            raise ValueError("the stored data was shorter than the required size")
        try:
            return self._box.decrypt(ciphertext)
        except CryptoError:  # Kubernetes' words for a box that does not open
            raise ValueError("output array was not large enough for encryption") from None


class _Identity:
    def seal(self, plaintext: bytes, *, key: str) -> bytes:
        return plaintext

    def open(self, ciphertext: bytes, *, key: str) -> bytes:
        if ciphertext.startswith(ENCRYPTED_PREFIX):
            raise ValueError("identity transformer tried to read encrypted data")
        return ciphertext


@dataclasses.dataclass(frozen=True, slots=True)
class _Prefixed:
    prefix: bytes
    cipher: _Cipher


class ValueTransformer:
    """One resource's providers in order: the first writes, any matching one reads."""

    def __init__(self, providers: Iterable[_Prefixed]) -> None:
        self._providers = tuple(providers)
        if not self._providers:
            raise EncryptionConfigError("a resource needs at least one provider")

    @property
    def write_prefix(self) -> bytes:
        return self._providers[0].prefix

    def to_storage(self, plaintext: bytes, *, key: str) -> bytes:
        first = self._providers[0]
        return first.prefix + first.cipher.seal(plaintext, key=key)

    def from_storage(self, stored: bytes, *, key: str) -> tuple[bytes, bool]:
        """The plaintext, and whether it is stale (not in the first provider's form: a write
        should rewrite it); raises ``ValueError`` (the reason) when no provider can read it."""
        errors: list[str] = []
        for index, provider in enumerate(self._providers):
            if not stored.startswith(provider.prefix):
                continue
            try:
                return provider.cipher.open(stored[len(provider.prefix) :], key=key), index > 0
            except ValueError as err:
                if provider.prefix:  # identity's refusal of ciphertext is not a finding
                    errors.append(str(err))
        raise ValueError("; ".join(dict.fromkeys(errors)) or "no matching prefix found")


def _secret(provider: str, name: str, encoded: str, *, sizes: tuple[int, ...]) -> bytes:
    try:
        secret = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise EncryptionConfigError(
            f"{provider} key {name!r}: secret is not valid base64"
        ) from None
    if len(secret) not in sizes:
        raise EncryptionConfigError(
            f"{provider} key {name!r}: secret is {len(secret)} bytes, expected one of "
            f"{', '.join(map(str, sizes))}"
        )
    return secret


_CIPHERS: dict[str, tuple[Callable[[bytes], _Cipher], tuple[int, ...]]] = {
    "aesgcm": (_AESGCM, AES_KEY_SIZES),
    "aescbc": (_AESCBC, AES_KEY_SIZES),
    "secretbox": (_SecretBox, SECRETBOX_KEY_SIZES),
}
"""Each keyed provider's cipher and the key sizes it takes."""


def _providers(entry: ProviderConfiguration) -> list[_Prefixed]:
    kind, config = entry.provider()
    if kind == "identity" or config is None:
        return [_Prefixed(b"", _Identity())]
    make, sizes = _CIPHERS[kind]
    return [
        _Prefixed(
            f"k8s:enc:{kind}:v1:{key.name}:".encode(),
            make(_secret(kind, key.name, key.secret, sizes=sizes)),
        )
        for key in config.keys
    ]


def _store_prefixes(resource: str, registry: Registry) -> list[str]:
    """The store prefix of ``plural`` (core group) or ``plural.group``."""
    if "*" in resource:
        raise EncryptionConfigError(f"resource {resource!r}: wildcards are not supported")
    plural, _, group = resource.partition(".")
    found = [rt.prefix() for rt in registry if rt.plural == plural and rt.group == group]
    if not found:
        raise EncryptionConfigError(f"resource {resource!r} is not served by this apiserver")
    return found


def load_encryption_config(path: Path, registry: Registry) -> dict[str, ValueTransformer]:
    """Store prefix -> its resource's transformer, from an EncryptionConfiguration file."""
    try:
        raw = yaml.safe_load(path.read_text())
        config = EncryptionConfiguration.model_validate(raw)
    except OSError as err:
        raise EncryptionConfigError(f"cannot read {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise EncryptionConfigError(f"{path} is not valid YAML: {err}") from None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise EncryptionConfigError(f"{path}: {where}: {first['msg']}") from None
    transformers: dict[str, ValueTransformer] = {}
    for group in config.resources:
        transformer = ValueTransformer(p for entry in group.providers for p in _providers(entry))
        for resource in group.resources:
            for prefix in _store_prefixes(resource, registry):
                if prefix in transformers:
                    raise EncryptionConfigError(f"resource {resource!r} is configured twice")
                transformers[prefix] = transformer
    return transformers


class EncryptingStore:
    """A ``Store`` whose values under the configured prefixes are encrypted in ``inner``."""

    def __init__(self, inner: Store, transformers: Mapping[str, ValueTransformer]) -> None:
        self.inner = inner
        self._transformers = dict(transformers)

    def _for(self, key: str) -> ValueTransformer | None:
        for prefix, transformer in self._transformers.items():
            if key.startswith(prefix):
                return transformer
        return None

    def _seal(self, key: str, value: bytes) -> bytes:
        transformer = self._for(key)
        return value if transformer is None else transformer.to_storage(value, key=key)

    def _open(self, kv: KeyValue) -> KeyValue:
        transformer = self._for(kv.key)
        if transformer is None:
            return kv
        try:
            plaintext, stale = transformer.from_storage(kv.value, key=kv.key)
        except ValueError as err:
            raise Undecryptable(kv.key, str(err)) from None
        if stale:
            return StaleValue(kv.key, plaintext, kv.create_revision, kv.mod_revision)
        return dataclasses.replace(kv, value=plaintext)

    async def get(self, key: str) -> KeyValue | None:
        kv = await self.inner.get(key)
        return None if kv is None else self._open(kv)

    async def list(
        self,
        prefix: str,
        *,
        revision: int = 0,
        start_after: str | None = None,
        limit: int = 0,
    ) -> ListResult:
        result = await self.inner.list(
            prefix, revision=revision, start_after=start_after, limit=limit
        )
        readable: list[KeyValue] = []
        failure: Undecryptable | None = None
        for kv in result.items:
            try:
                readable.append(self._open(kv))
            except Undecryptable as err:
                failure = failure or err
        if failure is not None:
            failure.readable = dataclasses.replace(result, items=readable)
            raise failure
        return dataclasses.replace(result, items=readable)

    async def create(self, key: str, value: bytes, *, ttl: float | None = None) -> KeyValue:
        kv = await self.inner.create(key, self._seal(key, value), ttl=ttl)
        return dataclasses.replace(kv, value=value)

    async def update(
        self, key: str, value: bytes, *, expected_revision: int, ttl: float | None = None
    ) -> KeyValue:
        try:
            kv = await self.inner.update(
                key, self._seal(key, value), expected_revision=expected_revision, ttl=ttl
            )
        except RevisionMismatch as exc:
            raise RevisionMismatch(key, exc.expected, self._open(exc.current)) from None
        return dataclasses.replace(kv, value=value)

    async def delete(self, key: str, *, expected_revision: int | None = None) -> KeyValue:
        try:
            kv = await self.inner.delete(key, expected_revision=expected_revision)
        except RevisionMismatch as exc:
            raise RevisionMismatch(key, exc.expected, self._open(exc.current)) from None
        return self._open(kv)

    async def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        on_progress: Callable[[int], None] | None = None,
    ) -> AsyncIterator[Event]:
        events = self.inner.watch(prefix, after_revision=after_revision, on_progress=on_progress)
        try:
            async for event in events:
                try:
                    kv = self._open(event.kv)
                    prev = None if event.prev is None else self._open(event.prev)
                except Undecryptable as err:
                    log.error("left a %s event out of a watch: %s", event.type.value, err.message)
                    continue
                yield dataclasses.replace(event, kv=kv, prev=prev)
        finally:
            if isinstance(events, AsyncGenerator):
                await events.aclose()

    async def request_progress(self) -> bool:
        return await self.inner.request_progress()

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def compacted_revision(self) -> int:
        return await self.inner.compacted_revision()

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def close(self) -> None:
        await self.inner.close()
