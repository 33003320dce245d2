"""A node's Lease renewals under a service account's bulk-create flood, with priority and
fairness on and off (the same run).

Why: a kubelet renews its Lease every 10 s and the node lifecycle controller marks a node
unreachable after 40 s without one; a client flooding the apiserver must not delay them.
With ``--enable-priority-and-fairness`` (the default) the flood queues in ``workload-low`` and
the renewals take ``node-high`` seats; without it both draw on the same mutating pool, and a
renewal refused with 429 waits its ``Retry-After`` second as client-go does.

Each mode gets its own apiserver process (SQLite store, as ``kubelite up``'s, whose writes wait
on the disk while holding their seat; secure port; ``LIMITS``, ``--max-requests-inflight
4 --max-mutating-requests-inflight 2``: 6 seats, so a flood of ``--concurrency`` (32)
creates in flight is more than the server takes at once). Over TLS with client certificates:

* the flood: ``system:serviceaccount:default:bulk`` creating ConfigMaps, each worker waiting
  ``Retry-After`` after a 429, for ``--seconds``;
* the node: ``system:node:node1`` renewing ``kube-node-lease/node1`` back to back (one in
  flight) meanwhile; a renewal's latency runs from its first try to its 200, retries included.

Figures: the renewals' p50, p99 and slowest with the flood, in each mode, the 429s they met,
and the flood's creates/s (APF on as a share of APF off). Limits: the load generator shares the cores with the server;
one node, one flooding identity.

``python -m bench.apf_leases [--seconds S] [--concurrency C]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import ssl
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import uvloop

from bench.harness import Context, Figure, figure, percentile
from bench.writes import CONCURRENCY, suite_rounds
from component import pki
from kubelite.testing import Processes

SCENARIO = "apf-leases"
SEATS = {"--max-requests-inflight": 4, "--max-mutating-requests-inflight": 2}
LIMITS = [f"{flag}={n}" for flag, n in SEATS.items()]
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node1"
BULK = "system:serviceaccount:default:bulk"
MODES = {"APF on": "true", "APF off": "false"}

Obj = dict[str, Any]


def _client_tls(ca: Path, files: pki.KeyPair) -> ssl.SSLContext:
    tls = ssl.create_default_context(cafile=ca)
    tls.load_cert_chain(files.cert, files.key)
    return tls


def _client_cert(
    ca: pki.CertificateAuthority, directory: Path, *, user: str, group: str
) -> pki.KeyPair:
    name = user.replace(":", "-")
    return pki.ensure_client_cert(ca, directory, name=name, user=user, groups=[group])


async def _admin(session: aiohttp.ClientSession, url: str, path: str, body: Obj) -> None:
    async with session.post(url + path, json=body) as resp:
        if resp.status != 201:
            raise RuntimeError(f"set-up POST {path} answered {resp.status}: {await resp.text()}")


async def _set_up(url: str) -> None:
    """The node, its Lease, and the account's right to create ConfigMaps in ``default``."""
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default"
    async with aiohttp.ClientSession() as s:
        await _admin(s, url, "/api/v1/nodes", {"metadata": {"name": "node1"}})
        lease = {"metadata": {"name": "node1"}, "spec": {"holderIdentity": "node1"}}
        await _admin(s, url, LEASE.rsplit("/", 1)[0], lease)
        rule = {"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"]}
        await _admin(s, url, f"{rbac}/roles", {"metadata": {"name": "bulk"}, "rules": [rule]})
        binding = {
            "metadata": {"name": "bulk"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bulk"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": BULK}],
        }
        await _admin(s, url, f"{rbac}/rolebindings", binding)


async def _retrying(
    session: aiohttp.ClientSession, method: str, url: str, body: Obj
) -> tuple[Obj, int]:
    """``method url`` until it is not a 429, waiting ``Retry-After`` between tries (client-go);
    the answer and how many 429s came first."""
    refused = 0
    while True:
        async with session.request(method, url, data=json.dumps(body),
                                   headers={"Content-Type": "application/json"}) as resp:  # fmt: skip
            answer = await resp.read()
            if resp.status != 429:
                if resp.status >= 300:
                    raise RuntimeError(f"{method} {url} answered {resp.status}: {answer!r}")
                loaded: Obj = json.loads(answer)
                return loaded, refused
            refused += 1
            await asyncio.sleep(float(resp.headers.get("Retry-After", "1")))


def _flood(url: str, ca: Path, files: pki.KeyPair, *, until: float, in_flight: int) -> int:
    """In a process of its own (so that the renewals' client never waits behind the flood's
    event loop): the bulk account's creates until ``until`` (monotonic); how many."""
    return uvloop.run(_flood_loop(url, _client_tls(ca, files), until=until, in_flight=in_flight))


async def _flood_loop(url: str, tls: ssl.SSLContext, *, until: float, in_flight: int) -> int:
    created = 0
    numbers = iter(range(10**9))
    connector = aiohttp.TCPConnector(limit=0, ssl=tls)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal created
            while time.monotonic() < until:
                body = {"metadata": {"name": f"bulk-{next(numbers)}"}, "data": {"k": "v"}}
                await _retrying(
                    session, "POST", f"{url}/api/v1/namespaces/default/configmaps", body
                )
                created += 1

        await asyncio.gather(*(worker() for _ in range(in_flight)))
    return created


async def _renew(url: str, tls: ssl.SSLContext, *, until: float) -> tuple[list[float], int]:
    """The node's Lease renewals back to back until ``until``: each one's seconds, and the
    429s they met."""
    latencies: list[float] = []
    refusals = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls)) as session:
        async with session.get(url + LEASE) as resp:
            lease: Obj = await resp.json()
        while time.monotonic() < until:
            lease["spec"]["renewTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
            started = time.monotonic()
            lease, refused = await _retrying(session, "PUT", url + LEASE, lease)
            latencies.append(time.monotonic() - started)
            refusals += refused
    return latencies, refusals


async def _one_mode(
    apf: str, *, seconds: float, concurrency: int, workdir: Path
) -> dict[str, float]:
    processes = Processes(workdir / f"apf-{apf}")
    try:
        api = await asyncio.to_thread(
            processes.apiserver, secure=True,
            args=[*LIMITS, f"--enable-priority-and-fairness={apf}"],
        )  # fmt: skip
        assert api.state_dir is not None
        directory = api.state_dir / "pki"
        ca = pki.ensure_ca(directory)
        node = _client_cert(ca, directory, user="system:node:node1", group="system:nodes")
        bulk = _client_cert(ca, directory, user=BULK, group="system:serviceaccounts")
        await _set_up(api.url)
        secure = f"https://127.0.0.1:{api.port_of('secure')}"
        until = time.monotonic() + seconds
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            flood = asyncio.get_running_loop().run_in_executor(
                pool,
                functools.partial(
                    _flood, secure, ca.files.cert, bulk, until=until, in_flight=concurrency
                ),
            )
            latencies, refusals = await _renew(
                secure, _client_tls(ca.files.cert, node), until=until
            )
            created = await flood
    finally:
        await asyncio.to_thread(processes.stop_all)
    return {
        "p50": percentile(latencies, 0.5) * 1000,
        "p99": percentile(latencies, 0.99) * 1000,
        "max": max(latencies) * 1000,
        "creates/s": created / seconds,
        "429s": float(refusals),
    }


async def measure(*, seconds: float, concurrency: int, workdir: Path) -> dict[str, float]:
    """Lease renewal p50/p99 (ms) and flood creates/s, APF on then off."""
    out: dict[str, float] = {}
    for mode, apf in MODES.items():
        got = await _one_mode(apf, seconds=seconds, concurrency=concurrency, workdir=workdir)
        out[f"flood creates/s, {mode}"] = got["creates/s"]
        out[f"lease renew p50 ms, {mode}"] = got["p50"]
        out[f"lease renew p99 ms, {mode}"] = got["p99"]
        out[f"lease renew max ms, {mode}"] = got["max"]
        out[f"lease renewals' 429s, {mode}"] = got["429s"]
    return out


async def run(ctx: Context) -> list[Figure]:
    """The suite's scenario: both modes in the same round."""
    rounds, seconds = await suite_rounds(ctx, SCENARIO, measure)
    note = (
        f"{CONCURRENCY} ConfigMap creates in flight by one service account, "
        f"{sum(SEATS.values())} seats, {seconds:g} s"
    )
    figures = [
        figure(SCENARIO, f"lease renew {q} ms, {mode}", unit="ms",
               samples=rounds[f"lease renew {q} ms, {mode}"], note=note)
        for mode in MODES
        for q in ("p50", "p99", "max")
    ]  # fmt: skip
    figures += [
        figure(SCENARIO, f"lease renewals' 429s, {mode}", unit="429s",
               samples=rounds[f"lease renewals' 429s, {mode}"], note=note)
        for mode in MODES
    ]  # fmt: skip
    figures += [
        figure(SCENARIO, "flood creates/s, APF off", unit="creates/s",
               samples=rounds["flood creates/s, APF off"], note="the two in-flight pools"),
        figure(SCENARIO, "flood creates/s, APF on", unit="creates/s",
               samples=rounds["flood creates/s, APF on"],
               ceiling=f"{SCENARIO}/flood creates/s, APF off", note=note),
    ]  # fmt: skip
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.apf_leases", description=__doc__)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--concurrency", type=int, default=CONCURRENCY)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kubelite-apf-leases-") as tmp:
        got = uvloop.run(
            measure(seconds=args.seconds, concurrency=args.concurrency, workdir=Path(tmp))
        )
    print(f"{args.concurrency} creates in flight, {args.seconds:g} s per mode, loopback")
    width = max(len(name) for name in got)
    for name, value in got.items():
        print(f"  {name:{width}} {value:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
