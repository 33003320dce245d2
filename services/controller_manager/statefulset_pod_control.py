"""The StatefulSet controller's writes to pods and claims, each with the event Kubernetes records.

Why a module of its own: the update algorithm (``statefulset_control``) decides *which* pod to
create, fix or delete; this is *how*, following ``StatefulPodControl`` in
``pkg/controller/statefulset/stateful_pod_control.go``:

* ``create_pod`` creates the pod's claims first (from the informer's view: a missing claim is
  created, a claim being deleted is an error so the pod waits), then the pod. A pod must never
  start without its stable storage, and a claim must never be shared by two lives of an
  ordinal while the garbage collector is taking it (``claim_is_stale``).
* ``update_pod`` restores a pod's identity labels and volumes (read fresh, compare-and-swap,
  retried on Conflict) and its claims' retention references.
* ``delete_pod`` deletes by uid precondition, so a namesake that replaced the pod is never hit.
* ``update_claims_for_retention`` writes the ownerReferences ``statefulset_claims`` asks for.

Events on the StatefulSet (component ``statefulset-controller``), worded as Kubernetes':
``SuccessfulCreate`` "create Pod web-0 in StatefulSet web successful", ``FailedCreate``
"create Pod web-0 in StatefulSet web failed error: ...", the same for ``update`` and
``delete``; for claims ``SuccessfulCreate`` "create Claim www-web-0 Pod web-0 in StatefulSet
web success" and ``FailedCreate`` "create Claim ... for Pod ... failed error: ...".

Limits: decisions read the claim informer, which may lag our own writes; a claim created by
the previous sync but not yet seen makes the next create answer AlreadyExists, which is an
error here (the sync is retried, as Kubernetes retries it), never a second claim. A pod that
already exists when created is likewise an error without an event.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from api.errors import AlreadyExists, Conflict, NotFound, StatusError
from api.registry import REGISTRY
from client.events import EventRecorder
from client.informer import Informer
from client.rest import ApiClient
from services.controller_manager.retry_on_conflict import update_with_retry
from services.controller_manager.statefulset_claims import (
    claim_owners_match,
    has_stale_pod_ref,
    retention_policy,
    update_claim_owners,
)
from services.controller_manager.statefulset_pods import (
    claims_for,
    identity_matches,
    ordinal_of,
    storage_matches,
    update_identity,
    update_storage,
)

__all__ = ["CLAIMS", "PODS", "ClaimError", "StatefulPodControl"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

PODS = REGISTRY.require("", "Pod")
CLAIMS = REGISTRY.require("", "PersistentVolumeClaim")


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, StatusError) else str(exc)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class ClaimError(Exception):
    """One or more of a pod's claims could not be made ready for it."""


class StatefulPodControl:
    def __init__(self, *, client: ApiClient, recorder: EventRecorder, claims: Informer) -> None:
        self.client = client
        self.recorder = recorder
        self.claims = claims

    # -- events ---------------------------------------------------------------------------

    def _pod_event(self, verb: str, sts: Obj, pod: Obj, error: BaseException | None) -> None:
        subject = f"{verb} Pod {_name(pod)} in StatefulSet {_name(sts)}"
        if error is None:
            self.recorder.event(sts, "Normal", f"Successful{verb.title()}", f"{subject} successful")
        else:
            self.recorder.event(
                sts,
                "Warning",
                f"Failed{verb.title()}",
                f"{subject} failed error: {_message(error)}",
            )

    def _claim_event(self, sts: Obj, pod: Obj, claim: Obj, error: BaseException | None) -> None:
        if error is None:
            self.recorder.event(
                sts,
                "Normal",
                "SuccessfulCreate",
                f"create Claim {_name(claim)} Pod {_name(pod)} in StatefulSet {_name(sts)} success",
            )
        else:
            self.recorder.event(
                sts,
                "Warning",
                "FailedCreate",
                f"create Claim {_name(claim)} for Pod {_name(pod)} in StatefulSet {_name(sts)} "
                f"failed error: {_message(error)}",
            )

    # -- claims ---------------------------------------------------------------------------

    def _cached_claim(self, namespace: str, name: str) -> Obj | None:
        return self.claims.get(f"{namespace}/{name}")

    async def create_missing_claims(self, sts: Obj, pod: Obj) -> None:
        """Create every claim of ``pod``'s ordinal that does not exist; ClaimError when one
        could not be created or is being deleted."""
        namespace = str(sts["metadata"].get("namespace") or "")
        problems: list[str] = []
        for claim in claims_for(sts, ordinal_of(pod)).values():
            name = _name(claim)
            existing = self._cached_claim(namespace, name)
            if existing is not None:
                if (existing.get("metadata") or {}).get("deletionTimestamp"):
                    problems.append(f"pvc {name} is being deleted")
                continue
            update_claim_owners(claim, sts, pod)
            try:
                await self.client.create(CLAIMS, claim, namespace=namespace)
            except AlreadyExists as exc:
                problems.append(f"failed to create PVC {name}: {_message(exc)}")
                continue
            except (ConnectionError, StatusError) as exc:
                self._claim_event(sts, pod, claim, exc)
                problems.append(f"failed to create PVC {name}: {_message(exc)}")
                continue
            self._claim_event(sts, pod, claim, None)
            log.info("StatefulSet %s/%s: created claim %s for pod %s", namespace, _name(sts),
                     name, _name(pod))  # fmt: skip
        if problems:
            raise ClaimError("; ".join(problems))

    def claim_is_stale(self, sts: Obj, pod: Obj) -> bool:
        """A claim of ``pod``'s ordinal still belongs to an earlier pod of that name (being
        garbage-collected after a scale-down): the pod must wait for it to go."""
        _, when_scaled = retention_policy(sts)
        if when_scaled != "Delete":
            return False  # claims are meant to be reused
        namespace = str(sts["metadata"].get("namespace") or "")
        for claim in claims_for(sts, ordinal_of(pod)).values():
            existing = self._cached_claim(namespace, _name(claim))
            if existing is not None and has_stale_pod_ref(existing, pod):
                return True
        return False

    def claims_match_retention(self, sts: Obj, pod: Obj) -> bool:
        """Every existing claim of ``pod``'s ordinal has the references the policy asks for
        (a claim not in the cache yet is left for a later sync)."""
        namespace = str(sts["metadata"].get("namespace") or "")
        for claim in claims_for(sts, ordinal_of(pod)).values():
            existing = self._cached_claim(namespace, _name(claim))
            if existing is not None and not claim_owners_match(existing, sts, pod):
                return False
        return True

    async def update_claims_for_retention(self, sts: Obj, pod: Obj) -> None:
        namespace = str(sts["metadata"].get("namespace") or "")
        for claim in claims_for(sts, ordinal_of(pod)).values():
            try:
                await update_with_retry(
                    self.client,
                    CLAIMS,
                    namespace=namespace,
                    name=_name(claim),
                    mutate=lambda fresh: update_claim_owners(fresh, sts, pod),
                )
            except NotFound:
                continue

    # -- pods -----------------------------------------------------------------------------

    async def create_pod(self, sts: Obj, pod: Obj) -> None:
        """Create ``pod``'s claims, then ``pod``."""
        try:
            await self.create_missing_claims(sts, pod)
        except ClaimError as exc:
            self._pod_event("create", sts, pod, exc)
            raise
        try:
            await self.client.create(PODS, pod, namespace=sts["metadata"].get("namespace"))
        except AlreadyExists:
            raise  # a lagging cache: the pod is there, the next sync sees it
        except (ConnectionError, StatusError) as exc:
            self._pod_event("create", sts, pod, exc)
            raise
        self._pod_event("create", sts, pod, None)

    async def update_pod(self, sts: Obj, pod: Obj) -> None:
        """Restore ``pod``'s identity and storage, and its claims' retention references."""
        meta = pod["metadata"]
        if not identity_matches(sts, pod) or not storage_matches(sts, pod):
            uid = meta.get("uid")

            def conform(fresh: Obj) -> bool:
                if fresh["metadata"].get("uid") != uid:
                    return False
                before = copy.deepcopy(fresh)
                if not identity_matches(sts, fresh):
                    update_identity(sts, fresh)
                if not storage_matches(sts, fresh):
                    update_storage(sts, fresh)
                return fresh != before

            if not storage_matches(sts, pod):
                await self.create_missing_claims(sts, pod)
            try:
                await update_with_retry(
                    self.client, PODS, namespace=meta.get("namespace"), name=meta["name"],
                    mutate=conform,
                )  # fmt: skip
            except NotFound:
                return
            except (ConnectionError, StatusError) as exc:
                self._pod_event("update", sts, pod, exc)
                raise
            self._pod_event("update", sts, pod, None)
        if not self.claims_match_retention(sts, pod):
            await self.update_claims_for_retention(sts, pod)

    async def delete_pod(self, sts: Obj, pod: Obj) -> None:
        """Delete this very pod; one already gone (or replaced) needs nothing."""
        meta = pod["metadata"]
        try:
            await self.client.delete(
                PODS, meta["name"], namespace=meta.get("namespace"),
                preconditions={"uid": meta["uid"]},
            )  # fmt: skip
        except (NotFound, Conflict):
            return
        except (ConnectionError, StatusError) as exc:
            self._pod_event("delete", sts, pod, exc)
            raise
        self._pod_event("delete", sts, pod, None)
