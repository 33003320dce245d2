"""The pluggable store: one etcd-shaped interface (``store.base.Store``), several backends.

Only the apiserver imports this package (checked by import-linter). ``open_store(url)`` picks the
backend from the URL:

* ``memory://`` — in process memory, gone at exit (``store.memory``).
* ``sqlite:///abs/path.db`` — an absolute path (three slashes); ``sqlite://rel/path.db`` — a
  path relative to the working directory (``store.sqlite``). The default backend.
* ``etcd://host:2379[,host:2379...]`` — an etcd v3 cluster through its JSON gateway, the
  members tried in turn when one is down (``store.etcd``).

Options go in the query string and are checked: an unknown one is a ``ValueError``.

* every backend: ``watch_buffer=N`` — live events one watch may hold unread before it is ended
  with ``WatchOverflow`` (default ``store.watchhub.DEFAULT_WATCH_BUFFER``).
* sqlite: ``synchronous=FULL|NORMAL|OFF|EXTRA`` (default FULL: durable before a write returns),
  ``busy_timeout_ms=N`` (default 5000), ``readers=N`` reader threads (default 2).
* etcd: ``prefix=/name`` (keys go under it; default none, so keys are ``/registry/...``),
  ``timeout=S`` seconds a call retries unavailable members (default 10), and TLS to etcd with
  ``cacert=PATH`` (the CA that signed etcd's serving certificate) and ``cert=PATH&key=PATH``
  (a client certificate, when etcd asks for one).

``keep_window`` (``store.compactor``) is the optional background compactor the owner of a store
runs as a named task.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qsl, urlsplit

from store.base import Store
from store.compactor import keep_window

__all__ = ["Store", "keep_window", "open_store"]


def _int_option(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"store option {name}={raw!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"store option {name}={raw!r} must be >= 1")
    return value


def _open_memory(location: str, options: dict[str, str]) -> Store:
    from store.memory import MemoryStore

    if location:
        raise ValueError(f"memory:// takes no location, got {location!r}")
    _reject_unknown("memory", options, {"watch_buffer"})
    kwargs = {name: _int_option(name, raw) for name, raw in options.items()}
    return MemoryStore(**kwargs)


def _open_sqlite(location: str, options: dict[str, str]) -> Store:
    from store.sqlite import SYNCHRONOUS_MODES, SqliteStore

    if not location or location == "/":
        raise ValueError("sqlite URL needs a file: sqlite:///abs/path.db or sqlite://rel/path.db")
    _reject_unknown(
        "sqlite", options, {"synchronous", "busy_timeout_ms", "watch_buffer", "readers"}
    )
    synchronous = options.pop("synchronous", "FULL").upper()
    if synchronous not in SYNCHRONOUS_MODES:
        raise ValueError(
            f"store option synchronous={synchronous!r}: expected one of {', '.join(SYNCHRONOUS_MODES)}"
        )
    kwargs = {name: _int_option(name, raw) for name, raw in options.items()}
    if location.startswith("//"):  # sqlite:////abs/path.db: one leading slash is the path's
        location = "/" + location.lstrip("/")
    return SqliteStore(location, synchronous=synchronous, **kwargs)


def _open_etcd(location: str, options: dict[str, str]) -> Store:
    import ssl

    from store.etcd import EtcdStore

    endpoints = [endpoint.strip() for endpoint in location.rstrip("/").split(",")]
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(
                f"etcd endpoint {endpoint!r} is not host:port; expected etcd://host:2379[,host:2379]"
            )
    _reject_unknown("etcd", options, {"prefix", "cacert", "cert", "key", "timeout", "watch_buffer"})
    tls = None
    cacert, cert, key = (options.pop(name, "") for name in ("cacert", "cert", "key"))
    if cacert or cert or key:
        if bool(cert) != bool(key):
            raise ValueError("etcd store options cert= and key= go together")
        tls = ssl.create_default_context(cafile=cacert or None)
        if cert:
            tls.load_cert_chain(cert, key)
    prefix = options.pop("prefix", "").rstrip("/")
    if prefix and not prefix.startswith("/"):
        raise ValueError(f"etcd store option prefix={prefix!r} must start with '/'")
    timeout = (
        float(_int_option("timeout", options.pop("timeout"))) if "timeout" in options else None
    )
    kwargs = {name: _int_option(name, raw) for name, raw in options.items()}
    if timeout is not None:
        return EtcdStore(endpoints, prefix=prefix, tls=tls, timeout=timeout, **kwargs)
    return EtcdStore(endpoints, prefix=prefix, tls=tls, **kwargs)


def _reject_unknown(scheme: str, options: dict[str, str], known: set[str]) -> None:
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(
            f"unknown {scheme}:// store option(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(sorted(known))}"
        )


_OPENERS: dict[str, Callable[[str, dict[str, str]], Store]] = {
    "memory": _open_memory,
    "sqlite": _open_sqlite,
    "etcd": _open_etcd,
}


def open_store(url: str) -> Store:
    """Open the store ``url`` names (see the module docstring for the accepted forms).

    Raises ``ValueError`` for an unknown scheme, a malformed location or an unknown option.
    Opening SQLite touches the file synchronously (schema, recovery): do it at start-up.
    """
    parts = urlsplit(url)
    if not parts.scheme or "://" not in url:
        raise ValueError(
            f"store URL {url!r} has no scheme; expected one of "
            + ", ".join(f"{scheme}://" for scheme in _OPENERS)
        )
    opener = _OPENERS.get(parts.scheme)
    if opener is None:
        raise ValueError(
            f"unknown store scheme {parts.scheme!r} in {url!r}; expected one of "
            + ", ".join(f"{scheme}://" for scheme in _OPENERS)
        )
    if parts.fragment:
        raise ValueError(f"store URL {url!r} must not have a fragment")
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if name in options:
            raise ValueError(f"store option {name} given twice in {url!r}")
        options[name] = value
    return opener(parts.netloc + parts.path, options)
