"""Mutating and validating admission webhooks, called over HTTPS with AdmissionReview v1.

The webhooks are a real aiohttp HTTPS server on loopback with a certificate from a CA made for
the test (``component.pki``); the apiserver trusts it through ``caBundle``. A new configuration
reaches the apiserver through its watch cache, so each test first waits until a dry-run write
shows the webhook at work (that is the server's own state, not a sleep).

Also pinned: ``matchConditions`` (a false one skips the webhook; one that cannot be evaluated
refuses under Fail with Kubernetes' 403 and skips under Ignore), a DELETE through a mutating
webhook (``object`` null; it may refuse, a patch is a 500), exec and port-forward admitted as
CONNECT with their options as the object, a webhook's ``auditAnnotations`` in the audit log as
``<webhook>/<key>``, and matchConditions validated when written.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from component import pki
from kubelite.testing.waiting import apoll_until
from tests.apiserver.conftest import Api, MakeApi, audit_event
from tests.factories import crd, widget

Obj = dict[str, Any]
Answer = Callable[[Obj], Obj]

CM = "/api/v1/namespaces/default/configmaps"
MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


def allow(request: Obj, **extra: Any) -> Obj:
    return {"uid": request["uid"], "allowed": True, **extra}


def patch(request: Obj, ops: list[Obj], **extra: Any) -> Obj:
    encoded = base64.b64encode(json.dumps(ops).encode()).decode()
    return allow(request, patchType="JSONPatch", patch=encoded, **extra)


@dataclass
class Webhooks:
    """An HTTPS server answering AdmissionReviews at ``/<path>`` with ``answers[path]``."""

    url: str
    port: int
    ca_bundle: str
    answers: dict[str, Answer] = field(default_factory=dict)
    reviews: dict[str, list[Obj]] = field(default_factory=dict)

    def hook(self, path: str, answer: Answer, **spec: Any) -> Obj:
        self.answers[path] = answer
        rules = spec.pop(
            "rules",
            [
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["configmaps"],
                }
            ],
        )
        client = spec.pop("clientConfig", {"url": f"{self.url}/{path}"})
        return {
            "name": f"{path}.example.com",
            "clientConfig": {**client, "caBundle": self.ca_bundle},
            "rules": rules,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            **spec,
        }


@pytest.fixture
async def webhooks(tmp_path: Path) -> AsyncIterator[Webhooks]:
    ca = pki.ensure_ca(tmp_path, common_name="webhook-ca")
    serving = pki.ensure_serving_cert(
        ca, tmp_path, name="hooks", hosts=["127.0.0.1", "hooks.default.svc"]
    )
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(serving.cert, serving.key)
    bundle = base64.b64encode(ca.files.cert.read_bytes()).decode()
    state = Webhooks(url="", port=0, ca_bundle=bundle)

    async def answer(request: web.Request) -> web.Response:
        path = request.match_info["path"]
        review = await request.json()
        state.reviews.setdefault(path, []).append(review["request"])
        response = state.answers[path](review["request"])
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    app = web.Application()
    app.router.add_post("/{path}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    state.port = runner.addresses[0][1]
    state.url = f"https://127.0.0.1:{state.port}"
    try:
        yield state
    finally:
        await runner.cleanup()


def configmap(name: str, **data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def configuration(kind: str, name: str, *hooks: Obj) -> Obj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": list(hooks),
    }


async def until_active(
    api: Api, probe: Callable[[int, Any], bool], body: Obj, path: str = CM
) -> None:
    """Wait until a dry-run create of ``body`` shows the new configuration at work."""

    async def works() -> bool:
        status, out = await api.post(f"{path}?dryRun=All", body)
        return probe(status, out)

    await apoll_until(works, what="the webhook configuration to take effect")


def labelled(status: int, out: Any) -> bool:
    return status == 201 and out["metadata"].get("labels", {}).get("stamped") == "yes"


async def test_mutating_webhook_patches_and_validating_webhook_refuses(
    api: Api, webhooks: Webhooks
) -> None:
    stamp = webhooks.hook(
        "stamp",
        lambda r: patch(
            r,
            [{"op": "add", "path": "/metadata/labels", "value": {"stamped": "yes"}}],
            warnings=["stamped by the test"],
        ),
    )
    deny = webhooks.hook(
        "deny",
        lambda r: (
            {"uid": r["uid"], "allowed": False, "status": {"message": "no bad data", "code": 403}}
            if "bad" in r["object"].get("data", {})
            else allow(r)
        ),
    )
    await api.ok("POST", MWC, configuration("MutatingWebhookConfiguration", "stamp", stamp))
    await api.ok("POST", VWC, configuration("ValidatingWebhookConfiguration", "deny", deny))
    await until_active(api, labelled, configmap("probe"))
    await until_active(api, lambda s, _: s == 403, configmap("probe", bad="1"))

    async with api.client.post(CM, json=configmap("good", ok="1")) as resp:
        assert resp.status == 201
        created = await resp.json()
        assert resp.headers.getall("Warning") == ['299 - "stamped by the test"']
    assert created["metadata"]["labels"] == {"stamped": "yes"}
    stored = await api.ok("GET", f"{CM}/good")
    assert stored["metadata"]["labels"] == {"stamped": "yes"}

    status, refused = await api.post(CM, configmap("evil", bad="1"))
    assert status == 403
    assert refused["message"] == (
        'admission webhook "deny.example.com" denied the request: no bad data'
    )
    assert (await api.get(f"{CM}/evil"))[0] == 404

    # the validating webhook saw the mutated object; the review carries the request's facts
    seen = next(r for r in webhooks.reviews["deny"] if r["name"] == "good")
    assert seen["object"]["metadata"]["labels"] == {"stamped": "yes"}
    assert seen["operation"] == "CREATE"
    assert seen["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert seen["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert seen["namespace"] == "default"
    assert seen["userInfo"]["username"] == "system:unsecured"
    assert seen["dryRun"] is False
    assert seen["options"]["kind"] == "CreateOptions"
    assert seen["oldObject"] is None

    # an update is reviewed with its old object
    stored["data"] = {"ok": "2"}
    await api.ok("PUT", f"{CM}/good", stored)
    update = webhooks.reviews["deny"][-1]
    assert update["operation"] == "UPDATE"
    assert update["oldObject"]["data"] == {"ok": "1"}
    assert update["options"]["kind"] == "UpdateOptions"


async def test_failure_policy_decides_when_a_webhook_cannot_be_called(
    api: Api, webhooks: Webhooks
) -> None:
    gone = {"url": f"https://127.0.0.1:{webhooks.port}/missing-path"}
    webhooks.answers.clear()
    ignore = webhooks.hook("ignored", allow, clientConfig=gone, failurePolicy="Ignore")
    await api.ok("POST", VWC, configuration("ValidatingWebhookConfiguration", "ignore", ignore))
    fail = webhooks.hook(
        "failing",
        allow,
        clientConfig={"url": "https://127.0.0.1:1/nothing-listens"},
        failurePolicy="Fail",
        timeoutSeconds=2,
    )
    await api.ok("POST", VWC, configuration("ValidatingWebhookConfiguration", "fail", fail))
    await until_active(api, lambda s, _: s == 500, configmap("probe"))
    status, out = await api.post(CM, configmap("x"))
    assert status == 500
    assert out["message"].startswith(
        'Internal error occurred: failed calling webhook "failing.example.com": '
        'failed to call webhook: Post "https://127.0.0.1:1/nothing-listens"'
    )
    await api.ok("DELETE", f"{VWC}/fail")
    await until_active(api, lambda s, _: s == 201, configmap("probe"))


async def test_reinvocation_and_selectors(api: Api, webhooks: Webhooks) -> None:
    first = webhooks.hook(
        "first",
        lambda r: patch(r, [{"op": "add", "path": "/data/first", "value": "1"}]),
        reinvocationPolicy="IfNeeded",
        objectSelector={"matchLabels": {"hooked": "yes"}},
    )
    second = webhooks.hook(
        "second",
        lambda r: patch(r, [{"op": "add", "path": "/data/second", "value": "1"}]),
        namespaceSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
    )
    body = configuration("MutatingWebhookConfiguration", "a-first", first)
    await api.ok("POST", MWC, body)
    await api.ok("POST", MWC, configuration("MutatingWebhookConfiguration", "b-second", second))
    hooked = configmap("probe", seed="0")
    hooked["metadata"]["labels"] = {"hooked": "yes"}

    def both(status: int, out: Any) -> bool:
        return status == 201 and set(out["data"]) == {"seed", "first", "second"}

    await until_active(api, both, hooked)
    webhooks.reviews.clear()
    hooked["metadata"]["name"] = "hooked"
    await api.ok("POST", CM, hooked)
    # "first" ran, then "second" changed the object, so "first" was asked once more
    assert [len(webhooks.reviews.get(p, [])) for p in ("first", "second")] == [2, 1]
    assert "second" in webhooks.reviews["first"][1]["object"]["data"]

    # the objectSelector leaves an unlabelled object to "second" alone
    plain = await api.ok("POST", CM, configmap("plain", seed="0"))
    assert set(plain["data"]) == {"seed", "second"}

    # the namespaceSelector leaves a namespace labelled skip=yes alone
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "quiet"}}
    ns["metadata"]["labels"] = {"skip": "yes"}
    await api.ok("POST", "/api/v1/namespaces", ns)
    quiet = await api.ok("POST", "/api/v1/namespaces/quiet/configmaps", configmap("q", seed="0"))
    assert set(quiet["data"]) == {"seed"}


async def test_a_service_reference_reaches_a_ready_loopback_endpoint(
    api: Api, webhooks: Webhooks
) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "hooks"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": webhooks.port}]},
    }
    await api.ok("POST", "/api/v1/namespaces/default/services", service)
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "hooks-1", "labels": {"kubernetes.io/service-name": "hooks"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": webhooks.port, "protocol": "TCP"}],
    }
    await api.ok("POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", slice_)
    stamp = webhooks.hook(
        "stamp",
        lambda r: patch(
            r, [{"op": "add", "path": "/metadata/labels", "value": {"stamped": "yes"}}]
        ),
        clientConfig={"service": {"namespace": "default", "name": "hooks", "path": "/stamp"}},
    )
    created = await api.ok("POST", MWC, configuration("MutatingWebhookConfiguration", "svc", stamp))
    assert created["webhooks"][0]["clientConfig"]["service"]["port"] == 443  # defaulted
    assert created["webhooks"][0]["timeoutSeconds"] == 10
    await until_active(api, labelled, configmap("probe"))


async def test_custom_resources_and_deletes_are_reviewed(api: Api, webhooks: Webhooks) -> None:
    await api.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd())
    widgets = "/apis/example.com/v1/namespaces/default/widgets"
    await apoll_until(lambda: _served(api, widgets), what="the widgets kind to be served")
    guard = webhooks.hook(
        "guard",
        lambda r: (
            {"uid": r["uid"], "allowed": False, "status": {"reason": "Forbidden"}}
            if r["operation"] == "DELETE"
            else allow(r)
        ),
        rules=[
            {
                "operations": ["DELETE", "CREATE"],
                "apiGroups": ["example.com"],
                "apiVersions": ["*"],
                "resources": ["*"],
                "scope": "Namespaced",
            }
        ],
    )
    await api.ok("POST", VWC, configuration("ValidatingWebhookConfiguration", "guard", guard))
    await until_active(
        api, lambda s, _: s == 201 and "guard" in webhooks.reviews, widget("probe"), widgets
    )
    await api.ok("POST", widgets, widget("kept"))
    status, out = await api.delete(f"{widgets}/kept")
    assert (status, out["message"]) == (
        400,
        'admission webhook "guard.example.com" denied the request: Forbidden',
    )
    review = webhooks.reviews["guard"][-1]
    assert review["object"] is None and review["oldObject"]["metadata"]["name"] == "kept"
    assert review["kind"]["kind"] == "Widget"
    assert review["options"]["kind"] == "DeleteOptions"


async def _served(api: Api, path: str) -> bool:
    return (await api.get(path))[0] == 200


async def test_webhook_configurations_are_validated_with_kubernetes_messages(api: Api) -> None:
    bad = {
        "name": "short",
        "clientConfig": {"url": "http://example.com/x?q=1"},
        "rules": [{"operations": ["MAKE"], "apiGroups": [""], "apiVersions": ["v1"]}],
        "admissionReviewVersions": ["v2"],
        "timeoutSeconds": 31,
        "failurePolicy": "Sometimes",
    }
    status, out = await api.post(MWC, configuration("MutatingWebhookConfiguration", "bad", bad))
    assert status == 422
    causes = {c["field"]: c["message"] for c in out["details"]["causes"]}
    assert causes["webhooks[0].name"] == (
        'Invalid value: "short": should be a domain with at least three segments separated by dots'
    )
    assert causes["webhooks[0].clientConfig.url"].endswith(
        "query parameters are not permitted in the URL"
    )
    assert causes["webhooks[0].rules[0].resources"] == "Required value"
    assert causes["webhooks[0].rules[0].operations[0]"] == (
        'Unsupported value: "MAKE": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"'
    )
    assert (
        causes["webhooks[0].sideEffects"]
        == "Required value: must specify one of None, NoneOnDryRun"
    )
    assert causes["webhooks[0].admissionReviewVersions"] == (
        "Required value: must specify one of v1, v1beta1"
    )
    assert causes["webhooks[0].timeoutSeconds"] == (
        "Invalid value: 31: the timeout value must be between 1 and 30 seconds"
    )
    assert causes["webhooks[0].failurePolicy"] == (
        'Unsupported value: "Sometimes": supported values: "Fail", "Ignore"'
    )


async def test_match_conditions_are_validated_when_written(api: Api) -> None:
    def with_conditions(*conditions: Obj) -> Obj:
        hook = {
            "name": "checked.example.com",
            "clientConfig": {"url": "https://127.0.0.1:1/x"},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "matchConditions": list(conditions),
        }
        return configuration("ValidatingWebhookConfiguration", "checked", hook)

    many = [{"name": f"c{i}", "expression": "true"} for i in range(65)]
    status, out = await api.post(VWC, with_conditions(*many))
    assert status == 422
    assert out["details"]["causes"] == [
        {
            "reason": "FieldValueTooMany",
            "message": "Too many: 65: must have at most 64 items",
            "field": "webhooks[0].matchConditions",
        }
    ]
    status, out = await api.post(
        VWC,
        with_conditions(
            {"name": "same", "expression": "object.("},
            {"name": "same", "expression": "  "},
            {"name": "not a name!", "expression": "true"},
        ),
    )
    assert status == 422
    causes = {c["field"]: c["message"] for c in out["details"]["causes"]}
    conditions = "webhooks[0].matchConditions"
    assert causes[f"{conditions}[0].expression"].startswith(
        'Invalid value: "object.(": compilation failed: ERROR: <input>:1:'
    )
    assert causes[f"{conditions}[1].expression"] == "Required value"
    assert causes[f"{conditions}[1].name"] == 'Duplicate value: "same"'
    assert causes[f"{conditions}[2].name"].startswith(
        'Invalid value: "not a name!": name part must consist of alphanumeric characters'
    )
    await api.ok("POST", VWC, with_conditions(*many[:64]))


async def test_match_conditions_choose_which_webhooks_are_called(
    api: Api, webhooks: Webhooks
) -> None:
    labelled_only = [
        {
            "name": "hooked",
            "expression": "has(object.metadata.labels) && object.metadata.labels['hooked'] == 'yes'",
        },
        {"name": "not-by-nobody", "expression": "request.userInfo.username != 'nobody'"},
        {
            "name": "may-create",
            "expression": "authorizer.requestResource.check('create').allowed()",
        },
    ]
    stamp = webhooks.hook(
        "stamp",
        lambda r: patch(r, [{"op": "add", "path": "/data/stamped", "value": "yes"}]),
        matchConditions=labelled_only,
    )
    await api.ok("POST", MWC, configuration("MutatingWebhookConfiguration", "stamp", stamp))
    hooked = configmap("probe", seed="0")
    hooked["metadata"]["labels"] = {"hooked": "yes"}
    await until_active(api, lambda s, out: s == 201 and "stamped" in out["data"], hooked)
    webhooks.reviews.clear()
    plain = await api.ok("POST", CM, configmap("plain", seed="0"))
    assert plain["data"] == {"seed": "0"} and "stamp" not in webhooks.reviews

    # a condition that cannot be evaluated: Fail refuses (403), Ignore skips the webhook, and a
    # false condition skips it whatever the others' errors
    missing = {"name": "missing", "expression": "object.data.missing == 'x'"}
    strict = webhooks.hook("strict", allow, matchConditions=[missing], failurePolicy="Fail")
    lenient = webhooks.hook("lenient", allow, matchConditions=[missing], failurePolicy="Ignore")
    never = webhooks.hook(
        "never",
        allow,
        matchConditions=[missing, {"name": "off", "expression": "false"}],
        failurePolicy="Fail",
    )
    for name, hook in (("lenient", lenient), ("never", never)):
        await api.ok("POST", VWC, configuration("ValidatingWebhookConfiguration", name, hook))
    await api.ok("POST", VWC, configuration("ValidatingWebhookConfiguration", "strict", strict))
    await until_active(api, lambda s, _: s == 403, configmap("probe", seed="0"))
    status, out = await api.post(CM, configmap("refused", seed="0"))
    assert (status, out["reason"]) == (403, "Forbidden")
    assert out["message"].startswith(
        "configmaps \"refused\" is forbidden: expression 'object.data.missing == 'x'' "
        "resulted in error: "
    )
    await api.ok("DELETE", f"{VWC}/strict")
    await until_active(api, lambda s, _: s == 201, configmap("probe", seed="0"))
    webhooks.reviews.clear()
    await api.ok("POST", CM, configmap("passed", seed="0"))
    assert not {"lenient", "never"} & set(webhooks.reviews)
    await api.ok("POST", CM, configmap("matched", missing="x"))
    assert [r["name"] for r in webhooks.reviews["lenient"]] == ["matched"]
    assert "never" not in webhooks.reviews


async def test_a_delete_goes_through_mutating_webhooks_which_may_only_refuse_it(
    api: Api, webhooks: Webhooks
) -> None:
    def on_delete(request: Obj) -> Obj:
        name = request["oldObject"]["metadata"]["name"]
        if name == "patched":
            return patch(request, [{"op": "add", "path": "/metadata/labels", "value": {}}])
        if name == "refused":
            return {"uid": request["uid"], "allowed": False, "status": {"message": "keep it"}}
        return allow(request)

    deletes = [
        {
            "operations": ["DELETE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["configmaps"],
        }
    ]
    for name in ("plain", "patched", "refused"):
        await api.ok("POST", CM, configmap(name))
    hook = webhooks.hook("deleter", on_delete, rules=deletes)
    await api.ok("POST", MWC, configuration("MutatingWebhookConfiguration", "deleter", hook))

    async def refusing() -> bool:
        return (await api.delete(f"{CM}/refused?dryRun=All"))[0] == 400

    await apoll_until(refusing, what="the mutating webhook to see deletes")
    await api.ok("DELETE", f"{CM}/plain")
    review = webhooks.reviews["deleter"][-1]
    assert (review["operation"], review["object"]) == ("DELETE", None)
    assert review["oldObject"]["metadata"]["name"] == "plain"
    assert review["options"]["kind"] == "DeleteOptions"

    status, out = await api.delete(f"{CM}/patched")
    assert (status, out["message"]) == (
        500,
        'Internal error occurred: admission webhook "deleter.example.com" attempted to modify '
        "the object, which is not supported for this operation",
    )
    status, out = await api.delete(f"{CM}/refused")
    assert (status, out["message"]) == (
        400,
        'admission webhook "deleter.example.com" denied the request: keep it',
    )
    for name in ("patched", "refused"):
        assert (await api.get(f"{CM}/{name}"))[0] == 200


async def test_webhook_audit_annotations_reach_the_audit_log(
    make_api: MakeApi, webhooks: Webhooks, tmp_path: Path
) -> None:
    policy = tmp_path / "audit-policy.yaml"
    policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
    log = tmp_path / "audit.log"
    api = await make_api(audit_policy_file=policy, audit_log_path=str(log))
    noted = webhooks.hook(
        "noted", lambda r: allow(r, auditAnnotations={"verdict": f"fine:{r['name']}"})
    )
    await api.ok("POST", VWC, configuration("ValidatingWebhookConfiguration", "noted", noted))
    await until_active(api, lambda s, _: s == 201 and "noted" in webhooks.reviews, configmap("p"))
    async with api.client.post(CM, json=configmap("audited")) as resp:
        assert resp.status == 201
        audit_id = resp.headers["Audit-Id"]

    event = await audit_event(log, audit_id)
    assert event["annotations"]["noted.example.com/verdict"] == "fine:audited"


async def test_exec_and_port_forward_are_admitted_as_connect(api: Api, webhooks: Webhooks) -> None:
    await api.create_pod("shell")
    connect = [
        {
            "operations": ["CONNECT"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods/exec", "pods/portforward"],
        }
    ]

    def rename(request: Obj) -> Obj:
        if request["subResource"] != "exec":
            return allow(request)
        return patch(request, [{"op": "add", "path": "/container", "value": "renamed"}])

    def refuse_rm(request: Obj) -> Obj:
        if "rm" in request["object"].get("command", []) or request["object"].get("ports"):
            return {"uid": request["uid"], "allowed": False, "status": {"message": "not that"}}
        return allow(request)

    renamer = webhooks.hook("renamer", rename, rules=connect)
    guard = webhooks.hook("connect-guard", refuse_rm, rules=connect)
    await api.ok("POST", MWC, configuration("MutatingWebhookConfiguration", "renamer", renamer))
    await api.ok("POST", VWC, configuration("ValidatingWebhookConfiguration", "guard", guard))
    pod = "/api/v1/namespaces/default/pods/shell"
    upgrade = {"Upgrade": "websocket", "Connection": "Upgrade"}

    async def exec_(*command: str) -> tuple[int, Obj]:
        query = [("command", c) for c in command] + [("stdout", "true")]
        async with api.client.get(f"{pod}/exec", params=query, headers=upgrade) as resp:
            return resp.status, await resp.json()

    async def refused() -> bool:
        """Both webhooks at work: two configurations reach admission through two watch caches,
        so the validating one being active says nothing of the mutating one."""
        if (await exec_("rm", "-rf", "/"))[0] != 400:
            return False
        return webhooks.reviews["connect-guard"][-1]["object"].get("container") == "renamed"

    await apoll_until(refused, what="the CONNECT webhooks to take effect")
    status, out = await exec_("rm", "-rf", "/")
    assert (
        out["message"]
        == 'admission webhook "connect-guard.example.com" denied the request: not that'
    )
    review = webhooks.reviews["connect-guard"][-1]
    assert (review["operation"], review["subResource"], review["kind"]["kind"]) == (
        "CONNECT",
        "exec",
        "PodExecOptions",
    )
    assert review["object"] == {
        "kind": "PodExecOptions",
        "apiVersion": "v1",
        "stdout": True,
        "container": "renamed",  # the mutating webhook's answer, seen by the validating one
        "command": ["rm", "-rf", "/"],
    }
    assert review["oldObject"] is None and "options" not in review
    # the exec is made with the options as the webhooks left them
    status, out = await exec_("ls")
    assert (status, out["message"]) == (400, "container renamed is not valid for pod shell")

    async with api.client.get(
        f"{pod}/portforward", params={"ports": "8080"}, headers=upgrade
    ) as resp:
        assert resp.status == 400
    review = webhooks.reviews["connect-guard"][-1]
    assert review["subResource"] == "portforward"
    assert review["object"] == {
        "kind": "PodPortForwardOptions",
        "apiVersion": "v1",
        "ports": [8080],
    }
