"""The kubelet's ``/metrics``: the kubelet's metric names (``pkg/kubelet/metrics``).

Why: "how long do pods take to start on this node, and is the runtime the slow part" is what
a node's metrics answer. ``KubeletMetrics`` (one per kubelet process, all its nodes together)
holds:

* ``kubelet_pod_start_duration_seconds``: from the kubelet first seeing a pod to the pod's
  status first turning Running (the status manager reports it; a pod found Running after a
  restart is not counted, as in Kubernetes);
* ``kubelet_runtime_operations_total{operation_type}``,
  ``kubelet_runtime_operations_duration_seconds{operation_type}`` and
  ``kubelet_runtime_operations_errors_total{operation_type}``: every call into the runtime, by
  ``MeasuredRuntime``, under the CRI's names (``run_podsandbox``, ``remove_podsandbox``,
  ``pull_image``, ``start_container``, ``stop_container``, ``exec``);
* ``kubelet_running_pods`` (pods with a running container: kubelite's sandbox is not a
  process of its own) and ``kubelet_running_containers{container_state}``: read from the
  runtimes at each scrape.

Served on the kubelet's server (``--port``, 10250) at ``/metrics``, behind the kubelet's
authentication and authorization (``auth``: subresource ``metrics``), as in Kubernetes.
Not here: cAdvisor's container metrics, PLEG, eviction and volume metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Final

from prometheus_client import Counter, Histogram

from component.metrics import Metrics, Samples, exponential_buckets
from services.kubelet.runtime.base import (
    ContainerConfig,
    ContainerRecord,
    ExecSession,
    ImageRef,
    PodSandbox,
    Runtime,
)

__all__ = ["KubeletMetrics", "MeasuredRuntime"]

_POD_START_BUCKETS: Final = (
    0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200,
    1800, 2700, 3600,
)  # fmt: skip
"""The kubelet's ``PodStartDuration`` buckets."""

_OPERATION_BUCKETS: Final = exponential_buckets(0.005, 2.5, 14)
"""The kubelet's ``RuntimeOperationsDuration`` buckets (5 ms to ~745 s)."""


class KubeletMetrics:
    """One kubelet process's metrics; ``runtimes`` is read at each scrape."""

    def __init__(self, *, runtimes: Callable[[], Iterable[Runtime]]) -> None:
        self.metrics = Metrics()
        m = self.metrics
        self.pod_start = m.histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod "
            "starting to run",
            buckets=_POD_START_BUCKETS,
        )
        self.operations = m.counter(
            "kubelet_runtime_operations_total",
            "Cumulative number of runtime operations by operation type.",
            ("operation_type",),
        )
        self.operation_errors = m.counter(
            "kubelet_runtime_operations_errors_total",
            "Cumulative number of runtime operation errors by operation type.",
            ("operation_type",),
        )
        self.operation_duration = m.histogram(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            ("operation_type",),
            buckets=_OPERATION_BUCKETS,
        )

        self._children: dict[str, tuple[Counter, Histogram]] = {}
        """Each operation type's count and duration series, looked up once (``labels`` cost
        more than the count and the observation); the error series is made on the first error
        only, so an operation that never failed shows none, as before."""

        def running_pods() -> Samples:
            pods = {c.pod_uid for r in runtimes() for c in r.list_containers() if c.running}
            return [((), float(len(pods)))]

        def running_containers() -> Samples:
            running = sum(1 for r in runtimes() for c in r.list_containers() if c.running)
            return [(("running",), float(running))]

        m.gauges(
            "kubelet_running_pods",
            "Number of pods that have a running pod sandbox",
            (),
            running_pods,
        )
        m.gauges(
            "kubelet_running_containers",
            "Number of containers currently running",
            ("container_state",),
            running_containers,
        )

    def operation(self, operation_type: str) -> _Operation:
        """Count and time the runtime call made inside (``with``); an exception out of it is
        an error."""
        children = self._children.get(operation_type)
        if children is None:
            children = self._children[operation_type] = (
                self.operations.labels(operation_type),
                self.operation_duration.labels(operation_type),
            )
        return _Operation(self, operation_type, children)

    def render(self) -> str:
        return self.metrics.render()


class _Operation:
    """One runtime call being counted and timed (a class, not a generator context manager:
    there are several per pod start)."""

    __slots__ = ("_children", "_metrics", "_started", "_type")

    def __init__(
        self, metrics: KubeletMetrics, operation_type: str, children: tuple[Counter, Histogram]
    ) -> None:
        self._metrics = metrics
        self._type = operation_type
        self._children = children
        self._started = time.monotonic()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        total, duration = self._children
        total.inc()
        duration.observe(time.monotonic() - self._started)
        if exc_type is not None:
            self._metrics.operation_errors.labels(self._type).inc()


class MeasuredRuntime:
    """``inner``, with each operation counted and timed on ``metrics``.

    ``wait_container`` is not an operation (it lasts as long as the container) and the listing
    calls are not timed (they read memory)."""

    def __init__(self, inner: Runtime, metrics: KubeletMetrics) -> None:
        self.inner = inner
        self.name = inner.name
        self.version = inner.version
        self._metrics = metrics

    @property
    def sandboxed(self) -> bool:
        return self.inner.sandboxed

    @property
    def sandbox_unavailable_reason(self) -> str | None:
        return self.inner.sandbox_unavailable_reason

    async def run_pod_sandbox(self, sandbox: PodSandbox) -> str:
        with self._metrics.operation("run_podsandbox"):
            return await self.inner.run_pod_sandbox(sandbox)

    async def remove_pod_sandbox(self, pod_uid: str) -> None:
        with self._metrics.operation("remove_podsandbox"):
            await self.inner.remove_pod_sandbox(pod_uid)

    async def pull_image(self, image: str, *, policy: str) -> tuple[ImageRef, bool]:
        with self._metrics.operation("pull_image"):
            return await self.inner.pull_image(image, policy=policy)

    async def start_container(
        self, sandbox: PodSandbox, config: ContainerConfig, *, image: ImageRef
    ) -> ContainerRecord:
        with self._metrics.operation("start_container"):
            return await self.inner.start_container(sandbox, config, image=image)

    async def wait_container(self, container_id: str) -> ContainerRecord:
        return await self.inner.wait_container(container_id)

    async def stop_container(self, container_id: str, *, grace_period: float) -> ContainerRecord:
        with self._metrics.operation("stop_container"):
            return await self.inner.stop_container(container_id, grace_period=grace_period)

    def pod_ip(self, pod_uid: str) -> str | None:
        return self.inner.pod_ip(pod_uid)

    def list_containers(self, pod_uid: str | None = None) -> list[ContainerRecord]:
        return self.inner.list_containers(pod_uid)

    def list_pod_uids(self) -> list[str]:
        return self.inner.list_pod_uids()

    async def exec(
        self, container_id: str, command: list[str], *, tty: bool, stdin: bool
    ) -> ExecSession:
        with self._metrics.operation("exec"):
            return await self.inner.exec(container_id, command, tty=tty, stdin=stdin)

    async def close(self) -> None:
        await self.inner.close()
