"""ValidatingAdmissionPolicy: CEL validations, params from a ConfigMap, and the binding's
Deny / Warn actions, worded as Kubernetes words them. A new policy reaches admission through
the watch caches, so each test first waits until a dry-run write shows it at work."""

from __future__ import annotations

from typing import Any

from kubelite.testing.waiting import apoll_until
from tests.apiserver.conftest import Api

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
