"""The root-CA publisher, in a real controller-manager process started with ``--root-ca-file``:
every namespace — the system ones from the start, a new one as soon as it exists — holds the
ConfigMap ``kube-root-ca.crt`` with the CA as ``ca.crt`` and Kubernetes' description; an edited
one is put back and a deleted one comes back. Without a CA (no flag, a plain-HTTP client) the
controller does not run and publishes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from component import pki
from kubelite.testing import Processes
from kubelite.testing.waiting import Watcher
from services.controller_manager.root_ca_publisher import DESCRIPTION
from tests.controller_manager.conftest import Cluster
from tests.controller_manager.harness import NAMESPACES

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

CONFIGMAPS = REGISTRY.require("", "ConfigMap")
NAME = "kube-root-ca.crt"


@pytest.fixture
def ca_file(tmp_path: Path) -> Path:
    return pki.ensure_ca(tmp_path / "pki").files.cert


@pytest.fixture
def ca(ca_file: Path) -> str:
    return ca_file.read_text()


@pytest.fixture
def cm_args(ca_file: Path) -> tuple[str, ...]:
    return (f"--root-ca-file={ca_file}",)


def annotations(cm: dict[str, Any] | None) -> dict[str, str]:
    return dict(((cm or {}).get("metadata") or {}).get("annotations") or {})


def published(cm: dict[str, Any] | None, ca: str) -> bool:
    """The ConfigMap holds the CA as ``ca.crt`` (nothing else) and Kubernetes' description."""
    return (
        cm is not None
        and cm.get("data") == {"ca.crt": ca}
        and annotations(cm).get("kubernetes.io/description") == DESCRIPTION
    )


async def test_every_namespace_holds_the_ca_and_gets_it_back(cluster: Cluster, ca: str) -> None:
    client = cluster.client
    async with Watcher(client, CONFIGMAPS) as configmaps:
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            await configmaps.wait_until(
                lambda _o, key=f"{ns}/{NAME}": published(configmaps.get(key), ca),
                what=f"{ns}/{NAME} published",
            )

        await client.create(NAMESPACES, {"metadata": {"name": "team"}})
        await configmaps.wait_until(
            lambda _o: published(configmaps.get(f"team/{NAME}"), ca), what=f"team/{NAME}"
        )

        edited = await client.get(CONFIGMAPS, NAME, namespace="team")
        edited["data"] = {"ca.crt": "not a CA"}
        edited["metadata"]["annotations"] = {"owner": "someone"}
        await client.update(CONFIGMAPS, edited, namespace="team")
        # only the edited object carries "owner": restored, it has both that and the CA
        await configmaps.wait_until(
            lambda _o: (
                "owner" in annotations(configmaps.get(f"team/{NAME}"))
                and published(configmaps.get(f"team/{NAME}"), ca)
            ),
            what=f"team/{NAME} restored after an edit",
        )
        restored = await client.get(CONFIGMAPS, NAME, namespace="team")
        assert published(restored, ca)
        assert restored["metadata"]["annotations"]["owner"] == "someone"  # left alone

        uid = restored["metadata"]["uid"]
        await client.delete(CONFIGMAPS, NAME, namespace="team")
        await configmaps.wait_until(
            lambda _o: (
                (configmaps.get(f"team/{NAME}") or {}).get("metadata", {}).get("uid")
                not in (None, uid)
            ),
            what=f"team/{NAME} created again after its deletion",
        )
        assert published(await client.get(CONFIGMAPS, NAME, namespace="team"), ca)


async def test_without_a_ca_nothing_is_published(
    kubelite_processes: Processes, tmp_path: Path
) -> None:
    api = kubelite_processes.apiserver(store="memory://")
    cm = kubelite_processes.controller_manager(api.url)
    async with (
        ApiClient(server=api.url) as client,
        Watcher(client, REGISTRY.require("", "ServiceAccount")) as accounts,
    ):
        # controllers start after every factory ran (and the publisher's logged its refusal)
        await accounts.wait_until(
            lambda _o: accounts.get("default/default") is not None, what="default/default"
        )
        assert "not publishing kube-root-ca.crt" in cm.log_path.read_text()
        listed = await client.list(CONFIGMAPS)
        assert [c for c in listed["items"] if c["metadata"]["name"] == NAME] == []
