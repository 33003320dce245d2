"""ServiceAccount admission: every new pod runs as an account, and gets that account's token.

Why: a pod proves who it is to the apiserver with a service-account token the kubelet writes
into it. Kubernetes' ``ServiceAccount`` admission plugin (``plugin/pkg/admission/serviceaccount``)
is what puts that in the pod spec, on create only; this module does the same:

* ``spec.serviceAccountName`` unset becomes ``default`` (the deprecated ``spec.serviceAccount``
  is read when it alone is set, and mirrored from the name afterwards, as the v1 conversion
  does);
* the account must exist: a pod naming a missing one is refused with Kubernetes' 403
  (``pods "p" is forbidden: error looking up service account ns/sa: serviceaccount "sa" not
  found``);
* unless ``automountServiceAccountToken: false`` (the pod's word wins over the account's), a
  projected volume ``kube-api-access-<5 random characters>`` is added — a bound token (path
  ``token``, ``expirationSeconds: 3607``), ``ca.crt`` from the ConfigMap ``kube-root-ca.crt``
  and ``namespace`` from the downward API, ``defaultMode: 420`` — and every init and app
  container mounts it read-only at ``/var/run/secrets/kubernetes.io/serviceaccount``, except a
  container that already mounts something there; a pod that already has a ``kube-api-access-*``
  volume keeps it;
* a pod without ``imagePullSecrets`` gets its account's;
* an account annotated ``kubernetes.io/enforce-mountable-secrets: "true"`` limits the Secrets
  the pod may use (volumes, env, envFrom, image pull secrets) to those it lists, with
  Kubernetes' messages;
* a mirror pod (annotation ``kubernetes.io/config.mirror``) is left as it is, and refused if it
  names an account or a Secret.

Differences, on purpose: an apiserver that cannot sign tokens (no
``--service-account-signing-key-file``) mounts no token volume — the kubelet could not fill it;
and a missing ``default`` account is not an error (Kubernetes retries for a second or two, then
refuses): an apiserver run without a controller-manager, as many tests run it, never gets one,
and its pods are admitted without a token volume. A pod created in the moment between a new
namespace and its ``default`` account therefore gets no token.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

from api.errors import Forbidden
from services.apiserver.context import ApiContext

__all__ = ["MOUNT_PATH", "VOLUME_PREFIX", "admit_pod", "token_volume"]

Obj = dict[str, Any]

DEFAULT_ACCOUNT = "default"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
"""``DefaultAPITokenMountPath``: where in-cluster clients look for the token and CA."""
VOLUME_PREFIX = "kube-api-access-"
TOKEN_EXPIRATION = 3607
"""``WarnOnlyBoundTokenExpirationSeconds``: an hour and seven seconds, the admission's value."""
PROJECTED_DEFAULT_MODE = 0o644
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
ENFORCE_MOUNTABLE = "kubernetes.io/enforce-mountable-secrets"
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""``utilrand.String``'s alphabet (no vowels, no confusable digits): the volume's suffix."""


def _forbidden(pod: Obj, message: str) -> Forbidden:
    name = str((pod.get("metadata") or {}).get("name") or "")
    return Forbidden(f'pods "{name}" is forbidden: {message}', kind="pods", name=name)


async def _account(ctx: ApiContext, namespace: str, name: str) -> Obj | None:
    return await ctx.cached_get(ctx.resource("", "serviceaccounts"), namespace, name)


def _containers(spec: Obj) -> Iterator[Obj]:
    for field in ("initContainers", "containers"):
        yield from (c for c in spec.get(field) or () if isinstance(c, dict))


async def admit_pod(ctx: ApiContext, pod: Obj, *, namespace: str) -> None:
    """Admit a new pod (changed in place) or raise ``Forbidden``."""
    meta = pod.get("metadata") or {}
    spec = pod.setdefault("spec", {})
    if not isinstance(spec, dict):
        return  # not a pod spec at all: validation says so
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        _check_mirror_pod(pod, spec)
        return
    name = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_ACCOUNT)
    spec["serviceAccountName"] = spec["serviceAccount"] = name
    account = await _account(ctx, namespace, name)
    if account is None:
        if name == DEFAULT_ACCOUNT:
            return
        raise _forbidden(
            pod,
            f"error looking up service account {namespace}/{name}: "
            f'serviceaccount "{name}" not found',
        )
    if _should_automount(account, spec) and _can_sign(ctx):
        _mount_token(spec)
    pull_secrets = account.get("imagePullSecrets") or []
    if not spec.get("imagePullSecrets") and pull_secrets:
        spec["imagePullSecrets"] = [{"name": s.get("name")} for s in pull_secrets]
    annotations = (account.get("metadata") or {}).get("annotations") or {}
    if str(annotations.get(ENFORCE_MOUNTABLE, "")).lower() in ("true", "1", "t"):
        _limit_secret_references(pod, spec, account=account)


def _can_sign(ctx: ApiContext) -> bool:
    return ctx.token_keys is not None and ctx.token_keys.signing_key is not None


def _should_automount(account: Obj, spec: Obj) -> bool:
    """``shouldAutomount``: the pod's preference, else the account's, else true."""
    key = "automountServiceAccountToken"
    for preference in (spec.get(key), account.get(key)):
        if preference is not None:
            return bool(preference)
    return True


def token_volume(name: str) -> Obj:
    """``TokenVolumeSource``: the projected volume a pod's token, CA and namespace live in."""
    return {
        "name": name,
        "projected": {
            "defaultMode": PROJECTED_DEFAULT_MODE,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION, "path": "token"}},
                {
                    "configMap": {
                        "name": ROOT_CA_CONFIGMAP,
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }


def _mount_token(spec: Obj) -> None:
    """``mountServiceAccountToken``: the volume once, a read-only mount in every container."""
    volumes = spec.get("volumes") or []
    existing = next(
        (v["name"] for v in volumes if str(v.get("name") or "").startswith(VOLUME_PREFIX)), None
    )
    name = existing or VOLUME_PREFIX + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
    needed = False
    for container in _containers(spec):
        mounts = container.get("volumeMounts") or []
        if any(m.get("mountPath") == MOUNT_PATH for m in mounts):
            continue
        container["volumeMounts"] = [
            *mounts,
            {"name": name, "readOnly": True, "mountPath": MOUNT_PATH},
        ]
        needed = True
    if needed and existing is None:
        spec["volumes"] = [*volumes, token_volume(name)]


# -- secrets a pod may not use ---------------------------------------------------------------


def _secret_names(spec: Obj) -> Iterator[str]:
    """Every Secret the spec references (``VisitPodSecretNames``, for a mirror pod)."""
    for s in spec.get("imagePullSecrets") or ():
        yield str(s.get("name") or "")
    for container in _containers(spec):
        for env in container.get("env") or ():
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                yield str(ref.get("name") or "")
        for source in container.get("envFrom") or ():
            if source.get("secretRef"):
                yield str(source["secretRef"].get("name") or "")
    for volume in spec.get("volumes") or ():
        if volume.get("secret"):
            yield str(volume["secret"].get("secretName") or "")
        for projection in (volume.get("projected") or {}).get("sources") or ():
            if projection.get("secret"):
                yield str(projection["secret"].get("name") or "")


def _check_mirror_pod(pod: Obj, spec: Obj) -> None:
    if spec.get("serviceAccountName"):
        raise _forbidden(pod, "a mirror pod may not reference service accounts")
    if next(_secret_names(spec), None) is not None:
        raise _forbidden(pod, "a mirror pod may not reference secrets")


def _limit_secret_references(pod: Obj, spec: Obj, *, account: Obj) -> None:
    """``limitSecretReferences``: only the Secrets the account lists (its ``secrets`` for
    volumes and env, its ``imagePullSecrets`` for pulls)."""
    sa = str((account.get("metadata") or {}).get("name") or "")
    mountable = {str(s.get("name") or "") for s in account.get("secrets") or ()}
    suffix = f"is not allowed because service account {sa} does not reference that secret"
    for volume in spec.get("volumes") or ():
        secret = str((volume.get("secret") or {}).get("secretName") or "")
        if volume.get("secret") is not None and secret not in mountable:
            raise _forbidden(pod, f'volume with secret.secretName="{secret}" {suffix}')
    for field, what in (("initContainers", "init container"), ("containers", "container")):
        for container in spec.get(field) or ():
            for env in container.get("env") or ():
                ref = (env.get("valueFrom") or {}).get("secretKeyRef")
                if ref and str(ref.get("name") or "") not in mountable:
                    raise _forbidden(
                        pod,
                        f"{what} {container.get('name')} with envVar {env.get('name')} "
                        f'referencing secret.secretName="{ref.get("name")}" {suffix}',
                    )
            for source in container.get("envFrom") or ():
                ref = source.get("secretRef")
                if ref and str(ref.get("name") or "") not in mountable:
                    raise _forbidden(
                        pod,
                        f"{what} {container.get('name')} with envFrom referencing "
                        f'secret.secretName="{ref.get("name")}" {suffix}',
                    )
    pullable = {str(s.get("name") or "") for s in account.get("imagePullSecrets") or ()}
    for i, ref in enumerate(spec.get("imagePullSecrets") or ()):
        if str(ref.get("name") or "") not in pullable:
            raise _forbidden(
                pod,
                f'imagePullSecrets[{i}].name="{ref.get("name")}" is not allowed because service '
                f"account {sa} does not reference that imagePullSecret",
            )
