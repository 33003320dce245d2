"""``kubelite_cluster``: envtest for Python — a real apiserver for every test, in well under a second.

Why: an operator's tests want the real API — resourceVersions, watches, CRDs, 409s, admission —
not a mock, and not the seconds envtest spends starting a downloaded kube-apiserver and etcd.
This pytest plugin (entry point ``pytest11``, so installing kubelite enables it) gives each test
that asks for ``kubelite_cluster`` its own apiserver over the memory store:

* the apiserver runs **in this process**, on its own event loop in a daemon thread, listening on
  a free loopback port (plain HTTP; every request is the insecure port's superuser), so starting
  it costs no interpreter start-up; the object yielded is a ``KubeliteCluster`` with ``url``,
  ``kubeconfig`` (a file in the test's tmp dir, for kubectl, kopf or the official client's
  ``config.load_kube_config``) and ``api_client()`` (the official client, if installed);
* ``@pytest.mark.kubelite(controllers=True, scheduler=True, kubelet=True)`` adds the
  controller-manager, the scheduler and a ``kubelet --runtime sim`` (two simulated nodes), as
  real subprocesses (``kubelite.testing.Processes``) talking to it;
* teardown stops the subprocesses, then the server (every watch ended, the store closed), then
  the loop and its thread: no process, port or thread outlives the test.

Limits: each cluster starts empty (bootstrap objects only) and is not shared between tests; the
in-process apiserver shares the test's interpreter, so a test that blocks the GIL for long
stalls it too; there is no TLS or authentication (use ``kubelite_processes`` with
``secure=True`` for those).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kubelite.testing import Processes, kubeconfig

if TYPE_CHECKING:
    from services.apiserver.service import ApiServer

__all__ = ["KubeliteCluster", "kubelite_cluster", "start_cluster"]

MARKER = "kubelite"
START_TIMEOUT = 30.0
"""Seconds to wait for the in-process apiserver to listen (it takes a fraction of one)."""


@dataclass(frozen=True, slots=True)
class Components:
    """Which components besides the apiserver a cluster runs (the marker's keywords)."""

    controllers: bool = False
    scheduler: bool = False
    kubelet: bool = False


class KubeliteCluster:
    """A running control plane: the in-process apiserver and any component subprocesses."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kubeconfig = root / "kubeconfig"
        self.url = ""
        self.processes = Processes(root / "components")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubelite-apiserver")
        self._server: ApiServer | None = None

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=START_TIMEOUT)

    def start(self, components: Components = Components()) -> KubeliteCluster:
        # imported here: every pytest run loads this plugin, few of them start a cluster
        from services.apiserver.context import ServerOptions
        from services.apiserver.service import ApiServer

        self.root.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        options = ServerOptions(
            store_url="memory://", state_dir=self.root / "state", port=0, secure_port=-1
        )
        self._server = ApiServer(options)
        self._run(self._server.start())
        self.url = f"http://127.0.0.1:{self._server.port}"
        self.kubeconfig.write_text(kubeconfig(self.url))
        if components.controllers:
            self.processes.controller_manager(self.url)
        if components.scheduler:
            self.processes.scheduler(self.url)
        if components.kubelet:
            self.processes.kubelet(self.url, "sim", args=["--nodes", "2"])
        return self

    def stop(self) -> None:
        """Stop the subprocesses, then the apiserver, then its loop and thread."""
        try:
            self.processes.stop_all()
        finally:
            server, self._server = self._server, None
            if server is not None:
                self._run(server.stop())
            if self._thread.is_alive():
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join()
            self._loop.close()

    def api_client(self) -> Any:
        """An official ``kubernetes.client.ApiClient`` for this cluster (close it when done)."""
        from kubernetes import client  # a test dependency, not kubelite's

        configuration = client.Configuration()
        configuration.host = self.url  # what the kubeconfig says: plain HTTP, no credentials
        return client.ApiClient(configuration)


def start_cluster(
    root: Path, *, controllers: bool = False, scheduler: bool = False, kubelet: bool = False
) -> KubeliteCluster:
    """A started ``KubeliteCluster`` under ``root`` (outside pytest: benchmarks, scripts)."""
    components = Components(controllers=controllers, scheduler=scheduler, kubelet=kubelet)
    cluster = KubeliteCluster(root)
    try:
        return cluster.start(components)
    except BaseException:
        cluster.stop()
        raise


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(controllers=False, scheduler=False, kubelet=False): the components "
        "kubelite_cluster runs besides its apiserver",
    )


@pytest.fixture
def kubelite_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KubeliteCluster]:
    """A kubelite control plane for this test (module docstring); stopped afterwards."""
    marker = request.node.get_closest_marker(MARKER)
    cluster = start_cluster(tmp_path / "kubelite", **(marker.kwargs if marker else {}))
    try:
        yield cluster
    finally:
        cluster.stop()
