"""kubelite's built-in external provisioner ``kubelite.io/local-path``: volumes that are directories
on a node, made for claims and removed after them — what k3s' ``rancher.io/local-path`` does.

Why: the default StorageClass ``local-path`` names this provisioner, so a claim without a class
gets a volume without anyone writing a PersistentVolume by hand. It runs in the
controller-manager (k3s runs its own as a Deployment); it talks to the cluster only through the
API, like any external provisioner built on ``sig-storage-lib-external-provisioner``.

Provisioning (``sync_claim``): a claim whose ``volume.kubernetes.io/storage-provisioner`` is
ours (the PV controller set it), of a class whose provisioner is ours, not yet bound, gets the
volume ``pvc-<claim uid>``:

* ``spec.hostPath`` ``{path: <root>/<pv>_<namespace>_<claim>, type: DirectoryOrCreate}`` (the
  kubelet creates the directory when a pod first mounts it), where ``<root>`` is the node's
  ``kubelite.io/local-path-root`` annotation (each kubelet publishes ``<state dir>/storage``);
* ``spec.nodeAffinity.required``: ``kubernetes.io/hostname In [<node>]``, the node being the
  claim's ``volume.kubernetes.io/selected-node`` (set by the scheduler for WaitForFirstConsumer);
* capacity = the request, the claim's access modes and volume mode, the class's name and
  ``reclaimPolicy``, ``pv.kubernetes.io/provisioned-by: kubelite.io/local-path``, and
  ``claimRef`` pre-bound to the claim (uid included) — the PV controller completes the binding.

Events on the claim: ``Provisioning``, then ``ProvisioningSucceeded`` ("Successfully provisioned
volume pvc-..."), or ``ProvisioningFailed`` and a retry with backoff. A claim without a selected
node (an ``Immediate`` class naming this provisioner) is refused with "configuration error, no
node was specified", as rancher's provisioner does: a node-local volume made before the pod is
placed would pin the pod to a node picked blindly. A node without the root annotation is refused
too (its kubelet predates it, or it is not a kubelet kubelite runs).

Deletion (``sync_volume``): a volume of ours that is ``Released`` with ``reclaimPolicy: Delete``
gets a helper pod, as k3s does: ``kube-system/helper-pod-delete-<pv>``, ``spec.nodeName`` set
(no scheduler), every taint tolerated, ``restartPolicy: Never``, image ``busybox``, ``sh -c 'rm -rf
"$VOL_DIR"'`` with the volume's parent directory mounted as a hostPath at the same path. The pod
informer brings the key back when the pod changes: ``Succeeded`` → delete the helper pod, then the
PersistentVolume; ``Failed`` → event ``VolumeFailedDelete`` on the volume, delete the helper pod,
and start another after a backoff (2 s doubling to 5 min, per volume, in this process).

Limits: no capacity accounting (a node's disk can be overcommitted); no ``helper-pod-create``
(the kubelet's DirectoryOrCreate makes the directory); a helper pod whose node is gone stays
Pending (the volume waits, as in k3s); no per-class ``parameters`` (``nodePath``), no shared
filesystem mode; the ``external-provisioner.volume.kubernetes.io/finalizer`` is not used, so a
volume deleted by hand leaves its directory behind.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from api.errors import AlreadyExists, NotFound
from api.registry import REGISTRY
from api.storage import LOCAL_PATH_PROVISIONER, LOCAL_PATH_ROOT_ANNOTATION
from api.volume_matching import (
    ANN_PROVISIONED_BY,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    ANN_STORAGE_PROVISIONER_BETA,
    claim_class,
    claim_key,
    claim_reference,
)
from client.backoff import Backoff, BackoffPolicy
from client.controller import run_controllers
from client.events import EventRecorder
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.informers import SharedInformers

__all__ = ["LOCAL_PATH_ROOT_ANNOTATION", "LocalPathProvisioner", "helper_pod_name"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

"""On a Node: the directory under which this provisioner's volumes for that node live (the
kubelet's ``node_status`` publishes it; the two spell it alike, services share no imports)."""
HELPER_NAMESPACE = "kube-system"
HELPER_IMAGE = "busybox"
HELPER_PREFIX = "helper-pod-delete-"

HELPER_RETRY = BackoffPolicy(initial=2.0, factor=2.0, cap=300.0, jitter=0.2, reset_after=900.0)
"""After a failed helper pod, the next one waits 2 s, then 4, 8 ... up to 5 min: a directory that
cannot be removed is rarely fixed within seconds, and each attempt is a pod on the node."""

VOLUMES = REGISTRY.require("", "PersistentVolume")
CLAIMS = REGISTRY.require("", "PersistentVolumeClaim")
CLASSES = REGISTRY.require("storage.k8s.io", "StorageClass")
NODES = REGISTRY.require("", "Node")
PODS = REGISTRY.require("", "Pod")


class ProvisioningFailed(Exception):
    """The claim cannot get a volume now; the message says why (and is the event's)."""


class DeletionFailed(Exception):
    """The volume cannot be deleted as it stands; its key is retried with the queue's backoff."""


@dataclass(slots=True)
class _Retry:
    """A volume whose helper pod failed: when the next helper pod may start."""

    backoff: Backoff = field(default_factory=lambda: Backoff(HELPER_RETRY))
    not_before: float = 0.0


def helper_pod_name(volume_name: str) -> str:
    return HELPER_PREFIX + volume_name


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _annotations(obj: Obj) -> Obj:
    return _meta(obj).get("annotations") or {}


def _volume_node(volume: Obj) -> str | None:
    """The node a local-path volume lives on: its ``kubernetes.io/hostname In [node]`` term."""
    required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            values = expr.get("values") or []
            if expr.get("key") == "kubernetes.io/hostname" and expr.get("operator") == "In":
                return str(values[0]) if len(values) == 1 else None
    return None


class LocalPathProvisioner:
    """``await run()`` until cancelled; ``sync_claim(key)`` provisions, ``sync_volume`` deletes."""

    def __init__(
        self, *, client: ApiClient, informers: SharedInformers, recorder: EventRecorder
    ) -> None:
        self.name = "local-path-provisioner"
        self.client = client
        self.recorder = recorder
        self.volumes = informers.get(VOLUMES)
        self.claims = informers.get(CLAIMS)
        self.classes = informers.get(CLASSES)
        self.nodes = informers.get(NODES)
        self.pods = informers.get(PODS)
        self.claim_queue: WorkQueue[str] = WorkQueue(name="provision")
        self.volume_queue: WorkQueue[str] = WorkQueue(name="delete")
        self._retries: dict[str, _Retry] = {}
        self.claims.add_handler(
            on_add=self._claim_changed, on_update=lambda _old, new: self._claim_changed(new)
        )
        self.volumes.add_handler(
            on_add=self._volume_changed, on_update=lambda _old, new: self._volume_changed(new)
        )
        self.pods.add_handler(on_change=self._pod_changed)

    async def run(self) -> None:
        await run_controllers(
            self.name,
            [(self.claim_queue, self.sync_claim), (self.volume_queue, self.sync_volume)],
            wait_for=[self.volumes, self.claims, self.classes, self.nodes, self.pods],
            logger=log,
        )

    # -- event handlers -------------------------------------------------------------------

    def _claim_changed(self, claim: Obj) -> None:
        annotations = _annotations(claim)
        if LOCAL_PATH_PROVISIONER in (
            annotations.get(ANN_STORAGE_PROVISIONER),
            annotations.get(ANN_STORAGE_PROVISIONER_BETA),
        ):
            self.claim_queue.add(
                claim_key(_meta(claim).get("namespace") or "", _meta(claim)["name"])
            )

    def _volume_changed(self, volume: Obj) -> None:
        if _annotations(volume).get(ANN_PROVISIONED_BY) == LOCAL_PATH_PROVISIONER:
            self.volume_queue.add(str(_meta(volume)["name"]))

    def _pod_changed(self, pod: Obj) -> None:
        meta = _meta(pod)
        name = str(meta.get("name") or "")
        if meta.get("namespace") == HELPER_NAMESPACE and name.startswith(HELPER_PREFIX):
            self.volume_queue.add(name.removeprefix(HELPER_PREFIX))

    # -- provisioning ---------------------------------------------------------------------

    async def sync_claim(self, key: str) -> None:
        claim = self.claims.get(key)
        if claim is None or (claim.get("spec") or {}).get("volumeName"):
            return
        if _meta(claim).get("deletionTimestamp"):
            return
        storage_class = self.classes.get(claim_class(claim))
        if storage_class is None or storage_class.get("provisioner") != LOCAL_PATH_PROVISIONER:
            return
        name = f"pvc-{_meta(claim)['uid']}"
        if self.volumes.get(name) is not None:
            return  # provisioned already; the PV controller binds it
        try:
            volume = self._volume_for(claim, storage_class, name)
        except ProvisioningFailed as exc:
            message = f'failed to provision volume with StorageClass "{claim_class(claim)}": {exc}'
            self.recorder.event(claim, "Warning", "ProvisioningFailed", message)
            raise
        self.recorder.event(
            claim,
            "Normal",
            "Provisioning",
            f'External provisioner is provisioning volume for claim "{key}"',
        )
        try:
            await self.client.create(VOLUMES, volume)
        except AlreadyExists:
            return
        log.info("claim %s: provisioned volume %s at %s", key, name,
                 volume["spec"]["hostPath"]["path"])  # fmt: skip
        self.recorder.event(
            claim, "Normal", "ProvisioningSucceeded", f"Successfully provisioned volume {name}"
        )

    def _volume_for(self, claim: Obj, storage_class: Obj, name: str) -> Obj:
        """The PersistentVolume for ``claim``, or ``ProvisioningFailed``."""
        node_name = _annotations(claim).get(ANN_SELECTED_NODE)
        if not node_name:
            raise ProvisioningFailed("configuration error, no node was specified")
        node = self.nodes.get(node_name)
        if node is None:
            raise ProvisioningFailed(f'node "{node_name}" not found')
        root = _annotations(node).get(LOCAL_PATH_ROOT_ANNOTATION)
        if not root:
            raise ProvisioningFailed(
                f'node "{node_name}" does not publish its local storage root '
                f"(annotation {LOCAL_PATH_ROOT_ANNOTATION})"
            )
        meta, spec = _meta(claim), claim.get("spec") or {}
        path = os.path.join(str(root), f"{name}_{meta.get('namespace')}_{meta['name']}")
        hostname = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "annotations": {ANN_PROVISIONED_BY: LOCAL_PATH_PROVISIONER},
            },
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": list(spec.get("accessModes") or []),
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "storageClassName": claim_class(claim),
                "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                "hostPath": {"path": path, "type": "DirectoryOrCreate"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    hostname
                ]}]}},
                "claimRef": claim_reference(claim),
            },
        }  # fmt: skip

    # -- deletion -------------------------------------------------------------------------

    async def sync_volume(self, name: str) -> float | None:
        volume = self.volumes.get(name)
        if volume is None or _annotations(volume).get(ANN_PROVISIONED_BY) != LOCAL_PATH_PROVISIONER:
            self._retries.pop(name, None)
            return None
        spec = volume.get("spec") or {}
        released = (volume.get("status") or {}).get("phase") == "Released"
        if not released or spec.get("persistentVolumeReclaimPolicy") != "Delete":
            return None
        pod = self.pods.get(f"{HELPER_NAMESPACE}/{helper_pod_name(name)}")
        if pod is None:
            return await self._start_helper(volume)
        if _meta(pod).get("deletionTimestamp"):
            return None  # a previous attempt's pod is going away; its deletion brings us back
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Succeeded":
            await self._delete_helper(name)
            try:
                await self.client.delete(
                    VOLUMES, name, preconditions={"uid": str(_meta(volume)["uid"])}
                )
            except NotFound:
                pass
            self._retries.pop(name, None)
            log.info("volume %s: directory removed, volume deleted", name)
        elif phase == "Failed":
            retry = self._retries.setdefault(name, _Retry())
            delay = retry.backoff.next_delay()
            retry.not_before = asyncio.get_running_loop().time() + delay
            message = f"failed to delete volume {name}: helper pod {helper_pod_name(name)} failed"
            self.recorder.event(volume, "Warning", "VolumeFailedDelete", message)
            log.warning("%s; will start another in %.1fs", message, delay)
            await self._delete_helper(name)
        return None

    async def _start_helper(self, volume: Obj) -> float | None:
        """Start the helper pod, or say how long the last failure's backoff still runs."""
        name = str(_meta(volume)["name"])
        retry = self._retries.get(name)
        wait = retry.not_before - asyncio.get_running_loop().time() if retry else 0.0
        if wait > 0:
            return wait
        node = _volume_node(volume)
        path = ((volume.get("spec") or {}).get("hostPath") or {}).get("path")
        if not node or not path:
            message = f"failed to delete volume {name}: it names no single node and host path"
            self.recorder.event(volume, "Warning", "VolumeFailedDelete", message)
            raise DeletionFailed(message)
        try:
            await self.client.create(PODS, self._helper_pod(name, node=node, path=str(path)))
        except AlreadyExists:
            return None
        log.info("volume %s: helper pod on node %s removes %s", name, node, path)
        return None

    @staticmethod
    def _helper_pod(volume_name: str, *, node: str, path: str) -> Obj:
        parent = os.path.dirname(path.rstrip("/")) or "/"
        container = {
            "name": "helper-pod",
            "image": HELPER_IMAGE,
            "command": ["sh", "-c", 'rm -rf "$VOL_DIR"'],
            "env": [{"name": "VOL_DIR", "value": path}],
            "volumeMounts": [{"name": "data", "mountPath": parent}],
        }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": helper_pod_name(volume_name), "namespace": HELPER_NAMESPACE},
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "tolerations": [{"operator": "Exists"}],
                "containers": [container],
                "volumes": [
                    {"name": "data", "hostPath": {"path": parent, "type": "DirectoryOrCreate"}}
                ],
            },
        }

    async def _delete_helper(self, volume_name: str) -> None:
        try:
            await self.client.delete(
                PODS, helper_pod_name(volume_name), namespace=HELPER_NAMESPACE,
                grace_period_seconds=0,
            )  # fmt: skip
        except NotFound:
            pass
