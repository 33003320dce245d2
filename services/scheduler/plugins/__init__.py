"""The in-tree plugins, by the name a ``--config`` file enables them with.

Each module is one plugin, named for the Kubernetes plugin it mirrors. A plugin implements any
of the extension-point Protocols in ``framework.py``; the config decides where it runs.
"""

from __future__ import annotations

from collections.abc import Callable

from services.scheduler.framework import Plugin
from services.scheduler.plugins.least_allocated import LeastAllocated
from services.scheduler.plugins.node_affinity import NodeAffinity
from services.scheduler.plugins.node_name import NodeName
from services.scheduler.plugins.node_ready import NodeReady
from services.scheduler.plugins.node_unschedulable import NodeUnschedulable
from services.scheduler.plugins.resources_fit import NodeResourcesFit
from services.scheduler.plugins.selector_spread import SelectorSpread
from services.scheduler.plugins.taint_toleration import TaintToleration

__all__ = ["IN_TREE"]

IN_TREE: dict[str, Callable[[], Plugin]] = {
    p.name: p
    for p in (
        NodeName,
        NodeUnschedulable,
        NodeReady,
        NodeAffinity,
        NodeResourcesFit,
        TaintToleration,
        LeastAllocated,
        SelectorSpread,
    )
}
"""Plugin name -> factory (the class)."""
