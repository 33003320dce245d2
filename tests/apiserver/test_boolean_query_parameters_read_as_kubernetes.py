"""``force`` and ``watch`` are read as Kubernetes' parameter codec reads a boolean
(``Convert_Slice_string_To_bool``): only ``0`` and ``false`` (any case) are false. Python clients
spell true ``True`` (kubernetes_asyncio sends ``force=True`` and ``watch=True``): an apply with
``force=True`` takes fields over instead of answering 400, and a ``watch=True`` request is
authorized and audited as the watch it is, not as a list."""

from __future__ import annotations

import pytest

from services.apiserver.request_info import request_info
from tests.apiserver.conftest import Api

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
APPLY = {"Content-Type": "application/apply-patch+yaml"}


def body(owner: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "forced"},
        "data": {"owner": owner},
    }


@pytest.mark.parametrize("spelling", ["True", "TRUE", "yes"])
async def test_force_true_in_any_spelling_takes_fields_over(api: Api, spelling: str) -> None:
    await api.ok("PATCH", f"{CONFIGMAPS}/forced?fieldManager=first", body("first"), headers=APPLY)
    status, conflict = await api.patch(
        f"{CONFIGMAPS}/forced?fieldManager=second&force=False", body("second"), headers=APPLY
    )
    assert status == 409, conflict
    taken = await api.ok(
        "PATCH",
        f"{CONFIGMAPS}/forced?fieldManager=second&force={spelling}",
        body("second"),
        headers=APPLY,
    )
    assert taken["data"] == {"owner": "second"}


@pytest.mark.parametrize(
    ("watch", "verb"),
    [("True", "watch"), ("true", "watch"), ("1", "watch"), ("False", "list"), ("0", "list")],
)
def test_watch_in_any_spelling_is_the_watch_verb(watch: str, verb: str) -> None:
    assert request_info("GET", CONFIGMAPS, {"watch": watch}).verb == verb
    assert request_info("GET", CONFIGMAPS, {}).verb == "list"
