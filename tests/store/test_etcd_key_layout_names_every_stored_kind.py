"""Every built-in kind the apiserver stores has its kube-apiserver name in etcd
(``store.etcd_keys.KUBERNETES_NAMES``): a kind added to the registry without one would sit in
etcd at kubelite's own ``/registry/<group>/<resource>/`` path instead of Kubernetes'."""

from __future__ import annotations

from api.registry import REGISTRY
from store.etcd_keys import KUBERNETES_NAMES, to_etcd

KEPT_AT_THEIR_PATH = {("apiextensions.k8s.io", "customresourcedefinitions")}
"""Kubernetes keeps CRDs under their group too: ``/registry/apiextensions.k8s.io/...``."""


def test_every_stored_built_in_kind_is_laid_out_as_kubernetes_lays_it_out() -> None:
    # the registry as imported holds the built-in kinds only (CRDs register theirs at run time);
    # kinds without get (the reviews, bindings) are never stored
    stored = {(rt.group or "core", rt.plural) for rt in REGISTRY if "get" in rt.verbs}
    missing = sorted(stored - set(KUBERNETES_NAMES) - KEPT_AT_THEIR_PATH)
    assert not missing, f"add Kubernetes' etcd names for {missing} to store/etcd_keys.py"
    for group, plural in stored - KEPT_AT_THEIR_PATH:
        assert to_etcd(f"/registry/{group}/{plural}/ns/x") != f"/registry/{group}/{plural}/ns/x"
