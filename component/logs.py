"""One logging setup for every component.

Why: ``kubelite up`` prefixes each child's lines with the child's name and people grep across
them, so every component logs in one format to stderr::

    2026-01-01 12:00:00,123 INFO kubelite.scheduler: cache synced: ...

(time, level, logger name, message). The level comes from ``--log-level`` and ``-v``
(``component.flags.LogFlags``). Named ``logs`` so it does not shadow the standard ``logging``.

Not here: structured (JSON) logs, per-module levels (``--vmodule``), log files.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["FORMAT", "setup_logging"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(level: int | str) -> None:
    """Log at ``level`` and above to stderr in ``FORMAT`` (a no-op if logging is configured,
    e.g. when a test calls a component's ``main`` in-process)."""
    logging.basicConfig(level=level, format=FORMAT, stream=sys.stderr)
