"""The serviceaccount controller: every namespace has a ``default`` ServiceAccount.

Why: pods name a service account (``spec.serviceAccountName``, ``default`` when unset), and
tools and client libraries expect ``default`` to exist in any namespace they create —
kube-controller-manager's ``serviceaccount`` controller (``pkg/controller/serviceaccount``,
``ServiceAccountsController``) guarantees it. This is that controller:

* an informer on namespaces enqueues a namespace when it is added or changes;
* an informer on service accounts enqueues the namespace of one that is deleted, so a deleted
  ``default`` comes back;
* ``sync(namespace)`` (level-triggered, from the caches): if the namespace exists and is
  ``Active`` and lacks an account it should have, create it. ``AlreadyExists`` (a lagging
  cache, or a user who made it first) is success; ``Forbidden``/``NotFound`` for a namespace
  going away is nothing to retry.

Limits: only ``default`` is ensured (Kubernetes' list is configurable but has only that);
no token Secrets are made (token projection comes with authentication, in a later issue).
"""

from __future__ import annotations

import logging
from typing import Any

from api.errors import AlreadyExists, Forbidden, NotFound
from api.registry import REGISTRY
from client.controller import Controller
from client.rest import ApiClient
from client.workqueue import WorkQueue
from services.controller_manager.informers import SharedInformers

__all__ = ["ACCOUNTS", "ServiceAccountsController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

ACCOUNTS = ("default",)
"""The accounts every namespace gets (``serviceAccountsToEnsure`` upstream)."""


class ServiceAccountsController:
    def __init__(self, *, client: ApiClient, informers: SharedInformers, workers: int = 1) -> None:
        self.name = "serviceaccount"
        self.client = client
        self.workers = workers
        self.sa_rt = REGISTRY.require("", "ServiceAccount")
        self.namespaces = informers.get(REGISTRY.require("", "Namespace"))
        self.accounts = informers.get(self.sa_rt)
        self.queue: WorkQueue[str] = WorkQueue(name="serviceaccount")
        self.namespaces.add_handler(
            on_add=self._namespace_changed, on_update=lambda _o, n: self._namespace_changed(n)
        )
        self.accounts.add_handler(on_delete=self._account_deleted)

    async def run(self) -> None:
        await Controller(
            name=self.name,
            queue=self.queue,
            reconcile=self.sync,
            workers=self.workers,
            wait_for=[self.namespaces, self.accounts],
        ).run()

    def _namespace_changed(self, ns: Obj) -> None:
        self.queue.add(str(ns["metadata"]["name"]))

    def _account_deleted(self, sa: Obj) -> None:
        meta = sa.get("metadata") or {}
        if meta.get("name") in ACCOUNTS and meta.get("namespace"):
            self.queue.add(str(meta["namespace"]))

    async def sync(self, namespace: str) -> float | None:
        ns = self.namespaces.get(namespace)
        if ns is None or (ns.get("status") or {}).get("phase") != "Active":
            return None  # gone or terminating: nothing to ensure
        for name in ACCOUNTS:
            if self.accounts.get(f"{namespace}/{name}") is not None:
                continue
            body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
            try:
                await self.client.create(self.sa_rt, body, namespace=namespace)
            except AlreadyExists:
                continue
            except (Forbidden, NotFound):
                log.info("namespace %s is going away; not creating serviceaccount %s", namespace,
                         name)  # fmt: skip
                return None
            log.info("created serviceaccount %s/%s", namespace, name)
        return None
