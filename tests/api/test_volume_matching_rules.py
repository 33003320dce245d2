"""Which volume a claim binds to (``volume_matching``), as Kubernetes' ``findMatchingVolume`` and
``checkVolumeSatisfyClaim`` decide it: smallest fitting free volume, fewest extra access modes,
class, selector, volume mode and node affinity; a pre-bound volume first; a WaitForFirstConsumer
claim without a node takes only its pre-bound volume."""

from __future__ import annotations

from typing import Any

from api.volume_matching import best_match, claim_class, unsatisfied_by
from tests.factories import node, persistent_volume, persistent_volume_claim

Obj = dict[str, Any]


def available(volume: Obj, **status: Any) -> Obj:
    return volume | {"status": {"phase": "Available", **status}}


def names(match: Obj | None) -> str | None:
    return None if match is None else match["metadata"]["name"]


def test_smallest_fitting_volume_of_the_claims_class_wins() -> None:
    claim = persistent_volume_claim("c", storage="1Gi", storage_class="")
    volumes = [
        available(persistent_volume("huge", storage="10Gi")),
        available(persistent_volume("fits", storage="1Gi")),
        available(persistent_volume("short", storage="900Mi")),
        available(persistent_volume("classy", storage="1Gi", storage_class="fast")),
    ]
    assert names(best_match(claim, volumes)) == "fits"
    assert names(best_match(persistent_volume_claim("f", storage_class="fast"), volumes)) == (
        "classy"
    )


def test_fewer_extra_access_modes_win_a_tie_and_missing_modes_never_match() -> None:
    claim = persistent_volume_claim("c", storage_class="")
    both = ("ReadWriteOnce", "ReadOnlyMany")
    volumes = [
        available(persistent_volume("wide", access_modes=both)),
        available(persistent_volume("exact")),
        available(persistent_volume("other", access_modes=("ReadWriteMany",))),
    ]
    assert names(best_match(claim, volumes)) == "exact"
    assert best_match(claim, volumes[2:]) is None


def test_selector_volume_mode_bound_and_deleting_volumes_are_skipped() -> None:
    claim = persistent_volume_claim(
        "c", storage_class="", selector={"matchLabels": {"tier": "gold"}}
    )
    gold = available(persistent_volume("gold"))
    gold["metadata"]["labels"] = {"tier": "gold"}
    block = available(persistent_volume("block", volumeMode="Block"))
    block["metadata"]["labels"] = {"tier": "gold"}
    taken = available(persistent_volume("taken", claimRef={"namespace": "x", "name": "y"}))
    assert names(best_match(claim, [block, taken, gold])) == "gold"
    gold["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert best_match(claim, [gold]) is None


def test_prebound_volume_wins_and_is_all_a_delayed_claim_takes() -> None:
    claim = persistent_volume_claim("c", storage_class="")
    claim["metadata"]["uid"] = "u1"
    free = available(persistent_volume("free"))
    mine = persistent_volume(
        "mine", storage="5Gi", claimRef={"namespace": "default", "name": "c", "uid": "u1"}
    )
    stale = persistent_volume(
        "stale", claimRef={"namespace": "default", "name": "c", "uid": "older"}
    )
    assert names(best_match(claim, [free, stale, mine])) == "mine"
    assert names(best_match(claim, [free, mine], delay_binding=True)) == "mine"
    assert best_match(claim, [free, stale], delay_binding=True) is None


def test_node_affinity_must_admit_the_selected_node() -> None:
    claim = persistent_volume_claim("c", storage_class="")
    on_a = available(persistent_volume("on-a", node_affinity={"kubernetes.io/hostname": ["a"]}))
    anywhere = available(persistent_volume("anywhere", storage="2Gi"))
    assert names(best_match(claim, [on_a, anywhere], node=node("a"))) == "on-a"
    assert names(best_match(claim, [on_a, anywhere], node=node("b"))) == "anywhere"


def test_a_named_volume_that_cannot_serve_says_why() -> None:
    claim = persistent_volume_claim("c", storage="2Gi", storage_class="fast")
    assert unsatisfied_by(persistent_volume("v", storage="1Gi"), claim) == (
        "requested PV is too small"
    )
    assert unsatisfied_by(persistent_volume("v", storage="2Gi"), claim) == (
        "storageClassName does not match"
    )
    fast = persistent_volume("v", storage="2Gi", storage_class="fast")
    assert unsatisfied_by(fast, claim) is None
    assert unsatisfied_by(fast | {"spec": fast["spec"] | {"volumeMode": "Block"}}, claim) == (
        "incompatible volumeMode"
    )


def test_unset_and_empty_class_are_both_no_class() -> None:
    assert claim_class(persistent_volume_claim("c")) == ""
    assert claim_class(persistent_volume_claim("c", storage_class="")) == ""
