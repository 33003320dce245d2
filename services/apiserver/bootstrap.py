"""What exists from the first start: the system namespaces.

Kubernetes' apiserver creates ``default``, ``kube-system``, ``kube-public`` and
``kube-node-lease`` itself (the "system namespaces" controller), so a fresh cluster accepts pods
in ``default`` and kubelets' Leases in ``kube-node-lease`` without anyone creating them. This
runs at every start and creates whichever are missing; existing ones are left as they are.
"""

from __future__ import annotations

import logging

from api.errors import AlreadyExists
from services.apiserver.context import ApiContext
from services.apiserver.strategy import default_object, prepare_for_create

__all__ = ["ensure_namespaces"]

log = logging.getLogger(__name__)


async def ensure_namespaces(ctx: ApiContext) -> list[str]:
    """Create the missing initial namespaces; returns the names created."""
    rt = ctx.resource("", "namespaces")
    storage = ctx.storage(rt)
    created = []
    for name in ctx.options.initial_namespaces:
        if await storage.get_or_none(None, name) is not None:
            continue
        obj = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name}}
        prepare_for_create(rt, obj)
        default_object(rt, obj)
        try:
            await storage.create(obj)
        except AlreadyExists:
            continue
        created.append(name)
    if created:
        log.info("created namespaces %s", ", ".join(created))
    return created
