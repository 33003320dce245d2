"""The ``--config`` file: which plugins run, their score weights, and the queue's backoff.

A subset of kube-scheduler's ``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``)
in the same shape, so a person who knows one reads the other::

    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    percentageOfNodesToScore: 0        # 0 = adaptive, as kube-scheduler
    podInitialBackoffSeconds: 1
    podMaxBackoffSeconds: 10
    profiles:
    - schedulerName: default-scheduler
      plugins:
        multiPoint:                      # every extension point the plugin implements
          disabled: [{name: SelectorSpread}]
        score:
          enabled: [{name: NodeAffinity, weight: 5}]

Rules: each of ``multiPoint``, ``filter`` and ``score`` starts from the defaults; ``disabled``
removes names (``*`` removes them all); ``enabled`` appends names, or re-weights one already
there. ``preFilter`` follows ``filter`` and ``preScore`` follows ``score``: a plugin enabled for
filtering also gets its PreFilter run, and its Reserve and PreBind (VolumeBinding's) too. Limits: one profile only; no plugin arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from services.scheduler.framework import (
    FilterPlugin,
    Framework,
    Handle,
    Plugin,
    PreBindPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from services.scheduler.nodeinfo import DEFAULT_SCHEDULER_NAME
from services.scheduler.plugins import IN_TREE

__all__ = [
    "DEFAULT_FILTERS",
    "DEFAULT_SCORES",
    "Profile",
    "SchedulerConfig",
    "build_framework",
    "load_config",
]

# Cheapest and most decisive first, in kube-scheduler's default order; a node is rejected by
# the first filter that says no, so this order also decides which reason a person reads.
DEFAULT_FILTERS: tuple[str, ...] = (
    "NodeUnschedulable",
    "NodeName",
    "NodeReady",
    "TaintToleration",
    "NodeAffinity",
    "NodeResourcesFit",
    "VolumeBinding",
)
# kube-scheduler's default weights: taints 3, node affinity 2, resources 1; spreading 1 (the
# weight the historical SelectorSpread had).
DEFAULT_SCORES: tuple[tuple[str, int], ...] = (
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesLeastAllocated", 1),
    ("SelectorSpread", 1),
)


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, extra="forbid", frozen=True
    )


class PluginRef(_Model):
    name: str
    weight: int | None = Field(default=None, ge=1, le=100)

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name != "*" and name not in IN_TREE:
            raise ValueError(f"unknown plugin {name!r}; known: {', '.join(sorted(IN_TREE))}")
        return name


class PluginSet(_Model):
    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[PluginRef, ...] = ()


class Plugins(_Model):
    multi_point: PluginSet = PluginSet()
    filter: PluginSet = PluginSet()
    score: PluginSet = PluginSet()


class ProfileConfig(_Model):
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    plugins: Plugins = Plugins()


class SchedulerConfig(_Model):
    """The validated file (or the defaults, when no ``--config`` is given)."""

    api_version: str = "kubescheduler.config.k8s.io/v1"
    kind: str = "KubeSchedulerConfiguration"
    percentage_of_nodes_to_score: int = Field(default=0, ge=0, le=100)
    pod_initial_backoff_seconds: float = Field(default=1.0, gt=0)
    pod_max_backoff_seconds: float = Field(default=10.0, gt=0)
    profiles: tuple[ProfileConfig, ...] = (ProfileConfig(),)

    @model_validator(mode="after")
    def _check(self) -> SchedulerConfig:
        if self.kind != "KubeSchedulerConfiguration":
            raise ValueError(f"kind must be KubeSchedulerConfiguration, not {self.kind!r}")
        if len(self.profiles) != 1:
            raise ValueError("exactly one profile is supported")
        if self.pod_max_backoff_seconds < self.pod_initial_backoff_seconds:
            raise ValueError("podMaxBackoffSeconds must be >= podInitialBackoffSeconds")
        return self

    @property
    def profile(self) -> Profile:
        return Profile.resolve(self.profiles[0])


def _apply(
    current: list[tuple[str, int]], plugin_set: PluginSet, *, default_weight: int
) -> list[tuple[str, int]]:
    disabled = {ref.name for ref in plugin_set.disabled}
    out = [] if "*" in disabled else [(n, w) for n, w in current if n not in disabled]
    for ref in plugin_set.enabled:
        if ref.name == "*":
            raise ValueError("'*' can only be disabled")
        weight = ref.weight or default_weight
        names = [n for n, _ in out]
        if ref.name in names:
            out[names.index(ref.name)] = (ref.name, ref.weight or out[names.index(ref.name)][1])
        else:
            out.append((ref.name, weight))
    return out


@dataclass(frozen=True, slots=True)
class Profile:
    """A profile resolved to ordered plugin names: filters, and scores with weights."""

    scheduler_name: str
    filters: tuple[str, ...]
    scores: tuple[tuple[str, int], ...]

    @classmethod
    def resolve(cls, cfg: ProfileConfig) -> Profile:
        filters = [(n, 1) for n in DEFAULT_FILTERS]
        scores = list(DEFAULT_SCORES)
        multi = cfg.plugins.multi_point
        filters = _apply(filters, multi, default_weight=1)
        scores = _apply(scores, multi, default_weight=1)
        filters = _apply(filters, cfg.plugins.filter, default_weight=1)
        scores = _apply(scores, cfg.plugins.score, default_weight=1)
        handle = Handle()
        instances = {n: IN_TREE[n](handle) for n, _ in (*filters, *scores)}
        # multiPoint enables a plugin only at the points it implements
        filters = [(n, w) for n, w in filters if isinstance(instances[n], FilterPlugin)]
        scores = [(n, w) for n, w in scores if isinstance(instances[n], ScorePlugin)]
        return cls(
            scheduler_name=cfg.scheduler_name,
            filters=tuple(n for n, _ in filters),
            scores=tuple(scores),
        )


def build_framework(config: SchedulerConfig, *, handle: Handle | None = None) -> Framework:
    """One instance of each enabled plugin, wired to the extension points it implements.

    ``handle`` is what the plugins are built with (the scheduler's storage view and API client);
    without one they see no claims, volumes or classes and cannot write.
    """
    profile = config.profile
    handle = handle or Handle()
    instances: dict[str, Plugin] = {}
    for name in (*profile.filters, *(n for n, _ in profile.scores)):
        instances.setdefault(name, IN_TREE[name](handle))
    filters = [instances[n] for n in profile.filters]
    scores = [(instances[n], w) for n, w in profile.scores]
    return Framework(
        pre_filter=[p for p in filters if isinstance(p, PreFilterPlugin)],
        filter=[p for p in filters if isinstance(p, FilterPlugin)],
        pre_score=[p for p, _ in scores if isinstance(p, PreScorePlugin)],
        score=[(p, w) for p, w in scores if isinstance(p, ScorePlugin)],
        reserve=[p for p in filters if isinstance(p, ReservePlugin)],
        pre_bind=[p for p in filters if isinstance(p, PreBindPlugin)],
        percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
    )


def load_config(path: str | Path | None) -> SchedulerConfig:
    """The config at ``path`` (YAML), or the defaults when ``path`` is None; ValueError if bad."""
    if path is None:
        return SchedulerConfig()
    raw: Any = yaml.safe_load(Path(path).read_text())
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{path}: a KubeSchedulerConfiguration mapping was expected")
    return SchedulerConfig.model_validate(raw)
