"""``kubelite.testing``: a pytest plugin that runs a real kubelite control plane for your tests.

What envtest is for controller-runtime: an operator's tests talk to a real apiserver (and, if
they want pods to get scheduled and run, a real scheduler, controller-manager and simulated
kubelet), each its own OS process on loopback. Enable it in a ``conftest.py``::

    pytest_plugins = ["kubelite.testing"]

Fixtures:

* ``kubelite_processes``: a ``Processes`` factory — ``.apiserver()``, ``.scheduler(server)``,
  ``.controller_manager(server)``, ``.kubelet(server, node_name)`` start (and wait for) one
  component each, logs in the test's tmp dir; every process it started is stopped at teardown
  (``stop_all()``: the apiservers last).
* ``kubelite_control_plane``: a whole control plane — the apiserver over the memory store, the
  scheduler, the controller-manager and one ``kubelet --runtime sim`` hosting two nodes
  (``sim-0``, ``sim-1``) — as a ``ControlPlane`` with ``url`` and a ``kubeconfig`` file.
* ``kubelite_apiserver``: the apiserver alone (memory store); its URL is ``.url``.

Processes are started with port 0 and their ports read back (``kubelite.testing.process``), so
any number of tests and control planes can run side by side on one host.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kubelite.testing import components
from kubelite.testing.process import ComponentFailed, ComponentProcess

pytest_plugins = ["kubelite.testing.fixtures"]
"""The fixtures live apart, so the launcher imports without pytest (the benchmarks use it)."""

__all__ = [
    "ComponentFailed",
    "ComponentProcess",
    "ControlPlane",
    "Processes",
    "kubeconfig",
]


def kubeconfig(server: str) -> str:
    """A kubeconfig naming ``server`` (plain HTTP on loopback, no credentials)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubelite", "cluster": {"server": server}}],
        "users": [{"name": "kubelite", "user": {}}],
        "contexts": [{"name": "kubelite", "context": {"cluster": "kubelite", "user": "kubelite"}}],
        "current-context": "kubelite",
    }
    return json.dumps(doc, indent=2) + "\n"


class Processes:
    """Starts components under ``root`` (state and logs); ``stop_all()`` stops them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: list[ComponentProcess] = []

    def _unique(self, stem: str) -> str:
        return f"{stem}-{sum(p.name.startswith(stem) for p in self.started)}"

    def _run(self, proc: ComponentProcess, start: bool) -> ComponentProcess:
        self.started.append(proc)
        return proc.start() if start else proc

    def apiserver(
        self,
        *,
        store: str | None = None,
        args: Sequence[str] = (),
        start: bool = True,
        secure: bool = False,
    ) -> ComponentProcess:
        """An apiserver; SQLite in ``root`` unless ``store`` says otherwise (``memory://``);
        with ``secure`` its TLS port too (``port_of("secure")``, certificates in
        ``<state_dir>/pki``)."""
        key = self._unique("apiserver")
        proc = components.apiserver(
            store=store or f"sqlite:///{self.root / key}.db",
            state_dir=self.root / key,
            log_path=self.root / f"{key}.log",
            args=args,
            secure=secure,
        )
        return self._run(proc, start)

    def scheduler(
        self, server: str, *, args: Sequence[str] = (), start: bool = True
    ) -> ComponentProcess:
        key = self._unique("scheduler")
        proc = components.scheduler(server=server, log_path=self.root / f"{key}.log", args=args)
        return self._run(proc, start)

    def controller_manager(
        self, server: str, *, args: Sequence[str] = (), start: bool = True
    ) -> ComponentProcess:
        key = self._unique("controller-manager")
        proc = components.controller_manager(
            server=server, log_path=self.root / f"{key}.log", args=args
        )
        return self._run(proc, start)

    def kubelet(
        self,
        server: str,
        node_name: str,
        *,
        runtime: str = "sim",
        args: Sequence[str] = (),
        start: bool = True,
    ) -> ComponentProcess:
        proc = components.kubelet(
            server=server,
            node_name=node_name,
            runtime=runtime,
            state_dir=self.root / f"kubelet-{node_name}",
            log_path=self.root / f"kubelet-{node_name}.log",
            args=args,
        )
        return self._run(proc, start)

    def dns(
        self,
        server: str,
        *,
        address: str,
        port: int = 0,
        args: Sequence[str] = (),
        start: bool = True,
    ) -> ComponentProcess:
        key = self._unique("dns")
        proc = components.dns(
            server=server, address=address, port=port, log_path=self.root / f"{key}.log",
            args=args,
        )  # fmt: skip
        return self._run(proc, start)

    def stop_all(self) -> None:
        """Every component but the apiservers at once, then the apiservers newest first.

        The others only ever talk to an apiserver, never to each other, so none waits for
        another on its way out — stopping them one after the other only added their shutdown
        times up (a second or more each on a busy machine, at every test's teardown). The
        apiservers go last: a kubelet stopping its pods still reports to one. Each process gets
        its own ``stop()`` (SIGTERM, SIGKILL after its grace)."""
        newest_first = list(reversed(self.started))
        others = [p for p in newest_first if p.component != "apiserver"]
        if others:
            with ThreadPoolExecutor(len(others), thread_name_prefix="stop") as pool:
                list(pool.map(lambda proc: proc.stop(), others))
        for proc in newest_first:
            if proc.component == "apiserver":
                proc.stop()

    def tails(self, lines: int = 40) -> str:
        return "\n".join(f"===== {p.log_path.name}\n{p.tail(lines)}" for p in self.started)


@dataclass(frozen=True)
class ControlPlane:
    url: str
    kubeconfig: Path
    processes: Processes
