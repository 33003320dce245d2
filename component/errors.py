"""How a component ends: the exit codes, and the errors that choose them.

Why: a supervisor (``kubelite up``, docker compose, systemd, a test harness) decides from the
exit code alone whether restarting can help. So every component exits with one of these codes,
and an ending the component can explain is one line on stderr, never a traceback.

| code | meaning | restart? |
|---|---|---|
| 0 | stopped by SIGINT/SIGTERM, cleanly | no need |
| 1 | failed (lost its lease, its store failed, a task crashed, did not stop in time) | yes |
| 2 | usage error: a flag did not parse (argparse's own code) | no: fix the command line |
| 3 | cannot listen: a port is in use, or the address is not this host's | no: free the port |

A second SIGINT/SIGTERM while stopping exits at once with 128 + the signal number, as a shell
reports a process killed by that signal.
"""

from __future__ import annotations

__all__ = [
    "EXIT_CANNOT_LISTEN",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CannotListen",
    "Fatal",
    "TaskEnded",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANNOT_LISTEN = 3


class Fatal(Exception):
    """The component cannot go on, for a reason its message explains in one line.

    ``component.run`` prints ``kubelite <component>: <message>`` on stderr, without a
    traceback, and exits with ``exit_code``.
    """

    exit_code: int = EXIT_FAILED


class CannotListen(Fatal):
    """A listening socket could not be bound (port in use, address not local, no permission).

    Restarting cannot help until someone frees the port or changes the flag, so this exits with
    its own code, which ``kubelite up`` does not restart.
    """

    exit_code = EXIT_CANNOT_LISTEN


class TaskEnded(RuntimeError):
    """A task meant to run until cancelled returned, or was cancelled by someone else."""
