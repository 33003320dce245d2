"""The README's official-client example, as it is written there, on the ``kubelite_cluster``
fixture (which comes from kubelite's ``pytest11`` entry point, not from a conftest)."""

from __future__ import annotations

from kubernetes import client

from kubelite.testing.pytest_plugin import KubeliteCluster


def test_configmap_round_trip(kubelite_cluster: KubeliteCluster) -> None:
    with kubelite_cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": "c"}, "data": {"k": "v"}}
        )
        assert core.read_namespaced_config_map("c", "default").data == {"k": "v"}
    assert kubelite_cluster.url in kubelite_cluster.kubeconfig.read_text()
