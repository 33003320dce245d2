"""The secure port's TLS: the server's SSL context, and certificates made when none are given.

Why: the secure port must serve TLS whether its certificates come from the operator's flags
(``--tls-cert-file``/``--tls-private-key-file``, ``--client-ca-file``,
``--service-account-*``, as ``kubelite up`` passes them) or from nowhere — then, as
kube-apiserver does with ``--cert-dir``, the apiserver makes its own: a CA, a serving
certificate for every name it answers to, and a service-account key, under ``--cert-dir``
(``<state-dir>/pki``), reused on the next start (``component.pki``).

What it owns:

* ``serving_hosts``: the names and addresses the serving certificate covers — 127.0.0.1,
  localhost, the ``kubernetes`` Service's ClusterIP (the range's first address), ``kubernetes``,
  ``kubernetes.default``, ``.svc`` and ``.svc.cluster.local``, and the bind addresses;
* ``with_self_made_pki``: the options with every missing file filled in from the cert dir;
* ``server_ssl_context``: TLS 1.2 or later; a client certificate is asked for but optional,
  and taken whatever it is (``component.client_certificates``), as Go's
  ``tls.RequestClientCert`` takes it for kube-apiserver: ``authentication`` then verifies it
  against ``--client-ca-file``, so one from another CA, expired, or not for client
  authentication gets a 401 ``Status``. Where the handshake cannot be made to take any
  certificate (see that module), it verifies against ``--client-ca-file`` itself and refuses
  one that does not chain — said once in the log at start.

Limits: the context is built once at start; renewed files are read on the next start.
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import replace
from pathlib import Path

from component import pki
from component.client_certificates import serving_context
from services.apiserver.context import ServerOptions

__all__ = ["is_loopback", "server_ssl_context", "serving_hosts", "with_self_made_pki"]


KUBERNETES_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def is_loopback(address: str) -> bool:
    """``address`` is a loopback IP or ``localhost``."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def serving_hosts(options: ServerOptions) -> list[str]:
    kubernetes_ip = str(ipaddress.ip_network(options.service_cluster_ip_range, strict=False)[1])
    hosts = ["127.0.0.1", "localhost", kubernetes_ip, *KUBERNETES_NAMES]
    for address in (options.secure_bind_address, options.bind_address):
        if address not in ("0.0.0.0", "::", ""):
            hosts.append(address)
    return list(dict.fromkeys(hosts))


def cert_dir(options: ServerOptions) -> Path:
    return options.cert_dir if options.cert_dir is not None else options.state_dir / "pki"


def with_self_made_pki(options: ServerOptions) -> ServerOptions:
    """Without ``--tls-cert-file``: ``options`` with the serving certificate, and the client
    CA and service-account key where no flag named them, from ``cert_dir`` (made there if
    missing). With it, ``options`` as they are: the operator chose the PKI."""
    if options.tls_cert_file is not None:
        return options
    directory = cert_dir(options)
    ca = pki.ensure_ca(directory)
    serving = pki.ensure_serving_cert(ca, directory, name="apiserver", hosts=serving_hosts(options))
    changes: dict[str, object] = {
        "tls_cert_file": serving.cert,
        "tls_private_key_file": serving.key,
    }
    if options.client_ca_file is None:
        changes["client_ca_file"] = ca.files.cert
    if options.service_account_signing_key_file is None and not options.service_account_key_files:
        changes["service_account_signing_key_file"] = pki.ensure_signing_key(directory).key
    return replace(options, **changes)  # type: ignore[arg-type]


def server_ssl_context(options: ServerOptions) -> ssl.SSLContext:
    assert options.tls_cert_file is not None and options.tls_private_key_file is not None
    return serving_context(
        options.tls_cert_file, options.tls_private_key_file, options.client_ca_file
    )
