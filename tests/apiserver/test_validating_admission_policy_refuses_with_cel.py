"""ValidatingAdmissionPolicy: CEL validations, params from a ConfigMap, and the binding's
Deny / Warn / Audit actions, worded as Kubernetes words them; composited ``variables``,
``namespaceObject``, ``matchConditions`` and ``auditAnnotations`` (in the audit log). A new
policy reaches admission through the watch caches, so each test first waits until a dry-run
write shows it at work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubelite.testing.waiting import apoll_until
from tests.apiserver.conftest import Api, MakeApi, audit_event

Obj = dict[str, Any]

CM = "/api/v1/namespaces/default/configmaps"
VAP = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
ON_CONFIGMAPS = {
    "resourceRules": [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["configmaps"],
        }
    ]
}


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> Obj:
    meta: Obj = {"name": name, **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def policy(name: str, *validations: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"matchConstraints": ON_CONFIGMAPS, "validations": list(validations), **spec},
    }


def binding(name: str, policy_name: str, *actions: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy_name, "validationActions": list(actions), **spec},
    }


async def until(api: Api, body: Obj, status: int) -> None:
    async def answered() -> bool:
        return (await api.post(f"{CM}?dryRun=All", body))[0] == status

    await apoll_until(answered, what=f"a dry-run create to answer {status}")


async def test_deny_with_params_and_warn_with_a_message_expression(api: Api) -> None:
    await api.ok("POST", CM, configmap("limits", max="2"))
    limit = {
        "expression": "size(object.data) <= int(params.data.max)",
        "message": "too many keys",
    }
    param_kind = {"apiVersion": "v1", "kind": "ConfigMap"}
    created = await api.ok("POST", VAP, policy("max-keys", limit, paramKind=param_kind))
    assert created["spec"]["failurePolicy"] == "Fail"  # defaulted
    selected = {"objectSelector": {"matchLabels": {"limited": "yes"}}}
    ref = {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"}
    await api.ok(
        "POST",
        VAPB,
        binding("max-keys-default", "max-keys", "Deny", paramRef=ref, matchResources=selected),
    )
    named = {
        "expression": "object.metadata.name.startsWith('app-')",
        "messageExpression": "'name ' + object.metadata.name + ' lacks the app- prefix'",
        "reason": "Forbidden",
    }
    await api.ok("POST", VAP, policy("app-prefix", named))
    await api.ok("POST", VAPB, binding("app-prefix-warn", "app-prefix", "Warn"))

    big = configmap("app-big", {"limited": "yes"}, a="1", b="2", c="3")
    await until(api, big, 422)
    status, out = await api.post(CM, big)
    assert (status, out["reason"], out["message"]) == (
        422,
        "Invalid",
        "ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-default' denied request: "
        "too many keys",
    )
    # unlabelled: the binding's objectSelector leaves it alone
    await api.ok("POST", CM, configmap("app-free", a="1", b="2", c="3"))

    async def warned() -> list[str]:
        async with api.client.post(f"{CM}?dryRun=All", json=configmap("plain")) as resp:
            return resp.headers.getall("Warning", [])

    warnings = await apoll_until(warned, what="the Warn binding to take effect")
    assert warnings == [
        "299 - \"Validation failed for ValidatingAdmissionPolicy 'app-prefix' with binding "
        "'app-prefix-warn': name plain lacks the app- prefix\""
    ]
    await api.ok("POST", CM, configmap("plain"))  # Warn does not refuse


async def test_expression_errors_follow_the_failure_policy(api: Api) -> None:
    broken = {"expression": "object.data.missing == 'x'"}
    await api.ok("POST", VAP, policy("broken", broken))
    await api.ok("POST", VAPB, binding("broken", "broken", "Deny"))
    await until(api, configmap("x", other="1"), 422)
    status, out = await api.post(CM, configmap("x", other="1"))
    assert status == 422
    assert out["message"].startswith(
        "ValidatingAdmissionPolicy 'broken' with binding 'broken' denied request: "
        "expression 'object.data.missing == 'x'' resulted in error: "
    )
    changed = await api.ok("GET", f"{VAP}/broken")
    changed["spec"]["failurePolicy"] = "Ignore"
    await api.ok("PUT", f"{VAP}/broken", changed)
    await until(api, configmap("x", other="1"), 201)


async def test_missing_params_deny(api: Api) -> None:
    check = {"expression": "true"}
    kind = {"apiVersion": "v1", "kind": "ConfigMap"}
    await api.ok("POST", VAP, policy("needs-params", check, paramKind=kind))
    ref = {"name": "absent", "parameterNotFoundAction": "Deny"}
    await api.ok("POST", VAPB, binding("needs-params", "needs-params", "Deny", paramRef=ref))
    await until(api, configmap("y"), 403)
    status, out = await api.post(CM, configmap("y"))
    assert (status, out["message"]) == (
        403,
        "ValidatingAdmissionPolicy 'needs-params' with binding 'needs-params' denied request: "
        "failed to configure binding: no params found for policy binding with `Deny` "
        "parameterNotFoundAction",
    )


async def test_params_a_selector_matches_are_each_evaluated(api: Api) -> None:
    # the unlabelled one first: once the cache holds the last param, it holds this one too
    await api.ok("POST", CM, configmap("forbid-green", forbidden="green"))
    await api.ok("POST", CM, configmap("forbid-red", {"forbids": "yes"}, forbidden="red"))
    await api.ok("POST", CM, configmap("forbid-blue", {"forbids": "yes"}, forbidden="blue"))
    check = {
        "expression": "!(params.data.forbidden in object.data)",
        "messageExpression": "'key ' + params.data.forbidden + ' is forbidden'",
    }
    kind = {"apiVersion": "v1", "kind": "ConfigMap"}
    await api.ok("POST", VAP, policy("forbidden-keys", check, paramKind=kind))
    ref = {"selector": {"matchLabels": {"forbids": "yes"}}, "parameterNotFoundAction": "Deny"}
    await api.ok("POST", VAPB, binding("forbidden-keys", "forbidden-keys", "Deny", paramRef=ref))
    await until(api, configmap("uses-blue", blue="1"), 422)
    status, out = await api.post(CM, configmap("uses-red", red="1"))
    assert (status, out["message"]) == (
        422,
        "ValidatingAdmissionPolicy 'forbidden-keys' with binding 'forbidden-keys' denied "
        "request: key red is forbidden",
    )
    await api.ok("POST", CM, configmap("uses-green", green="1"))  # not selected: no param


async def test_policies_and_bindings_are_validated(api: Api) -> None:
    status, out = await api.post(VAP, {**policy("empty"), "spec": {}})
    assert status == 422
    causes = {c["field"]: c["message"] for c in out["details"]["causes"]}
    assert causes == {
        "spec.validations": "Required value: validations or auditAnnotations must contain at "
        "least one item",
        "spec.matchConstraints": "Required value",
    }
    status, out = await api.post(VAPB, binding("b", "", "Deny", "Refuse"))
    assert status == 422
    causes = {c["field"]: c["message"] for c in out["details"]["causes"]}
    assert causes == {
        "spec.policyName": "Required value",
        "spec.validationActions[1]": 'Unsupported value: "Refuse": supported values: '
        '"Audit", "Deny", "Warn"',
    }


async def test_policy_expressions_that_do_not_compile_are_refused(api: Api) -> None:
    broken = policy(
        "broken",
        {"expression": "object.(", "messageExpression": "'a' +"},
        variables=[{"name": "v", "expression": "1 +"}],
        matchConditions=[{"name": "m", "expression": "(("}],
        auditAnnotations=[{"key": "k", "valueExpression": "'x"}],
    )
    status, out = await api.post(VAP, broken)
    assert status == 422
    causes = {c["field"]: c["message"] for c in out["details"]["causes"]}
    for field, expression in (
        ("spec.matchConditions[0].expression", "(("),
        ("spec.variables[0].expression", "1 +"),
        ("spec.validations[0].expression", "object.("),
        ("spec.validations[0].messageExpression", "'a' +"),
        ("spec.auditAnnotations[0].valueExpression", "'x"),
    ):
        assert causes[field].startswith(
            f"Invalid value: {json.dumps(expression)}: compilation failed: ERROR: <input>:1:"
        ), (field, causes[field])


async def test_variables_namespace_object_and_match_conditions(api: Api) -> None:
    counted = policy(
        "counted",
        {
            "expression": "variables.withinLimit",
            "messageExpression": (
                "'has ' + string(variables.keys) + ' keys in ' + namespaceObject.metadata.name"
            ),
        },
        variables=[
            {"name": "keys", "expression": "size(object.data)"},
            {"name": "withinLimit", "expression": "variables.keys <= 2"},
            {"name": "unused", "expression": "object.data.missing"},  # fails, used by nobody
        ],
        matchConditions=[
            {
                "name": "not-exempt",
                "expression": "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)",
            }
        ],
    )
    await api.ok("POST", VAP, counted)
    await api.ok("POST", VAPB, binding("counted", "counted", "Deny"))
    big = configmap("big", a="1", b="2", c="3")
    await until(api, big, 422)
    status, out = await api.post(CM, big)
    assert (status, out["message"]) == (
        422,
        "ValidatingAdmissionPolicy 'counted' with binding 'counted' denied request: "
        "has 3 keys in default",
    )
    await api.ok("POST", CM, configmap("small", a="1"))
    # the match condition leaves an exempt object to itself
    await api.ok("POST", CM, configmap("exempt", {"exempt": "yes"}, a="1", b="2", c="3"))


async def test_match_condition_errors_follow_the_failure_policy(api: Api) -> None:
    guarded = policy(
        "guarded",
        {"expression": "false", "message": "never admitted"},
        matchConditions=[{"name": "odd", "expression": "object.data.missing == 'x'"}],
    )
    await api.ok("POST", VAP, guarded)
    await api.ok("POST", VAPB, binding("guarded", "guarded", "Deny"))
    await until(api, configmap("x", other="1"), 422)
    status, out = await api.post(CM, configmap("x", other="1"))
    assert status == 422
    assert out["message"].startswith(
        "ValidatingAdmissionPolicy 'guarded' with binding 'guarded' denied request: "
        "expression 'object.data.missing == 'x'' resulted in error: "
    )
    # the condition holds: the validation decides
    status, out = await api.post(CM, configmap("y", missing="x"))
    assert status == 422 and out["message"].endswith("denied request: never admitted")
    changed = await api.ok("GET", f"{VAP}/guarded")
    changed["spec"]["failurePolicy"] = "Ignore"
    await api.ok("PUT", f"{VAP}/guarded", changed)
    await until(api, configmap("x", other="1"), 201)


async def test_audit_action_and_audit_annotations_reach_the_audit_log(
    make_api: MakeApi, tmp_path: Path
) -> None:
    audit_policy = tmp_path / "audit-policy.yaml"
    audit_policy.write_text(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
    )
    log = tmp_path / "audit.log"
    api = await make_api(audit_policy_file=audit_policy, audit_log_path=str(log))
    audited = policy(
        "audited",
        {"expression": "true"},
        {"expression": "size(object.data) <= 1", "message": "too many keys"},
        auditAnnotations=[
            {"key": "keys", "valueExpression": "string(size(object.data))"},
            {"key": "absent", "valueExpression": "null"},
        ],
    )
    await api.ok("POST", VAP, audited)
    await api.ok("POST", VAPB, binding("audited", "audited", "Audit", "Warn"))

    pair = configmap("pair", a="1", b="2")

    async def warned() -> bool:
        async with api.client.post(f"{CM}?dryRun=All", json=pair) as resp:
            return bool(resp.headers.getall("Warning", []))

    await apoll_until(warned, what="the Audit and Warn binding to act")
    async with api.client.post(CM, json=pair) as resp:
        assert resp.status == 201  # Audit and Warn do not refuse
        warnings, audit_id = resp.headers.getall("Warning"), resp.headers["Audit-Id"]
    assert warnings == [
        "299 - \"Validation failed for ValidatingAdmissionPolicy 'audited' with binding "
        "'audited': too many keys\""
    ]

    event = await audit_event(log, audit_id)
    annotations = event["annotations"]
    assert json.loads(annotations["validation.policy.admission.k8s.io/validation_failure"]) == [
        {
            "message": "too many keys",
            "policy": "audited",
            "binding": "audited",
            "expressionIndex": 1,
            "validationActions": ["Audit", "Warn"],
        }
    ]
    assert annotations["audited/keys"] == "2"
    assert "audited/absent" not in annotations


async def test_the_authorizer_answers_what_users_may_do(api: Api) -> None:
    nobody = "authorizer.serviceAccount('default', 'nobody').group('').resource('configmaps')"
    checked = policy(
        "checked",
        {
            # the insecure port's user is in system:masters: it may do anything
            "expression": "authorizer.requestResource.check('create').allowed() && "
            "authorizer.path('/healthz').check('get').allowed()",
            "message": "the requester may not create",
        },
        {
            "expression": f"{nobody}.namespace('default').check('delete').allowed()",
            "messageExpression": (
                f"'nobody may not delete' + ({nobody}.check('delete').errored() ? ': error' : '')"
            ),
        },
    )
    await api.ok("POST", VAP, checked)
    await api.ok("POST", VAPB, binding("checked", "checked", "Deny"))
    await until(api, configmap("x"), 422)
    status, out = await api.post(CM, configmap("x"))
    assert (status, out["message"]) == (
        422,
        "ValidatingAdmissionPolicy 'checked' with binding 'checked' denied request: "
        "nobody may not delete",
    )
    # once a binding lets the service account delete configmaps, the policy admits
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "deleter"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"]}],
    }
    bound = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "nobody-deletes"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deleter"},
        "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": "default"}],
    }
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default"
    await api.ok("POST", f"{rbac}/roles", role)
    await api.ok("POST", f"{rbac}/rolebindings", bound)
    await until(api, configmap("x"), 201)
