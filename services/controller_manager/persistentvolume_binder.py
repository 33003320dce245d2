"""The PV controller: binds PersistentVolumeClaims to PersistentVolumes and reclaims released ones.

Why: a claim asks for storage, a volume is storage; something must pair them, keep the pair
consistent from both sides, and decide what happens to a volume whose claim is gone. That is
kube-controller-manager's ``persistentvolume-binder`` (``pkg/controller/volume/persistentvolume``,
``pv_controller.go``); this module follows its state machine, level-triggered from the caches,
with one work queue of claims and one of volumes (one worker each, as Kubernetes runs it).

Claims (``sync_claim``):

* **unbound** (no ``pv.kubernetes.io/bind-completed``) without ``spec.volumeName``: find the best
  volume (``volume_matching.best_match``; a WaitForFirstConsumer claim without the scheduler's
  ``volume.kubernetes.io/selected-node`` only takes a volume pre-bound to it; with the
  annotation, only a volume whose node affinity admits that node). None: a delayed claim gets
  the event ``WaitForFirstConsumer``; a claim with a class asks that class's provisioner (the
  annotations ``volume.kubernetes.io/storage-provisioner`` and its beta twin, event
  ``ExternalProvisioning``; a class naming an in-tree ``kubernetes.io/`` provisioner, such as
  ``kubernetes.io/no-provisioner``, gets ``ProvisioningFailed`` "no volume plugin matched name:
  ...", there being no in-tree plugins here); a claim without a class gets ``FailedBinding``. It
  stays Pending.
* **unbound, naming a volume** (``spec.volumeName``, a user's pre-binding): bind if that volume
  is free (and satisfies the claim: ``VolumeMismatch`` otherwise) or already points back;
  ``FailedBinding`` if it is missing or bound elsewhere.
* **bound**: keep both sides consistent (re-bind a volume that lost its ``claimRef``); a claim
  whose volume is gone or belongs to another claim is ``Lost`` (``ClaimLost``/``ClaimMisbound``).

Binding writes, each a compare-and-swap and each skipped when already true: the volume's
``claimRef`` (+ ``pv.kubernetes.io/bound-by-controller`` when we set it), its phase ``Bound``;
the claim's ``volumeName`` (+ ``bound-by-controller`` when we set it) and ``bind-completed``,
its status (``Bound``, the volume's ``accessModes`` and ``capacity``). A write that conflicts
raises, and the key is retried with backoff from a fresher cache.

Volumes (``sync_volume``): no ``claimRef`` (or one without uid: a pre-binding waiting for its
claim) → ``Available``; claim present and pointing back → ``Bound``; claim gone (or re-created
with another uid) → ``Released``, then the reclaim policy: ``Retain`` keeps it as it is;
``Delete`` of a dynamically provisioned volume (``pv.kubernetes.io/provisioned-by``) is its
provisioner's job; ``Delete`` of any other volume fails (phase ``Failed``, event
``VolumeFailedDelete``: "no deletable volume plugin matched"), as in Kubernetes for a volume no
in-tree plugin can delete — kubelite has no in-tree deleters (Kubernetes' hostPath deleter,
which only removes ``/tmp/...`` on the controller-manager's own host, is not reproduced);
``Recycle`` fails with ``VolumeFailedRecycle``. A controller-bound volume whose claim is bound to
another volume is unbound (or, when provisioned with ``Delete``, released).

Unlike Kubernetes, which retries unbound claims on a 15 s resync, a volume that becomes
available (or a class that appears) enqueues the claims still waiting, so a claim binds as soon
as a volume for it exists.

Limits: no ``kubernetes.io/pv-protection`` / ``pvc-protection`` finalizers (a claim in use can
be deleted); no in-tree provisioners or deleters; no ``WaitForPodScheduled`` event; no volume
expansion; the cache may lag behind our own writes (Kubernetes keeps a write-through copy), which
costs a conflict and a retry, never a wrong write.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from typing import Any

from api.errors import NotFound
from api.registry import REGISTRY
from api.volume_matching import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_PROVISIONED_BY,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    ANN_STORAGE_PROVISIONER_BETA,
    best_match,
    claim_class,
    claim_key,
    claim_reference,
    is_bound_to,
    unsatisfied_by,
)
from client.controller import run_controllers
from client.events import EventRecorder, EventType
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.informers import SharedInformers

__all__ = ["CLAIMS", "VOLUMES", "PersistentVolumeController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

VOLUMES = REGISTRY.require("", "PersistentVolume")
CLAIMS = REGISTRY.require("", "PersistentVolumeClaim")
CLASSES = REGISTRY.require("storage.k8s.io", "StorageClass")
NODES = REGISTRY.require("", "Node")

CLAIM_REF_INDEX = "claimRef"
"""Volumes by the ``namespace/name`` of the claim they point at."""

IN_TREE_PREFIX = "kubernetes.io/"
"""Provisioner names Kubernetes keeps for its in-tree plugins (``kubernetes.io/no-provisioner``
among them); kubelite has none, so a class naming one cannot provision."""
EXTERNAL_PROVISIONING = (
    "Waiting for a volume to be created either by the external provisioner '{}' or manually by "
    "the system administrator. If volume creation is delayed, please verify that the provisioner "
    "is running and correctly registered."
)


def _index_by_claim_ref(volume: Mapping[str, Any]) -> list[str]:
    ref = (volume.get("spec") or {}).get("claimRef") or {}
    return [claim_key(ref.get("namespace") or "", ref["name"])] if ref.get("name") else []


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _annotations(obj: Obj) -> dict[str, str]:
    return dict(_meta(obj).get("annotations") or {})


def _phase(obj: Obj) -> str:
    return str((obj.get("status") or {}).get("phase") or "")


def _bound_claim(claim: Obj) -> bool:
    return _annotations(claim).get(ANN_BIND_COMPLETED) == "yes"


class PersistentVolumeController:
    """``await run()`` until cancelled; ``sync_claim(key)`` / ``sync_volume(name)`` converge."""

    def __init__(
        self, *, client: ApiClient, informers: SharedInformers, recorder: EventRecorder
    ) -> None:
        self.name = "persistentvolume-binder"
        self.client = client
        self.recorder = recorder
        self.volumes = informers.get(VOLUMES, indexers={CLAIM_REF_INDEX: _index_by_claim_ref})
        self.claims = informers.get(CLAIMS)
        self.classes = informers.get(CLASSES)
        self.nodes = informers.get(NODES)
        self.claim_queue: WorkQueue[str] = WorkQueue(name="claims")
        self.volume_queue: WorkQueue[str] = WorkQueue(name="volumes")
        self.volumes.add_handler(
            on_add=self._volume_changed,
            on_update=lambda _old, new: self._volume_changed(new),
            on_delete=self._volume_deleted,
        )
        self.claims.add_handler(
            on_add=self._claim_changed,
            on_update=lambda _old, new: self._claim_changed(new),
            on_delete=self._claim_deleted,
        )
        self.classes.add_handler(on_add=self._class_added)

    async def run(self) -> None:
        await run_controllers(
            self.name,
            [(self.claim_queue, self.sync_claim), (self.volume_queue, self.sync_volume)],
            wait_for=[self.volumes, self.claims, self.classes, self.nodes],
            logger=log,
        )

    # -- event handlers: events -> keys ---------------------------------------------------

    def _volume_changed(self, volume: Obj) -> None:
        self.volume_queue.add(str(_meta(volume)["name"]))
        ref = (volume.get("spec") or {}).get("claimRef")
        if ref and ref.get("name"):
            self.claim_queue.add(claim_key(ref.get("namespace") or "", ref["name"]))
        elif _phase(volume) in ("Available", "Pending"):
            self._enqueue_waiting_claims(lambda _claim: True)

    def _volume_deleted(self, volume: Obj) -> None:
        for key in _index_by_claim_ref(volume):
            self.claim_queue.add(key)

    def _claim_changed(self, claim: Obj) -> None:
        self.claim_queue.add(claim_key(_meta(claim).get("namespace") or "", _meta(claim)["name"]))

    def _claim_deleted(self, claim: Obj) -> None:
        key = claim_key(_meta(claim).get("namespace") or "", _meta(claim)["name"])
        for volume in self.volumes.by_index(CLAIM_REF_INDEX, key):
            self.volume_queue.add(str(_meta(volume)["name"]))

    def _class_added(self, storage_class: Obj) -> None:
        name = _meta(storage_class).get("name")
        self._enqueue_waiting_claims(lambda claim: claim_class(claim) == name)

    def _enqueue_waiting_claims(self, wanted: Callable[[Obj], bool]) -> None:
        for claim in self.claims.list():
            if not _bound_claim(claim) and not (claim.get("spec") or {}).get("volumeName"):
                if wanted(claim):
                    self._claim_changed(claim)

    # -- claims ---------------------------------------------------------------------------

    async def sync_claim(self, key: str) -> None:
        claim = self.claims.get(key)
        if claim is None:
            return  # deleted: its volume's sync releases the volume
        if _bound_claim(claim):
            await self._sync_bound_claim(claim)
        elif (claim.get("spec") or {}).get("volumeName"):
            await self._sync_prebound_claim(claim)
        else:
            await self._sync_unbound_claim(claim)

    async def _sync_unbound_claim(self, claim: Obj) -> None:
        selected = _annotations(claim).get(ANN_SELECTED_NODE)
        node = self.nodes.get(selected) if selected else None
        delay = not selected and self._waits_for_first_consumer(claim)
        volume = best_match(
            claim,
            self.volumes.list(),
            delay_binding=delay,
            node=node if node is not None else self._unknown_node(selected),
        )
        if volume is not None:
            await self._bind(volume, claim)
            return
        if delay:
            self._event(
                claim,
                "Normal",
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            )
        elif claim_class(claim):
            claim = await self._request_provisioning(claim)
        else:
            self._event(
                claim,
                "Normal",
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            )
        await self._write_claim_status(claim, "Pending", None)

    @staticmethod
    def _unknown_node(name: str | None) -> Obj | None:
        """A selected node missing from the cache still has its hostname label."""
        if not name:
            return None
        return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}

    def _waits_for_first_consumer(self, claim: Obj) -> bool:
        storage_class = self.classes.get(claim_class(claim)) if claim_class(claim) else None
        return (storage_class or {}).get("volumeBindingMode") == "WaitForFirstConsumer"

    async def _request_provisioning(self, claim: Obj) -> Obj:
        """Ask the class's (external) provisioner for a volume: ``provisionClaim``."""
        name = claim_class(claim)
        storage_class = self.classes.get(name)
        if storage_class is None:
            self._event(
                claim,
                "Warning",
                "ProvisioningFailed",
                f"error finding provisioning plugin for claim {self._key(claim)}: "
                f'storageclass.storage.k8s.io "{name}" not found',
            )
            return claim
        provisioner = str(storage_class.get("provisioner") or "")
        if provisioner.startswith(IN_TREE_PREFIX):
            message = f"no volume plugin matched name: {provisioner}"
            self._event(claim, "Warning", "ProvisioningFailed", message)
            return claim
        annotations = _annotations(claim)
        if (
            annotations.get(ANN_STORAGE_PROVISIONER) != provisioner
            or annotations.get(ANN_STORAGE_PROVISIONER_BETA) != provisioner
        ):
            claim = copy.deepcopy(claim)
            claim["metadata"]["annotations"] = {
                **annotations,
                ANN_STORAGE_PROVISIONER: provisioner,
                ANN_STORAGE_PROVISIONER_BETA: provisioner,
            }
            claim = await self.client.update(CLAIMS, claim)
            log.info("claim %s: asked provisioner %s for a volume", self._key(claim), provisioner)
        self._event(
            claim, "Normal", "ExternalProvisioning", EXTERNAL_PROVISIONING.format(provisioner)
        )
        return claim

    async def _sync_prebound_claim(self, claim: Obj) -> None:
        name = str(claim["spec"]["volumeName"])
        volume = self.volumes.get(name)
        if volume is None:
            self._event(claim, "Normal", "FailedBinding", f'volume "{name}" not found')
        elif not (volume.get("spec") or {}).get("claimRef"):
            problem = unsatisfied_by(volume, claim)
            if problem is None:
                await self._bind(volume, claim)
                return
            message = f'Cannot bind to requested volume "{name}": {problem}'
            self._event(claim, "Warning", "VolumeMismatch", message)
        elif is_bound_to(volume, claim):
            await self._bind(volume, claim)
            return
        elif _annotations(claim).get(ANN_BOUND_BY_CONTROLLER) == "yes":
            raise RuntimeError(
                f"invalid binding of claim {self._key(claim)} to volume {name}: "
                "volume already claimed by another claim"
            )
        else:
            message = f'volume "{name}" already bound to a different claim.'
            self._event(claim, "Normal", "FailedBinding", message)
        await self._write_claim_status(claim, "Pending", None)

    async def _sync_bound_claim(self, claim: Obj) -> None:
        name = (claim.get("spec") or {}).get("volumeName")
        volume = self.volumes.get(str(name)) if name else None
        if not name:
            lost = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"
            await self._claim_lost(claim, "ClaimLost", lost)
        elif volume is None:
            lost = "Bound claim has lost its PersistentVolume. Data on the volume is lost!"
            await self._claim_lost(claim, "ClaimLost", lost)
        elif not (volume.get("spec") or {}).get("claimRef") or is_bound_to(volume, claim):
            await self._bind(volume, claim)
        else:
            misbound = "Two claims are bound to the same volume, this one is bound incorrectly"
            await self._claim_lost(claim, "ClaimMisbound", misbound)

    async def _claim_lost(self, claim: Obj, reason: str, message: str) -> None:
        if _phase(claim) != "Lost":
            self._event(claim, "Warning", reason, message)
        await self._write_claim_status(claim, "Lost", None)

    # -- binding --------------------------------------------------------------------------

    async def _bind(self, volume: Obj, claim: Obj) -> None:
        """Both sides, volume first (as Kubernetes does); every step skipped when done."""
        volume = await self._bind_volume_to_claim(volume, claim)
        volume = await self._write_volume_phase(volume, "Bound")
        claim = await self._bind_claim_to_volume(claim, volume)
        await self._write_claim_status(claim, "Bound", volume)

    async def _bind_volume_to_claim(self, volume: Obj, claim: Obj) -> Obj:
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        wanted = claim_reference(claim)
        if is_bound_to(volume, claim) and ref.get("uid") == wanted["uid"]:
            return volume
        by_controller = not is_bound_to(volume, claim)
        volume = copy.deepcopy(volume)
        volume["spec"]["claimRef"] = wanted
        if by_controller:
            volume["metadata"]["annotations"] = {
                **_annotations(volume),
                ANN_BOUND_BY_CONTROLLER: "yes",
            }
        written = await self.client.update(VOLUMES, volume)
        log.info("volume %s: bound to claim %s", _meta(volume)["name"], self._key(claim))
        return written

    async def _bind_claim_to_volume(self, claim: Obj, volume: Obj) -> Obj:
        name = _meta(volume)["name"]
        annotations = _annotations(claim)
        spec = claim.get("spec") or {}
        wanted = {**annotations, ANN_BIND_COMPLETED: "yes"}
        if spec.get("volumeName") != name:
            wanted[ANN_BOUND_BY_CONTROLLER] = "yes"
        if spec.get("volumeName") == name and wanted == annotations:
            return claim
        claim = copy.deepcopy(claim)
        claim["spec"]["volumeName"] = name
        claim["metadata"]["annotations"] = wanted
        written = await self.client.update(CLAIMS, claim)
        log.info("claim %s: bound to volume %s", self._key(claim), name)
        return written

    async def _write_claim_status(self, claim: Obj, phase: str, volume: Obj | None) -> Obj:
        status = dict(claim.get("status") or {})
        wanted = {**status, "phase": phase}
        for field in ("accessModes", "capacity"):
            value = (volume.get("spec") or {}).get(field) if volume is not None else None
            if value is None:
                wanted.pop(field, None)
            else:
                wanted[field] = copy.deepcopy(value)
        if wanted == status:
            return claim
        claim = copy.deepcopy(claim)
        claim["status"] = wanted
        return await self.client.update_status(CLAIMS, claim)

    async def _write_volume_phase(self, volume: Obj, phase: str, message: str = "") -> Obj:
        status = volume.get("status") or {}
        if status.get("phase") == phase and (status.get("message") or "") == message:
            return volume
        volume = copy.deepcopy(volume)
        volume["status"] = {**status, "phase": phase}
        if message:
            volume["status"]["message"] = message
        else:
            volume["status"].pop("message", None)
        written = await self.client.update_status(VOLUMES, volume)
        log.info("volume %s: phase %s", _meta(volume)["name"], phase)
        return written

    # -- volumes --------------------------------------------------------------------------

    async def sync_volume(self, name: str) -> None:
        volume = self.volumes.get(name)
        if volume is None:
            return
        ref = (volume.get("spec") or {}).get("claimRef")
        if not ref or not ref.get("uid"):
            # free, or pre-bound by name to a claim the claim sync will bind
            await self._write_volume_phase(volume, "Available")
            return
        claim = await self._claim_of(ref)
        if claim is None or _meta(claim).get("uid") != ref.get("uid"):
            await self._release(volume)
        elif not (claim.get("spec") or {}).get("volumeName"):
            self._claim_changed(claim)  # binding half done: the claim's sync finishes it
        elif claim["spec"]["volumeName"] == name:
            await self._write_volume_phase(volume, "Bound")
        elif _annotations(volume).get(ANN_PROVISIONED_BY) and self._policy(volume) == "Delete":
            await self._release(volume)  # made for a claim that bound elsewhere: not needed
        elif _annotations(volume).get(ANN_BOUND_BY_CONTROLLER) == "yes":
            await self._unbind(volume)

    async def _claim_of(self, ref: Obj) -> Obj | None:
        """The claim a volume points at; absent from the cache is checked with the apiserver,
        so a claim created a moment ago does not get its new volume released."""
        namespace, name = ref.get("namespace") or "", str(ref.get("name"))
        claim = self.claims.get(claim_key(namespace, name))
        if claim is not None:
            return claim
        try:
            return await self.client.get(CLAIMS, name, namespace=namespace)
        except NotFound:
            return None

    @staticmethod
    def _policy(volume: Obj) -> str:
        return str((volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain")

    async def _release(self, volume: Obj) -> None:
        if _phase(volume) not in ("Released", "Failed"):
            volume = await self._write_volume_phase(volume, "Released")
        await self._reclaim(volume)

    async def _reclaim(self, volume: Obj) -> None:
        """``reclaimVolume``: what the policy says happens to a released volume."""
        policy = self._policy(volume)
        if policy == "Retain" or _phase(volume) == "Failed":
            return
        if policy == "Delete" and _annotations(volume).get(ANN_PROVISIONED_BY):
            return  # an external provisioner made it; it deletes it
        if policy == "Delete":
            reason = "VolumeFailedDelete"
            message = (
                f'error getting deleter volume plugin for volume "{_meta(volume)["name"]}": '
                "no deletable volume plugin matched"
            )
        elif policy == "Recycle":
            reason, message = "VolumeFailedRecycle", "No recycler plugin found for the volume!"
        else:
            reason = "VolumeUnknownReclaimPolicy"
            message = "Volume has unrecognized PersistentVolumeReclaimPolicy"
        self._event(volume, "Warning", reason, message)
        await self._write_volume_phase(volume, "Failed", message)

    async def _unbind(self, volume: Obj) -> None:
        volume = copy.deepcopy(volume)
        volume["spec"].pop("claimRef", None)
        annotations = _annotations(volume)
        annotations.pop(ANN_BOUND_BY_CONTROLLER, None)
        volume["metadata"]["annotations"] = annotations
        volume = await self.client.update(VOLUMES, volume)
        log.info("volume %s: unbound (its claim is bound elsewhere)", _meta(volume)["name"])
        await self._write_volume_phase(volume, "Available")

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def _key(claim: Obj) -> str:
        return claim_key(_meta(claim).get("namespace") or "", _meta(claim).get("name") or "")

    def _event(self, obj: Obj, type_: EventType, reason: str, message: str) -> None:
        self.recorder.event(obj, type_, reason, message)
