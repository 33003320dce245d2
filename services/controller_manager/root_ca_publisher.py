"""The root-CA publisher: every namespace holds the ConfigMap ``kube-root-ca.crt``.

Why: a pod that talks to the apiserver through ``https://kubernetes.default.svc`` must trust its
serving certificate, so its token volume projects ``ca.crt`` from a ConfigMap of its own
namespace (``serviceaccount_admission`` in the apiserver adds that source).
kube-controller-manager's ``root-ca-cert-publisher`` (``pkg/controller/certificates/
rootcacertpublisher``) keeps that ConfigMap in every namespace; this is that controller:

* an informer on namespaces enqueues a namespace when it is added, and when it changes while
  ``Active``;
* an informer on ConfigMaps enqueues the namespace of a ``kube-root-ca.crt`` that is updated or
  deleted, so an edited one is put back and a deleted one comes back;
* ``sync(namespace)`` (level-triggered, from the caches): no ConfigMap -> create it with
  ``data: {ca.crt: <the CA bundle>}`` and the annotation ``kubernetes.io/description`` (a missing
  or terminating namespace is nothing to retry); a ConfigMap whose ``data`` differs or whose
  description is missing -> update it (a compare-and-swap on its resourceVersion; a conflict is
  retried with back-off by the controller loop, from the newer cache).

The bundle is what ``--root-ca-file`` names, read once at start (the controller-manager's main
decides where it comes from).

Limits: a CA rotated on disk is seen only when the controller-manager restarts (so is
Kubernetes'); the ConfigMap's other fields (labels, other annotations) are left as they are.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from api.errors import Forbidden, NotFound
from api.registry import REGISTRY
from client.controller import Controller
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.informers import SharedInformers

__all__ = ["CONFIGMAP", "DESCRIPTION", "DESCRIPTION_ANNOTATION", "RootCAPublisher"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CONFIGMAP = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


class RootCAPublisher:
    def __init__(self, *, client: ApiClient, informers: SharedInformers, root_ca: str) -> None:
        self.name = "root-ca-cert-publisher"
        self.client = client
        self.root_ca = root_ca
        self.cm_rt = REGISTRY.require("", "ConfigMap")
        self.namespaces = informers.get(REGISTRY.require("", "Namespace"))
        self.configmaps = informers.get(self.cm_rt)
        self.queue: WorkQueue[str] = WorkQueue(name="root_ca_cert_publisher")
        self.namespaces.add_handler(on_add=self._namespace_added, on_update=self._namespace_updated)
        self.configmaps.add_handler(
            on_update=lambda _old, new: self._configmap_changed(new),
            on_delete=self._configmap_changed,
        )

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            wait_for=[self.namespaces, self.configmaps],
        ).run()

    def _namespace_added(self, ns: Obj) -> None:
        self.queue.add(str(ns["metadata"]["name"]))

    def _namespace_updated(self, _old: Obj, ns: Obj) -> None:
        if (ns.get("status") or {}).get("phase") == "Active":
            self.queue.add(str(ns["metadata"]["name"]))

    def _configmap_changed(self, cm: Obj) -> None:
        meta = cm.get("metadata") or {}
        if meta.get("name") == CONFIGMAP and meta.get("namespace"):
            self.queue.add(str(meta["namespace"]))

    @property
    def data(self) -> dict[str, str]:
        return {"ca.crt": self.root_ca}

    async def sync(self, namespace: str) -> float | None:
        cm = self.configmaps.get(f"{namespace}/{CONFIGMAP}")
        if cm is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": CONFIGMAP,
                    "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION},
                },
                "data": self.data,
            }
            try:
                await self.client.create(self.cm_rt, body, namespace=namespace)
            except (NotFound, Forbidden):
                return None  # the namespace is gone or going: nothing to publish into
            log.info("published %s in namespace %s", CONFIGMAP, namespace)
            return None
        annotations = (cm.get("metadata") or {}).get("annotations") or {}
        if cm.get("data") == self.data and annotations.get(DESCRIPTION_ANNOTATION):
            return None
        new = copy.deepcopy(cm)
        new["data"] = self.data
        new["metadata"]["annotations"] = {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}
        await self.client.update(self.cm_rt, new, namespace=namespace)
        log.info("restored %s in namespace %s", CONFIGMAP, namespace)
        return None
