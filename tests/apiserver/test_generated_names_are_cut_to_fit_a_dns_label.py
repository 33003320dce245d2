"""``metadata.generateName`` gives the name Kubernetes gives: the prefix, cut to 58 characters,
and five characters of ``utilrand``'s alphabet — 63 at most, a DNS label."""

from __future__ import annotations

from tests.apiserver.conftest import Api
from tests.factories import pod

PODS = "/api/v1/namespaces/default/pods"


async def test_a_long_generate_name_is_cut_and_suffixed(api: Api) -> None:
    prefix = "a" * 60 + "-long-"
    body = pod("")
    body["metadata"] = {"generateName": prefix}
    created = await api.ok("POST", PODS, body)
    name = created["metadata"]["name"]
    assert created["metadata"]["generateName"] == prefix
    assert len(name) == 63 and name[:58] == prefix[:58]
    assert set(name[58:]) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert await api.ok("GET", f"{PODS}/{name}") == created
