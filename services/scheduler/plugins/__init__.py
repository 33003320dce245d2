"""The in-tree plugins, by the name a ``--config`` file enables them with.

Each module is one plugin, named for the Kubernetes plugin it mirrors. A plugin implements any
of the extension-point Protocols in ``framework.py``; the config decides where it runs. Each is
made by a factory given the framework's ``Handle``; most need nothing from it.
"""

from __future__ import annotations

from collections.abc import Callable

from services.scheduler.framework import Handle, Plugin
from services.scheduler.plugins.least_allocated import LeastAllocated
from services.scheduler.plugins.node_affinity import NodeAffinity
from services.scheduler.plugins.node_name import NodeName
from services.scheduler.plugins.node_ready import NodeReady
from services.scheduler.plugins.node_unschedulable import NodeUnschedulable
from services.scheduler.plugins.resources_fit import NodeResourcesFit
from services.scheduler.plugins.selector_spread import SelectorSpread
from services.scheduler.plugins.taint_toleration import TaintToleration
from services.scheduler.plugins.volume_binding import VolumeBinding

__all__ = ["IN_TREE", "PluginFactory"]

PluginFactory = Callable[[Handle], Plugin]


def _without_handle(plugin: Callable[[], Plugin]) -> PluginFactory:
    def make(handle: Handle) -> Plugin:
        return plugin()

    return make


IN_TREE: dict[str, PluginFactory] = {
    **{
        p.name: _without_handle(p)
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
    },
    VolumeBinding.name: VolumeBinding,
}
"""Plugin name -> factory."""
