"""The kubelet's token manager against a real apiserver (secure port on, so it signs tokens),
in virtual time (an injected wall clock, no jitter): a pod's token is requested bound to the pod,
served from the cache until 80% of its lifetime has passed, then renewed; a renewal that fails
keeps the old token while it is valid and is Kubernetes' error once it is not; a token that
cannot be fetched at all says so; a forgotten pod has no tokens left."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from api.registry import REGISTRY
from client.rest import ApiClient
from kubelite.testing import Processes
from services.kubelet.token_manager import TokenError, TokenManager
from tests.factories import container, pod

pytestmark = [pytest.mark.timeout(60)]

Obj = dict[str, Any]
ACCOUNTS = REGISTRY.require("", "ServiceAccount")
PODS = REGISTRY.require("", "Pod")
PROJECTION = {"expirationSeconds": 600, "path": "token"}


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def issued(token: str) -> Obj:
    return dict(jwt.decode(token, options={"verify_signature": False}))


@pytest.fixture
async def client(kubelite_processes: Processes) -> Any:
    api = kubelite_processes.apiserver(store="memory://", secure=True)
    async with ApiClient(server=api.url) as client:
        yield client


async def test_a_token_is_bound_to_the_pod_cached_and_renewed_at_80_percent(
    client: ApiClient,
) -> None:
    await client.create(ACCOUNTS, {"metadata": {"name": "robot"}}, namespace="default")
    body = pod("p", container("main", "busybox"), serviceAccountName="robot")
    created = await client.create(PODS, body, namespace="default")
    uid = created["metadata"]["uid"]
    clock = Clock()
    tokens = TokenManager(client, clock=clock, jitter=lambda: 0.0)

    first = await tokens.token(created, PROJECTION)
    claims = issued(first)
    assert claims["sub"] == "system:serviceaccount:default:robot"
    assert claims["kubernetes.io"]["pod"] == {"name": "p", "uid": uid}
    assert claims["exp"] - claims["iat"] == 600
    # the clock follows the apiserver's: at the moment it issued the token, renewal is 480 s
    # (80% of 600) away, and until then the cached token is the answer
    clock.now = claims["iat"]
    assert tokens.renew_in(uid) == 480
    clock.now += 479
    assert await tokens.token(created, PROJECTION) == first

    clock.now += 2
    second = await tokens.token(created, PROJECTION)
    assert second != first
    clock.now = issued(second)["iat"]
    assert await tokens.token(created, PROJECTION) == second

    # the account goes away: renewal fails, the current token is kept while it is valid ...
    await client.delete(ACCOUNTS, "robot", namespace="default")
    clock.now += 481
    assert await tokens.token(created, PROJECTION) == second
    # ... and is an error once it has expired
    clock.now += 120
    with pytest.raises(TokenError, match=r"expired and refresh failed: .*not found"):
        await tokens.token(created, PROJECTION)

    tokens.forget(uid)
    assert tokens.renew_in(uid) is None


async def test_a_token_that_cannot_be_fetched_says_why(client: ApiClient) -> None:
    await client.create(ACCOUNTS, {"metadata": {"name": "robot"}}, namespace="default")
    body = pod("q", container("main", "busybox"), serviceAccountName="robot")
    created = await client.create(PODS, body, namespace="default")
    created["spec"]["serviceAccountName"] = "ghost"  # as if the account was renamed away
    tokens = TokenManager(client)
    with pytest.raises(TokenError) as caught:
        await tokens.token(created, PROJECTION)
    assert str(caught.value) == 'failed to fetch token: serviceaccounts "ghost" not found'
