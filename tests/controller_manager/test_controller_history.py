"""ControllerRevision history (``services.controller_manager.controller_history``): the data a
revision snapshots, its ``<owner>-<hash>`` name, equality and order — and, against a real
apiserver, creation under a bumped collision count when a name holds other data, renumbering,
truncation that keeps live revisions, and adoption of matching orphans."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from api.errors import NotFound
from api.selectors import label_selector_from_dict
from client.informer import Informer
from client.rest import ApiClient
from kubelite.testing import Processes
from kubelite.testing.waiting import Watcher
from services.controller_manager import controller_history as ch
from services.controller_manager.controller_ref import controller_ref
from tests import factories
from tests.controller_manager.harness import Obj, rt

DAEMONSETS = rt("apps", "DaemonSet")


def owner(name: str = "agent", *, image: str = "nginx", uid: str = "uid-1") -> Obj:
    ds = factories.daemon_set(name, image=image)
    ds["metadata"].update(namespace="default", uid=uid, annotations={"note": "kept"})
    return ds


def test_data_is_a_patch_that_replaces_the_template() -> None:
    ds = owner()
    data = ch.template_patch(ds)
    assert data == {"spec": {"template": {**ds["spec"]["template"], "$patch": "replace"}}}
    assert "$patch" not in ds["spec"]["template"], "the owner is not changed"


def test_new_revision_is_named_by_hash_and_labelled_like_the_template() -> None:
    ds = owner()
    rev = ch.new_revision(ds, DAEMONSETS, data=ch.template_patch(ds), revision=3)
    hash_ = ch.revision_hash(ch.template_patch(ds))
    assert rev["metadata"]["name"] == f"agent-{hash_}"
    assert rev["metadata"]["labels"] == {"app": "agent", ch.HASH_LABEL: hash_}
    assert rev["metadata"]["annotations"] == {"note": "kept"}
    assert rev["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert rev["revision"] == 3
    assert set(hash_) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert ch.revision_hash(ch.template_patch(ds), 1) != hash_, "a collision count changes it"
    assert ch.revision_name("x" * 300, hash_) == "x" * 223 + "-" + hash_


def test_equality_ignores_empty_fields_and_order_is_by_revision() -> None:
    ds = owner()
    a = ch.new_revision(ds, DAEMONSETS, data=ch.template_patch(ds), revision=1)
    b = ch.new_revision(ds, DAEMONSETS, data=ch.template_patch(ds), revision=2)
    b["data"]["spec"]["template"]["metadata"]["creationTimestamp"] = None
    other = ch.new_revision(owner(image="busybox"), DAEMONSETS, data=ch.template_patch(owner(image="busybox")), revision=3)  # fmt: skip
    assert ch.equal_revision(a, b)
    assert not ch.equal_revision(a, other)
    assert ch.equal_revision(None, None) and not ch.equal_revision(a, None)
    assert ch.find_equal_revisions([other, b, a], a) == [b, a]
    assert [r["revision"] for r in ch.sort_by_revision([other, a, b])] == [1, 2, 3]
    assert ch.max_revision([a, other]) == 3 and ch.max_revision([]) == 0


@pytest.fixture
async def history(kubelite_processes: Processes) -> AsyncIterator[ch.ControllerHistory]:
    api = kubelite_processes.apiserver(store="memory://")
    client = ApiClient(server=api.url)
    informer = Informer(client, ch.CONTROLLER_REVISIONS, namespace="default")
    task = informer.start()
    await informer.wait_synced()
    try:
        yield ch.ControllerHistory(client=client, informer=informer)
    finally:
        task.cancel()
        await client.close()


@pytest.mark.e2e
async def test_create_truncate_renumber_and_adopt_against_an_apiserver(
    history: ch.ControllerHistory,
) -> None:
    client = history.client
    ds = await client.create(DAEMONSETS, owner(), namespace="default")
    data = ch.template_patch(ds)
    body = ch.new_revision(ds, DAEMONSETS, data=data, revision=1)

    # a name already holding other data: retried under the next collision count
    squatter = ch.new_revision(owner(image="busybox"), DAEMONSETS, data={"other": True}, revision=9)  # fmt: skip
    squatter["metadata"]["name"] = body["metadata"]["name"]
    del squatter["metadata"]["ownerReferences"]  # an orphan
    await client.create(ch.CONTROLLER_REVISIONS, squatter, namespace="default")
    created, collisions = await history.create(ds, body, collision_count=0)
    assert collisions == 1
    assert created["metadata"]["name"] == f"agent-{ch.revision_hash(data, 1)}"
    again, same = await history.create(ds, body, collision_count=1)
    assert (again["metadata"]["uid"], same) == (created["metadata"]["uid"], 1), "equal data: reused"

    renumbered = await history.update_revision(created, 5)
    assert renumbered["revision"] == 5

    olds = []
    for n, image in enumerate(("a", "b", "c"), start=2):
        template_owner = {**ds, "spec": {**ds["spec"], "template": {**ds["spec"]["template"], "metadata": {"labels": {"app": "agent", "v": image}}}}}  # fmt: skip
        made, _ = await history.create(ds, ch.new_revision(template_owner, DAEMONSETS, data=ch.template_patch(template_owner), revision=n), collision_count=0)  # fmt: skip
        olds.append(made)
    doomed = await history.truncate(olds, limit=1, live={olds[0]["metadata"]["name"]})
    assert [d["revision"] for d in doomed] == [3], "the oldest dead one goes; live revision 2 stays"
    with pytest.raises(NotFound):
        await client.get(ch.CONTROLLER_REVISIONS, doomed[0]["metadata"]["name"], namespace="default")  # fmt: skip

    # the squatter matches the selector and has no controller: adopted; strays are released
    async with Watcher(client, ch.CONTROLLER_REVISIONS, namespace="default") as revs:
        await revs.wait_until(lambda objs: len(objs) == len(history.informer.list()) == 4, what="cache caught up")  # fmt: skip

    async def can_adopt() -> None:
        return None

    claimed = await history.claim(
        ds, DAEMONSETS, selector=label_selector_from_dict(ds["spec"]["selector"]), can_adopt=can_adopt
    )  # fmt: skip
    assert len(claimed) == 4
    assert all((controller_ref(r) or {}).get("uid") == ds["metadata"]["uid"] for r in claimed)
