"""The apiserver dials a kubelet by its Hostname address over TLS when told to prefer it.

What the compose file relies on: a container's IP is known only once it starts, so no
certificate can name it, but the node name can be — the kubelet reports it as its ``Hostname``
address, and ``--kubelet-preferred-address-types=Hostname,InternalIP`` makes the apiserver dial
that name and verify the kubelet's certificate for it.

One real apiserver (``--kubelet-client-certificate``, ``--kubelet-certificate-authority``, that
flag) and one real kubelet (process runtime) whose node is ``localhost``, serving TLS with a
certificate naming ``localhost`` only — not its InternalIP ``127.0.0.1``. A pod's log read
through the apiserver comes back, so the apiserver dialled ``localhost`` (the same kubelet at
``127.0.0.1`` fails verification, shown by dialling it so directly); kubelite's default order
would have picked the InternalIP.
"""

from __future__ import annotations

import asyncio
import random
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from yarl import URL

from api.addresses import PREFERRED_ADDRESS_TYPES
from api.registry import REGISTRY
from client.rest import ApiClient
from component import pki
from services.apiserver.context import ServerOptions
from services.apiserver.proxy import kubelet_url
from tests import factories
from tests.factories import sh
from tests.kubelet.conftest import Cluster, StartKubelet
from tests.kubelet.pods import create_and_wait, phase, pod_log
from tests.kubelet.waits import wait_for_object

pytestmark = [pytest.mark.e2e]

NODE = "localhost"
"""The node's name, hence its Hostname address: one that resolves on this host."""


def _reports_its_addresses(node: dict[str, Any] | None) -> bool:
    status = (node or {}).get("status") or {}
    return bool(status.get("addresses")) and bool(status.get("daemonEndpoints"))


async def test_apiserver_dials_the_kubelet_by_hostname_and_verifies_it_for_that_name(
    apiserver_process: Any, start_kubelet: StartKubelet, tmp_path: Path
) -> None:
    directory = tmp_path / "pki"
    ca = pki.ensure_ca(directory)
    serving = pki.ensure_serving_cert(ca, directory, name="kubelet", hosts=[NODE])
    client_cert = pki.ensure_client_cert(
        ca,
        directory,
        name="apiserver-kubelet-client",
        user="kube-apiserver-kubelet-client",
        groups=("system:masters",),
    )
    preferred = ("Hostname", "InternalIP")
    api = apiserver_process(
        store="memory://",
        args=[
            f"--kubelet-client-certificate={client_cert.cert}",
            f"--kubelet-client-key={client_cert.key}",
            f"--kubelet-certificate-authority={ca.files.cert}",
            f"--kubelet-preferred-address-types={','.join(preferred)}",
        ],
    )
    kubelet = start_kubelet(
        api.url,
        NODE,
        runtime="process",
        args=[
            f"--tls-cert-file={serving.cert}",
            f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={ca.files.cert}",
            "--authentication-token-webhook",
            "--authorization-mode=Webhook",
            f"--pod-cidr=127.{random.randint(150, 199)}.{random.randint(0, 255)}.0/24",
        ],
    )
    client = ApiClient(server=api.url)
    try:
        node = await wait_for_object(
            client, REGISTRY.require("", "Node"), NODE, _reports_its_addresses, within=30
        )
        assert node is not None
        addresses = node["status"]["addresses"]
        assert {"type": "Hostname", "address": NODE} in addresses
        assert {"type": "InternalIP", "address": "127.0.0.1"} in addresses
        port = kubelet.port_of("server")
        # the address each order picks
        assert kubelet_url(node, scheme="https", preferred=preferred) == URL(
            f"https://{NODE}:{port}"
        )
        assert kubelet_url(node, scheme="https", preferred=PREFERRED_ADDRESS_TYPES) == URL(
            f"https://127.0.0.1:{port}"
        )
        # the kubelet's certificate does not name its InternalIP: dialled there, it fails
        context = ssl.create_default_context(cafile=ca.files.cert)
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with (
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
                session.get(f"https://127.0.0.1:{port}/healthz"),
            ):
                pass

        cluster = Cluster(server=api.url, client=client, kubelet=kubelet, node=NODE, tmp=tmp_path)
        await create_and_wait(
            cluster,
            factories.pod("shell", sh("echo started; sleep 3600"), nodeName=NODE),
            lambda p: phase(p) == "Running",
        )
        # through the apiserver: it dialled localhost, verified it, and showed its certificate
        assert "started" in await pod_log(cluster, "shell")
        url = f"{api.url}/api/v1/namespaces/default/pods/shell/exec"
        params = [("command", "echo"), ("command", "hi"), ("stdout", "true")]
        async with aiohttp.ClientSession() as session, asyncio.timeout(30):
            async with session.ws_connect(
                url, params=params, protocols=["v5.channel.k8s.io"]
            ) as ws:
                out = b"".join([msg.data[1:] async for msg in ws if msg.data[0] == 1])
        assert out == b"hi\n"
    finally:
        await client.close()


@pytest.mark.parametrize("types", [(), ("Hostname", "InternalHostname")])
def test_preferred_address_types_are_known_ones(types: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="--kubelet-preferred-address-types"):
        ServerOptions(kubelet_preferred_address_types=types)
