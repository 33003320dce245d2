"""The scheduling framework: extension-point Protocols, the Status they return, the cycle state.

Shaped after kube-scheduler's ``framework/interface.go``: one tiny Protocol per extension point
(PreFilter, Filter, PreScore, Score with its optional normalisation), so a plugin implements only
the points it cares about, and a ``Framework`` that runs the enabled plugins in order over a
list of candidate nodes and picks one. A ``Status`` code says *why* a node was rejected, because
the queue treats the reasons differently:

* ``UNSCHEDULABLE``: the pod does not fit now but might after a change on this node (resources).
* ``UNSCHEDULABLE_AND_UNRESOLVABLE``: no change to the *other* pods will help (selector, taint).
* ``ERROR``: something broke; the pod is retried with backoff and the error is logged.
* ``SKIP`` (from PreFilter/PreScore only): this plugin has nothing to say about this pod, so its
  Filter/Score is not run at all — the cheap path for the common pod without constraints.

Plugins are synchronous and must not await: one scheduling cycle reads the cache and assumes the
chosen node without yielding to the event loop, so no informer event can change the cache half
way through a decision.

A filter plugin may declare ``node_static = True``: its answer depends only on the pod's
constraints (``PodInfo.constraint_key``: nodeName, nodeSelector, required affinity,
tolerations) and on the node's own labels, taints, schedulability and readiness — never on the
pods placed there. The framework then runs those filters once per (constraints, node set) and
remembers which nodes passed, so a burst of replicas pays only for the dynamic filters
(resources). Static filters run before dynamic ones whatever their configured order.

Two optional batch forms exist for the per-node hot spots, because a Python call per node is
most of a cycle's cost on a large cluster: a filter may add ``filter_each(state, pod, nodes)``
(a generator of per-node answers, consumed only as far as the search goes: ``BatchFilterPlugin``)
and a score plugin ``score_all(state, pod, nodes)`` (a list: ``BatchScorePlugin``). They must
answer exactly as ``filter``/``score`` would; the framework uses them when it can (a single
dynamic filter; any scorer).

After a node is chosen, two more points run for the pod (kube-scheduler's Reserve and PreBind):
``reserve`` in the scheduling cycle itself (synchronous, like the filters: a plugin records what
the next cycles must already see, such as the node a shared claim is now held to) and
``pre_bind`` in the binding cycle, which *may* await — it makes the API writes the binding
depends on (a claim's selected node) and waits for them to take effect. A failure at either
undoes every reservation (``unreserve``) and sends the pod back to the queue. ``Handle`` is what
a plugin is built with: the scheduler's storage view and, for PreBind writes, the API client.

What this module does not do: preemption, permit and post-bind points, more than one profile,
and extenders.
"""

from __future__ import annotations

import enum
import random
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard, runtime_checkable

from client.rest import ApiClient
from services.scheduler.nodeinfo import NodeInfo, PodInfo
from services.scheduler.volumes import VolumeCache

__all__ = [
    "MAX_NODE_SCORE",
    "SKIP",
    "BatchFilterPlugin",
    "BatchScorePlugin",
    "Code",
    "CycleState",
    "Diagnosis",
    "FilterPlugin",
    "FitError",
    "Framework",
    "Handle",
    "Plugin",
    "PreBindPlugin",
    "PreFilterPlugin",
    "PreScorePlugin",
    "ReservePlugin",
    "ScheduleResult",
    "ScoreNormalizer",
    "ScorePlugin",
    "Status",
    "default_normalize_score",
    "num_feasible_nodes_to_find",
]

MAX_NODE_SCORE = 100
"""Every score plugin scores a node in [0, MAX_NODE_SCORE] after normalisation, as kube-scheduler."""

# kube-scheduler's own floors for "how many feasible nodes are enough": never fewer than 100
# nodes, never less than 5 % of the cluster, default percentage 50 - nodes/125.
_MIN_FEASIBLE_NODES = 100
_MIN_FEASIBLE_PERCENTAGE = 5


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    """What a plugin says about a pod (PreFilter) or a pod on one node (Filter).

    Plugins return ``None`` for success: it is the overwhelmingly common answer and the cheapest.
    ``reasons`` are the words a person reads in ``kubectl describe`` ("Insufficient cpu").
    """

    code: Code
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @classmethod
    def unschedulable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE, reasons)

    @classmethod
    def unresolvable(cls, *reasons: str) -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)

    @classmethod
    def error(cls, message: str) -> Status:
        return cls(Code.ERROR, (message,))

    def with_plugin(self, name: str) -> Status:
        return Status(self.code, self.reasons, name)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)


SKIP = Status(Code.SKIP)


class CycleState:
    """Data one scheduling cycle's plugins share: PreFilter computes, Filter and Score read.

    Keys are plugin-chosen strings (by convention the plugin name plus the extension point).
    ``skip_filter``/``skip_score`` hold the plugins whose PreFilter/PreScore returned SKIP.
    """

    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        """The value a previous extension point wrote; KeyError if it never ran."""
        return self._data[key]


@dataclass(frozen=True, slots=True)
class Handle:
    """What a plugin is built with (kube-scheduler's ``framework.Handle``, cut down).

    ``volumes`` is the scheduler's storage view (claims, volumes, classes); ``client`` the API
    client PreBind writes through — None in a framework that never binds (unit tests).
    """

    volumes: VolumeCache = field(default_factory=VolumeCache)
    client: ApiClient | None = None


# ---- the extension points -------------------------------------------------------------------


@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        """Once per cycle: precompute into ``state``; SKIP to not run Filter; a rejection fails every node."""
        ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        """Can ``pod`` run on ``node``? None if yes, a rejection Status with reasons if not."""
        ...


class BatchFilterPlugin(FilterPlugin, Protocol):
    def filter_each(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Iterable[Status | None]:
        """``filter`` for each of ``nodes`` in order, consumed only as far as the search goes."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        """Once per cycle over the feasible nodes; SKIP to not run Score."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """A raw score for ``pod`` on the feasible ``node``; normalised afterwards if needed."""
        ...


class BatchScorePlugin(ScorePlugin, Protocol):
    def score_all(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        """``score`` for every one of ``nodes``, same order."""
        ...


@runtime_checkable
class ScoreNormalizer(Plugin, Protocol):
    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[int]) -> None:
        """Rescale this plugin's raw scores (in place, one per feasible node) into [0, 100]."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        """In the scheduling cycle, once ``node`` is chosen: record what later cycles must see."""
        ...

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Undo ``reserve`` (idempotent): the reservation or the binding cycle failed."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        """In the binding cycle, before the pod is bound: the writes the binding depends on."""
        ...


def _has_filter_each(plugin: FilterPlugin) -> TypeGuard[BatchFilterPlugin]:
    return hasattr(plugin, "filter_each")


def _has_score_all(plugin: ScorePlugin) -> TypeGuard[BatchScorePlugin]:
    return hasattr(plugin, "score_all")


def default_normalize_score(scores: list[int], *, reverse: bool = False) -> None:
    """Scale so the highest score becomes MAX_NODE_SCORE; ``reverse`` makes lower better."""
    highest = max(scores, default=0)
    if highest == 0:
        if reverse:
            scores[:] = [MAX_NODE_SCORE] * len(scores)
        return
    for i, s in enumerate(scores):
        s = MAX_NODE_SCORE * s // highest
        scores[i] = MAX_NODE_SCORE - s if reverse else s


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int) -> int:
    """How many feasible nodes to look for before scoring, as kube-scheduler decides it.

    Filtering every node of a large cluster buys little: the best of a few hundred is as good as
    the best of thousands. ``percentage`` 0 means adaptive (50 % minus 1 % per 125 nodes, at
    least 5 %); at least 100 nodes are always searched; 100 means all.
    """
    if num_all_nodes < _MIN_FEASIBLE_NODES or percentage >= 100:
        return num_all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = max(50 - num_all_nodes // 125, _MIN_FEASIBLE_PERCENTAGE)
    return max(num_all_nodes * adaptive // 100, _MIN_FEASIBLE_NODES)


@dataclass(frozen=True, slots=True)
class _StaticPass:
    nodes: Sequence[NodeInfo]
    version: int | None
    passed: list[NodeInfo]
    rejected: dict[str, Status]


# ---- outcome of one cycle --------------------------------------------------------------------


@dataclass(slots=True)
class Diagnosis:
    """Why each node was rejected (by node name), and which plugins did the rejecting."""

    node_statuses: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pre_filter_message: str = ""


NO_NODES_MESSAGE = "no nodes available to schedule pods"


class FitError(Exception):
    """No node fits the pod; the message is worded as kube-scheduler words it.

    ``0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node
    affinity/selector.`` — one count per distinct reason, sorted as strings.
    """

    def __init__(self, *, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis
        super().__init__(self.render())

    def render(self) -> str:
        if self.num_all_nodes == 0:
            return NO_NODES_MESSAGE
        message = f"0/{self.num_all_nodes} nodes are available:"
        if self.diagnosis.pre_filter_message:
            return f"{message} {self.diagnosis.pre_filter_message}."
        histogram: dict[str, int] = {}
        for status in self.diagnosis.node_statuses.values():
            for reason in status.reasons:
                histogram[reason] = histogram.get(reason, 0) + 1
        parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
        if parts:
            message += " " + ", ".join(parts) + "."
        return message

    @property
    def unresolvable(self) -> bool:
        """True when every node failed for a reason no change to other pods can fix."""
        statuses = self.diagnosis.node_statuses.values()
        return bool(statuses) and all(
            s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for s in statuses
        )


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    node: str
    evaluated_nodes: int
    feasible_nodes: int
    state: CycleState = field(default_factory=CycleState)
    """The cycle's state, for the Reserve and PreBind points that follow."""


# ---- the runner ------------------------------------------------------------------------------


class Framework:
    """Runs one profile's enabled plugins: filter the nodes, score the feasible ones, pick one.

    ``percentage_of_nodes_to_score`` bounds the search as ``num_feasible_nodes_to_find`` says;
    the next cycle starts where the last one stopped, so every node gets its turn.
    """

    STATIC_CACHE_SIZE = 256
    """Distinct pod constraint sets whose static filter results are remembered."""

    def __init__(
        self,
        *,
        pre_filter: Sequence[PreFilterPlugin] = (),
        filter: Sequence[FilterPlugin] = (),
        pre_score: Sequence[PreScorePlugin] = (),
        score: Sequence[tuple[ScorePlugin, int]] = (),
        reserve: Sequence[ReservePlugin] = (),
        pre_bind: Sequence[PreBindPlugin] = (),
        percentage_of_nodes_to_score: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        self.pre_filter_plugins = list(pre_filter)
        self.filter_plugins = list(filter)
        self.pre_score_plugins = list(pre_score)
        self.score_plugins = list(score)
        self.reserve_plugins = list(reserve)
        self.pre_bind_plugins = list(pre_bind)
        # isinstance() against a runtime-checkable Protocol is slow: decide once, not per cycle
        self._batch_filters = {p.name: p for p in self.filter_plugins if _has_filter_each(p)}
        self._batch_scorers = {p.name: p for p, _ in self.score_plugins if _has_score_all(p)}
        self._normalizers = {
            p.name: p for p, _ in self.score_plugins if isinstance(p, ScoreNormalizer)
        }
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._rng = rng or random.Random()
        self._next_start = 0
        self._static: OrderedDict[str, _StaticPass] = OrderedDict()

    @property
    def plugin_names(self) -> list[str]:
        seen: dict[str, None] = {}
        for p in (*self.pre_filter_plugins, *self.filter_plugins, *self.pre_score_plugins):
            seen[p.name] = None
        for p, _ in self.score_plugins:
            seen[p.name] = None
        for p in (*self.reserve_plugins, *self.pre_bind_plugins):
            seen[p.name] = None
        return list(seen)

    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        for plugin in self.pre_filter_plugins:
            status = plugin.pre_filter(state, pod)
            if status is None:
                continue
            if status.code == Code.SKIP:
                state.skip_filter.add(plugin.name)
                continue
            return status.with_plugin(plugin.name)
        return None

    def _static_pass(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: Sequence[NodeInfo],
        plugins: Sequence[FilterPlugin],
        nodes_version: int | None,
    ) -> _StaticPass:
        """Run the node-static filters over every node, or reuse the last identical run."""
        key = pod.constraint_key if nodes_version is not None else ""
        if key:
            cached = self._static.get(key)
            if cached is not None and cached.nodes is nodes and cached.version == nodes_version:
                self._static.move_to_end(key)
                return cached
        passed: list[NodeInfo] = []
        rejected: dict[str, Status] = {}
        filters = [p.filter for p in plugins]
        for node in nodes:
            for run in filters:
                status = run(state, pod, node)
                if status is not None:
                    plugin = plugins[filters.index(run)]
                    if status.code == Code.ERROR:
                        raise RuntimeError(f"filter plugin {plugin.name} failed: {status.message}")
                    rejected[node.name] = status.with_plugin(plugin.name)
                    break
            else:
                passed.append(node)
        result = _StaticPass(nodes, nodes_version, passed, rejected)
        if key:
            self._static[key] = result
            if len(self._static) > self.STATIC_CACHE_SIZE:
                self._static.popitem(last=False)
        return result

    @staticmethod
    def _filter_each(
        state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], plugins: Sequence[FilterPlugin]
    ) -> Iterator[Status | None]:
        """Run ``plugins`` in order on each node: the first rejection (with its plugin) or None."""
        filters = [p.filter for p in plugins]
        for node in nodes:
            verdict: Status | None = None
            for plugin, run in zip(plugins, filters, strict=True):
                verdict = run(state, pod, node)
                if verdict is not None:
                    verdict = verdict.with_plugin(plugin.name)
                    break
            yield verdict

    def find_feasible(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: Sequence[NodeInfo],
        diagnosis: Diagnosis,
        *,
        nodes_version: int | None = None,
    ) -> tuple[list[NodeInfo], int]:
        """Feasible nodes (at most the number worth finding) and how many nodes were examined.

        ``nodes_version`` (the cache's count of node-static changes) lets the static filters'
        results be reused while neither it nor the ``nodes`` list object changes.
        """
        total = len(nodes)
        wanted = num_feasible_nodes_to_find(total, self.percentage_of_nodes_to_score)
        plugins = [p for p in self.filter_plugins if p.name not in state.skip_filter]
        static = [p for p in plugins if getattr(p, "node_static", False)]
        dynamic = [p for p in plugins if not getattr(p, "node_static", False)]
        if static:
            first = self._static_pass(state, pod, nodes, static, nodes_version)
            candidates: Sequence[NodeInfo] = first.passed
            static_rejections = first.rejected
        else:
            candidates, static_rejections = nodes, {}
        feasible: list[NodeInfo] = []
        count = len(candidates)
        start = self._next_start % count if count else 0
        examined = 0
        order = [*candidates[start:], *candidates[:start]] if start else candidates
        batch = self._batch_filters.get(dynamic[0].name) if len(dynamic) == 1 else None
        if batch is not None:
            verdicts: Iterable[Status | None] = batch.filter_each(state, pod, order)
            runners = [dynamic[0]]
        else:
            verdicts = self._filter_each(state, pod, order, dynamic)
            runners = dynamic
        for node, rejected in zip(order, verdicts, strict=False):
            examined += 1
            if rejected is None:
                feasible.append(node)
                if len(feasible) >= wanted:
                    break
                continue
            name = rejected.plugin or runners[0].name
            if rejected.code == Code.ERROR:
                raise RuntimeError(f"filter plugin {name} failed: {rejected.message}")
            diagnosis.node_statuses[node.name] = rejected.with_plugin(name)
            diagnosis.unschedulable_plugins.add(name)
        self._next_start = (start + examined) % count if count else 0
        if not feasible and static_rejections:
            diagnosis.node_statuses.update(static_rejections)
            diagnosis.unschedulable_plugins.update(s.plugin for s in static_rejections.values())
        return feasible, examined + len(static_rejections)

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
        """Weighted total score of each node, same order as ``nodes``."""
        totals = [0] * len(nodes)
        for plugin in self.pre_score_plugins:
            status = plugin.pre_score(state, pod, nodes)
            if status is None:
                continue
            if status.code == Code.SKIP:
                state.skip_score.add(plugin.name)
            else:
                raise RuntimeError(f"pre-score plugin {plugin.name} failed: {status.message}")
        for scorer, weight in self.score_plugins:
            if scorer.name in state.skip_score:
                continue
            batch = self._batch_scorers.get(scorer.name)
            if batch is not None:
                scores = batch.score_all(state, pod, nodes)
            else:
                score = scorer.score
                scores = [score(state, pod, node) for node in nodes]
            normalizer = self._normalizers.get(scorer.name)
            if normalizer is not None:
                normalizer.normalize_score(state, pod, scores)
            for i, s in enumerate(scores):
                totals[i] += s * weight
        return totals

    def schedule(
        self, pod: PodInfo, nodes: Sequence[NodeInfo], *, nodes_version: int | None = None
    ) -> ScheduleResult:
        """Pick a node for ``pod`` among ``nodes``; raise FitError if none fits.

        Pass the cache's ``nodes_version`` to reuse node-static filter results (see above).

        Ties between the best-scoring nodes are broken at random, as kube-scheduler does, so
        identical nodes share a burst of identical pods instead of the first one taking all.
        """
        state = CycleState()
        diagnosis = Diagnosis()
        if not nodes:
            raise FitError(num_all_nodes=0, diagnosis=diagnosis)
        rejected = self.run_pre_filter(state, pod)
        if rejected is not None:
            if rejected.code == Code.ERROR:
                raise RuntimeError(
                    f"pre-filter plugin {rejected.plugin} failed: {rejected.message}"
                )
            diagnosis.pre_filter_message = rejected.message
            diagnosis.unschedulable_plugins.add(rejected.plugin)
            for node in nodes:
                diagnosis.node_statuses[node.name] = rejected
            raise FitError(num_all_nodes=len(nodes), diagnosis=diagnosis)
        feasible, examined = self.find_feasible(
            state, pod, nodes, diagnosis, nodes_version=nodes_version
        )
        if not feasible:
            raise FitError(num_all_nodes=len(nodes), diagnosis=diagnosis)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, examined, 1, state)
        totals = self.score_nodes(state, pod, feasible)
        chosen = _select_host(feasible, totals, self._rng)
        return ScheduleResult(chosen, examined, len(feasible), state)

    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        """Every Reserve plugin in order; on the first failure all are unreserved."""
        for plugin in self.reserve_plugins:
            status = plugin.reserve(state, pod, node)
            if status is not None:
                self.run_unreserve(state, pod, node)
                return status.with_plugin(plugin.name)
        return None

    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """Every Reserve plugin's ``unreserve``, in reverse order (kube-scheduler's)."""
        for plugin in reversed(self.reserve_plugins):
            plugin.unreserve(state, pod, node)

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status | None:
        """Every PreBind plugin in order; the first failure stops and is returned."""
        for plugin in self.pre_bind_plugins:
            status = await plugin.pre_bind(state, pod, node)
            if status is not None:
                return status.with_plugin(plugin.name)
        return None


def _select_host(nodes: Sequence[NodeInfo], totals: Sequence[int], rng: random.Random) -> str:
    """The best-scoring node; a uniformly random one among equal bests."""
    best_score = max(totals)
    best = [i for i, score in enumerate(totals) if score == best_score]
    return nodes[best[0] if len(best) == 1 else rng.choice(best)].name
