"""The component runtime: what every kubelite process (apiserver, scheduler, controller-manager,
kubelet, and the components still to come) shares about *being* a process.

Why: four processes were once written four ways — durations parsed two ways, ``-v`` meaning two
things, port 0 meaning "any free port" here and "disabled" there, signal handling and the
"run these tasks until one ends" loop written four times. Each ``services/*/main.py`` is now a
short composition of its parts handed to this package.

One module per concept:

* ``component.flags``: the shared flags and their one grammar (durations, ports, ``--log-level``
  and ``-v``, ``--server``, ``--healthz-*``, leader election);
* ``component.logs``: one logging setup;
* ``component.ready``: the ready lines a component prints (the contract launchers parse);
* ``component.listen``: binding an aiohttp server (port 0 = any free port, one policy on a bind
  failure);
* ``component.health``: the health/metrics/readiness HTTP server;
* ``component.metrics``: a component's own Prometheus registry and its ``/metrics`` page;
* ``component.tasks``: one supervised task group;
* ``component.run``: uvloop, SIGINT/SIGTERM -> graceful stop with a deadline, exit codes.

Layering: this package imports nothing of ours (like ``api/``), so ``client/`` and every service
may use it. It knows nothing of the apiserver's API.
"""

from component.errors import CannotListen, Fatal, TaskEnded
from component.health import HealthServer
from component.lifecycle import Service, run
from component.logs import setup_logging
from component.tasks import TaskGroup

__all__ = [
    "CannotListen",
    "Fatal",
    "HealthServer",
    "Service",
    "TaskEnded",
    "TaskGroup",
    "run",
    "setup_logging",
]
