"""Seeded random strategic merge patches, applied by kubelite and by kubectl, must agree.

Each seed builds a live pod (containers with env and ports, finalizers, volumes; sometimes a
duplicated container name) and a kubectl-shaped patch against it: merges, additions and
``$patch: delete`` items in the container and env lists, ``$setElementOrder`` lists consistent
with the patch, finalizer additions/deletions, label nulls, a ``$retainKeys`` volume switch.
The result is compared with ``kubectl patch --local`` (the upstream Go code) as stored.

Left out on purpose, because upstream is not deterministic or stores patch directives verbatim
there (see ``api/patches/strategic.py``): adding and deleting the same scalar in one patch,
directives nested inside list items that have no live counterpart, and ``$setElementOrder``
over two empty lists (upstream answers 500).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from api.errors import StatusError
from api.patches import apply_strategic_merge_patch
from tests.api.kubectl_patch import OracleRefused, as_stored, object_of

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

NAMES = list("abcdefg")
ENV = ["E1", "E2", "E3", "E4", "E5"]
FINALIZERS = ["f1", "f2", "f3", "f4"]


def _unique(items: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    by_key: dict[Any, dict[str, Any]] = {}
    for item in items:
        by_key.setdefault(item[key], item)
    return list(by_key.values())


def _live(rng: random.Random) -> dict[str, Any]:
    names = rng.sample(NAMES, rng.randint(0, 4))
    if names and rng.random() < 0.15:
        names.insert(rng.randrange(len(names) + 1), rng.choice(names))
    containers = []
    for name in names:
        c: dict[str, Any] = {"name": name, "image": f"img{name}"}
        if rng.random() < 0.6:
            env = [
                {"name": rng.choice(ENV), "value": str(rng.randint(0, 9))}
                for _ in range(rng.randint(0, 4))
            ]
            c["env"] = _unique(env, "name")
        if rng.random() < 0.4:
            ports = [
                {"containerPort": rng.choice([80, 81, 82, 83])} for _ in range(rng.randint(1, 3))
            ]
            c["ports"] = _unique(ports, "containerPort")
        containers.append(c)
    pod: dict[str, Any] = {
        "metadata": {
            "labels": {"a": "1", "b": "2"},
            "finalizers": rng.sample(FINALIZERS, rng.randint(0, 4)),
        },
        "spec": {"containers": containers},
    }
    if rng.random() < 0.5:
        pod["spec"]["volumes"] = [
            {"name": "v1", "emptyDir": {}},
            {"name": "v2", "hostPath": {"path": "/x"}},
        ]
    return object_of("Pod", pod)


def _list_patch(
    rng: random.Random, live: list[dict[str, Any]], key: str, new: Any
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for _ in range(rng.randint(0, 4)):
        roll = rng.random()
        if roll < 0.2 and live:
            items.append({key: rng.choice(live)[key], "$patch": "delete"})
        elif roll < 0.25:
            items.append({key: new()[key], "$patch": "delete"})
        else:
            items.append(new())
    seen: set[tuple[Any, bool]] = set()
    unique = []
    for item in items:
        ident = (item[key], "$patch" in item)
        if ident not in seen:
            seen.add(ident)
            unique.append(item)
    return unique


def _order(
    rng: random.Random, live: list[dict[str, Any]], patch: list[dict[str, Any]], key: str
) -> list[dict[str, Any]]:
    """A $setElementOrder list: patch items in patch order, some live items interleaved."""
    own = list(dict.fromkeys(i[key] for i in patch if "$patch" not in i))
    others = [i[key] for i in live if rng.random() < 0.7 and i[key] not in own]
    rng.shuffle(others)
    merged: list[Any] = []
    pending = list(own)
    for other in others:
        while pending and rng.random() < 0.5:
            merged.append(pending.pop(0))
        merged.append(other)
    merged.extend(pending)
    return [{key: k} for k in dict.fromkeys(merged)]


def _patch(rng: random.Random, live: dict[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    if rng.random() < 0.5:
        meta["labels"] = {"a": None, "c": "3"} if rng.random() < 0.5 else {"b": "x"}
    finalizers = live["metadata"]["finalizers"]
    if rng.random() < 0.5:
        dels = rng.sample(finalizers, min(len(finalizers), rng.randint(0, 2)))
        adds = [f for f in rng.sample(["f1", "f2", "f5", "f6"], rng.randint(0, 2)) if f not in dels]
        if adds:
            meta["finalizers"] = adds
        if dels:
            meta["$deleteFromPrimitiveList/finalizers"] = dels
        if rng.random() < 0.6:
            kept = [f for f in finalizers if f not in dels and f not in adds and rng.random() < 0.7]
            rng.shuffle(kept)
            for i, add in zip(
                sorted(rng.sample(range(len(kept) + len(adds)), len(adds))), adds, strict=True
            ):
                kept.insert(i, add)
            meta["$setElementOrder/finalizers"] = kept
    if meta:
        patch["metadata"] = meta
    spec: dict[str, Any] = {}
    containers = live["spec"]["containers"]
    if rng.random() < 0.8:

        def new_container() -> dict[str, Any]:
            c = {"name": rng.choice(NAMES)}
            if rng.random() < 0.5:
                c["image"] = f"new{rng.randint(0, 9)}"
            return c

        items = _list_patch(rng, containers, "name", new_container)
        for item in items:
            own = next((c for c in containers if c["name"] == item["name"]), None)
            deleted = any(i.get("$patch") == "delete" and i["name"] == item["name"] for i in items)
            if "$patch" in item or own is None or deleted or rng.random() < 0.5:
                continue

            def new_env() -> dict[str, Any]:
                return {"name": rng.choice(ENV), "value": str(rng.randint(0, 9))}

            env = _list_patch(rng, own.get("env", []), "name", new_env)
            item["env"] = env
            if rng.random() < 0.6:
                item["$setElementOrder/env"] = _order(rng, own.get("env", []), env, "name")
        spec["containers"] = items
        if rng.random() < 0.6:
            spec["$setElementOrder/containers"] = _order(rng, containers, items, "name")
    if rng.random() < 0.3 and "volumes" in live["spec"]:
        spec["volumes"] = [
            {
                "$retainKeys": ["name", "hostPath"],
                "name": "v1",
                "hostPath": {"path": "/h"},
                "emptyDir": None,
            }
        ]
    if spec:
        patch["spec"] = spec
    return patch


@pytest.mark.parametrize("seed", range(60))
def test_random_patch_agrees_with_kubectl(seed: int, kubectl: Any) -> None:
    rng = random.Random(seed)
    live = _live(rng)
    patch = _patch(rng, live)
    try:
        expected: Any = as_stored(kubectl(live, patch, "strategic"))
    except OracleRefused as refused:
        if "no elements in any of the given slices" in str(refused):
            pytest.skip("upstream 500s on ordering two empty lists; kubelite accepts")
        expected = OracleRefused
    try:
        ours: Any = as_stored(apply_strategic_merge_patch(live, patch, kind="Pod"))
    except StatusError:
        ours = OracleRefused
    assert ours == expected, f"live={json.dumps(live)}\npatch={json.dumps(patch)}"
