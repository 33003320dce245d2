"""Binding a component's HTTP server: port 0 means any free port, and one policy on failure.

Why: every listening socket of every component behaves the same way —

* ``port`` 0 lets the OS pick a free port; the port actually bound is read back from the
  runner (``runner.addresses``, never aiohttp's private ``site._server``), logged, and printed
  on the ready line (``component.ready``), which is how launchers learn it;
* a socket that cannot be bound — the port is in use, the address is not this host's, no
  permission — ends the component with one clear line and exit code 3 (``CannotListen``), as
  Kubernetes' components fail to start when they cannot bind their ports. Going on without the
  socket would leave a component that looks alive and cannot be probed; retrying would not
  free the port.

``listen(runner, ...)`` starts one site on an already set-up ``web.BaseRunner``; the caller
owns the runner (and cleans it up, also when ``listen`` raises).
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable

from aiohttp import web

from component.errors import CannotListen
from component.ready import announce_listening

__all__ = ["SiteFactory", "listen"]

log = logging.getLogger("kubelite.component")

SiteFactory = Callable[[web.BaseRunner, str, int], web.BaseSite]
"""Makes the site to start: ``web.TCPSite`` unless the component needs its own (the
apiserver's connection cap)."""


def _tcp_site(runner: web.BaseRunner, host: str, port: int) -> web.BaseSite:
    return web.TCPSite(runner, host, port)


def _why(exc: OSError, *, flag: str) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            "the port is in use by another process; stop that process, or pass "
            f"{flag}=0 to take any free port"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return "no interface of this host has that address"
    if exc.errno == errno.EACCES:
        return "permission denied (ports below 1024 need privileges)"
    return exc.strerror or str(exc)


async def listen(
    runner: web.BaseRunner,
    *,
    component: str,
    endpoint: str,
    host: str,
    port: int,
    flag: str,
    site: SiteFactory = _tcp_site,
    scheme: str = "http",
) -> int:
    """Bind ``host:port`` for ``runner``; announce and return the port bound.

    ``flag`` is the command-line flag that chose the port, named in the error when binding
    fails (``CannotListen``).
    """
    before = set(runner.addresses)
    try:
        await site(runner, host, port).start()
    except OSError as exc:
        raise CannotListen(
            f"cannot listen on {host}:{port} ({flag}): {_why(exc, flag=flag)}"
        ) from exc
    bound = [address for address in runner.addresses if address not in before]
    actual = int(bound[0][1]) if bound else port
    announce_listening(
        component=component, endpoint=endpoint, host=host, port=actual, scheme=scheme
    )
    log.info("%s endpoint listening on %s:%d (%s=%d)", endpoint, host, actual, flag, port)
    return actual
