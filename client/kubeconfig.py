"""Where to reach the apiserver and how to authenticate: ``ClientConfig`` and kubeconfig files.

Why: every component (and every test) must find the apiserver the way kubectl does, so one
module reads kubeconfig files and the common command-line flags and yields one frozen
``ClientConfig``. The REST client takes nothing else.

Resolution order, as kubectl's: an explicit ``--server`` URL wins (credentials may still come
from the kubeconfig's current user); otherwise the ``--kubeconfig`` file, else the first file
in ``$KUBECONFIG``, else ``~/.kube/config``; ``--context`` picks a context other than
``current-context``. A component (``from_args(..., default_server=DEFAULT_SERVER)``) given
neither ``--server``, ``--kubeconfig`` nor ``$KUBECONFIG`` talks to ``http://127.0.0.1:8080``.
``--server`` may name several URLs (``component.flags``): the first is used until it cannot
be reached, then the next (``client.transport`` fails over). Paths
inside a kubeconfig are relative to the file. Supported fields:
``server``, ``certificate-authority[-data]``, ``insecure-skip-tls-verify``, user ``token``,
``tokenFile``, ``client-certificate[-data]``, ``client-key[-data]``, context ``namespace``.

Not supported (and rejected loudly where it matters): exec / auth-provider plugins, basic
auth, proxies, merging several ``$KUBECONFIG`` files.
"""

from __future__ import annotations

import argparse
import base64
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from component.flags import add_server_flag

__all__ = [
    "DEFAULT_SERVER",
    "ClientConfig",
    "KubeconfigError",
    "add_client_arguments",
    "load_kubeconfig",
]

DEFAULT_SERVER = "http://127.0.0.1:8080"
"""Where a component looks for the apiserver when no flag or kubeconfig says (its default
plain-HTTP address)."""


class KubeconfigError(ValueError):
    """The kubeconfig cannot be read or does not say how to reach a server."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How to talk to one apiserver. Build with ``ClientConfig(server=...)`` or the loaders."""

    server: str = DEFAULT_SERVER
    other_servers: tuple[str, ...] = ()
    """More URLs of the same cluster's apiservers (``--server a,b,c``): the transport turns to
    the next one when the current one cannot be reached."""
    token: str | None = None
    ca_file: str | None = None
    ca_data: str | None = None
    """PEM text of the CA bundle (decoded ``certificate-authority-data``)."""
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    insecure_skip_tls_verify: bool = False
    namespace: str = "default"
    """The context's namespace: a default for callers, the client itself never applies it."""
    qps: float | None = None
    """Client-side request rate limit; ``None`` (the default) means unlimited."""
    burst: int = 10
    read_retries: int = 3
    """Extra attempts for idempotent reads (GET) that fail to connect."""
    request_timeout: float = 60.0
    """Overall timeout of one non-watch request, seconds (counted from when it has a
    connection: waiting for one under ``max_connections`` is not part of it)."""
    max_connections: int | None = None
    """Requests other than watches in flight at once, and so connections they hold; one beyond
    waits for a free one (FIFO). ``None`` (the default) means unlimited, as Go's
    ``http.Transport.MaxConnsPerHost`` 0. Watches never count: each holds its connection for
    minutes."""
    user_agent: str = "kubelite"

    def __post_init__(self) -> None:
        for server in (self.server, *self.other_servers):
            if not server.startswith(("http://", "https://")):
                raise KubeconfigError(f"server must be an http:// or https:// URL, got {server!r}")
        if self.qps is not None and self.qps <= 0:
            raise KubeconfigError("qps must be positive (or None for no limit)")
        if self.max_connections is not None and self.max_connections < 1:
            raise KubeconfigError("max_connections must be at least 1 (or None for no limit)")

    def with_options(self, **changes: Any) -> ClientConfig:
        return replace(self, **changes)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for an ``https://`` server, ``None`` for plain HTTP."""
        if not self.server.startswith("https://"):
            return None
        ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.insecure_skip_tls_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        elif self.cert_data and self.key_data:
            # load_cert_chain only reads files: stage the PEMs in a private temp dir.
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = Path(tmp, "client.crt"), Path(tmp, "client.key")
                cert.write_bytes(self.cert_data)
                key.touch(mode=0o600)
                key.write_bytes(self.key_data)
                ctx.load_cert_chain(str(cert), str(key))
        return ctx

    @classmethod
    def load(
        cls,
        *,
        kubeconfig: str | os.PathLike[str] | None = None,
        server: str | None = None,
        context: str | None = None,
        **overrides: Any,
    ) -> ClientConfig:
        """Resolve as kubectl does (see the module docstring); ``overrides`` win over files."""
        path = _kubeconfig_path(kubeconfig)
        base: ClientConfig | None = None
        if path is not None and (kubeconfig is not None or path.exists()):
            try:
                base = load_kubeconfig(path, context=context)
            except KubeconfigError:
                if server is None:
                    raise
        if base is None:
            if server is None:
                raise KubeconfigError(
                    "no apiserver given: pass --server URL or --kubeconfig FILE (or set KUBECONFIG)"
                )
            base = cls(server=server)
        elif server is not None:
            base = replace(base, server=server)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, *, default_server: str | None = None
    ) -> ClientConfig:
        """The config described by the flags ``add_client_arguments`` added.

        ``--server`` may name several URLs: the first is used until it cannot be reached, then
        the next (``other_servers``). With no ``--server``, no ``--kubeconfig`` and no
        ``$KUBECONFIG``, ``default_server`` is used (if given).
        """
        servers: list[str] | None = args.server
        server = servers[0] if servers else None
        others = tuple(servers[1:]) if servers else ()
        if server is None and args.kubeconfig is None and not os.environ.get("KUBECONFIG"):
            server = default_server
        return cls.load(
            kubeconfig=args.kubeconfig,
            server=server,
            context=args.context,
            token=args.token,
            ca_file=args.certificate_authority,
            insecure_skip_tls_verify=args.insecure_skip_tls_verify or None,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            other_servers=others or None,
        )


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    """The standard connection flags, so every component parses them the same way."""
    group = parser.add_argument_group("apiserver connection")
    group.add_argument("--kubeconfig", default=None, help="kubeconfig file")
    add_server_flag(group)
    group.add_argument("--context", default=None, help="kubeconfig context to use")
    group.add_argument("--token", default=None, help="bearer token")
    group.add_argument("--certificate-authority", default=None, help="CA bundle for https")
    group.add_argument("--insecure-skip-tls-verify", action="store_true", default=False)
    group.add_argument(
        "--kube-api-qps", type=float, default=None, help="client request rate limit (default: none)"
    )
    group.add_argument("--kube-api-burst", type=int, default=None, help="client request burst")


def _kubeconfig_path(explicit: str | os.PathLike[str] | None) -> Path | None:
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get("KUBECONFIG")
    if env:
        first = next((p for p in env.split(os.pathsep) if p), None)
        if first:
            return Path(first)
    return Path.home() / ".kube" / "config"


def _named(entries: Any, name: str, what: str) -> Mapping[str, Any]:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(what)
            return body if isinstance(body, dict) else {}
    raise KubeconfigError(f"kubeconfig has no {what} named {name!r}")


def load_kubeconfig(path: str | os.PathLike[str], *, context: str | None = None) -> ClientConfig:
    """Read one kubeconfig file into a ``ClientConfig`` (credentials included)."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a mapping")
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise KubeconfigError(f"kubeconfig {path} has no current-context")
    ctx = _named(doc.get("contexts"), ctx_name, "context")
    cluster = _named(doc.get("clusters"), str(ctx.get("cluster") or ""), "cluster")
    user: Mapping[str, Any] = {}
    if ctx.get("user"):
        user = _named(doc.get("users"), str(ctx["user"]), "user")
    if "exec" in user or "auth-provider" in user:
        raise KubeconfigError("kubeconfig exec/auth-provider credentials are not supported")
    server = cluster.get("server")
    if not server:
        raise KubeconfigError(f"kubeconfig cluster {ctx.get('cluster')!r} has no server")
    base = path.parent

    def rel(value: Any) -> str | None:
        return None if not value else str(base / Path(str(value)).expanduser())

    token = user.get("token")
    if not token and user.get("tokenFile"):
        token_path = rel(user["tokenFile"])
        assert token_path is not None
        token = Path(token_path).read_text().strip()
    ca_data = cluster.get("certificate-authority-data")
    cert_data = user.get("client-certificate-data")
    key_data = user.get("client-key-data")
    return ClientConfig(
        server=str(server).rstrip("/"),
        token=token or None,
        ca_file=rel(cluster.get("certificate-authority")),
        ca_data=base64.b64decode(ca_data).decode() if ca_data else None,
        cert_file=rel(user.get("client-certificate")),
        key_file=rel(user.get("client-key")),
        cert_data=base64.b64decode(cert_data) if cert_data else None,
        key_data=base64.b64decode(key_data) if key_data else None,
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        namespace=str(ctx.get("namespace") or "default"),
    )
