"""``kubelite etcd``: run an etcd member, and back one up or restore it.

Why: a cluster on etcd (``kubelite up --store etcd``, ``--ha``, the compose file's ``ha``
profile) needs etcd members started the same way everywhere, and its operator needs a backup
that restores, as ``etcdctl snapshot save|restore`` gives Kubernetes' operators. Three
sub-commands:

* ``kubelite etcd member --name N --data-dir D --client-url URL --peer-url URL
  [--listen-address ADDR] [--initial-cluster n1=URL,n2=URL,...]`` replaces itself (``exec``) with Debian's ``etcd``
  (``ETCD_BINARY`` names another): the supervisor's SIGTERM or SIGKILL reaches etcd itself,
  and etcd's own log line "ready to serve client requests" says when it serves. Without
  ``--initial-cluster`` the member is a cluster of one. A member whose data dir already holds
  data rejoins its cluster (etcd ignores the initial-cluster flags then), so a restarted
  member catches up from its peers. Members send watch progress notifications every second
  (``PROGRESS_NOTIFY_INTERVAL``), which the apiservers' watch caches use.
* ``kubelite etcd snapshot save FILE --endpoints host:port[,...]`` streams a snapshot of the
  keyspace from the first member that answers, through etcd's v3 JSON gateway
  (``/v3/maintenance/snapshot``, the Snapshot RPC ``etcdctl snapshot save`` uses; etcd appends
  the data's SHA-256, which restore checks), to ``FILE.part``, then renames it into place.
* ``kubelite etcd snapshot restore FILE --data-dir DIR [--name ... --peer-url ...
  --initial-cluster ...]`` makes a new data dir from a snapshot with ``etcdctl snapshot
  restore`` (Debian's ``etcd-client``): etcd 3.4 ships no library for it, and rewriting its WAL
  and raft metadata by hand would be a second implementation of etcd. Revisions are kept, so
  every object comes back at the resourceVersion it had.

What it does not do: TLS to etcd (the members serve plain HTTP on loopback), or membership
changes of a running cluster (``etcdctl member add|remove``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import aiohttp

__all__ = ["build_parser", "main", "member_argv", "save_snapshot"]

SNAPSHOT_TIMEOUT = 300.0
"""Seconds a whole snapshot may take: a large keyspace streams for a while."""


def etcd_binary() -> str:
    found = shutil.which(os.environ.get("ETCD_BINARY", "etcd"))
    if found is None:
        raise SystemExit("kubelite etcd: no etcd binary on the PATH (apt-get install etcd-server)")
    return found


def _listen(url: str, address: str | None) -> str:
    """``url`` with its host replaced by ``address`` (etcd listens on addresses, not names)."""
    if address is None:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{address}:{parts.port}"))


PROGRESS_NOTIFY_INTERVAL = "1s"
"""How often a member tells a watch that asked (every apiserver watch cache's) that it has
received every event: what lets an apiserver serve a consistent LIST from its cache when the
latest writes were to other resources (``services.apiserver.listing``). etcd's default is 10
minutes; kube-apiserver asks on demand instead, which etcd 3.4's JSON gateway cannot carry
(``store.etcd``). A notice a second per idle watch is a few hundred small messages a second on
loopback for a 3-apiserver cluster."""


def member_argv(
    *,
    name: str,
    data_dir: Path | str,
    client_url: str,
    peer_url: str,
    listen_address: str | None = None,
    initial_cluster: str | None = None,
    initial_cluster_token: str = "kubelite",
) -> list[str]:
    """etcd's own flags for one member (after the binary's name)."""
    return [
        f"--name={name}",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={_listen(client_url, listen_address)}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={_listen(peer_url, listen_address)}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster={initial_cluster or f'{name}={peer_url}'}",
        f"--initial-cluster-token={initial_cluster_token}",
        "--initial-cluster-state=new",
        f"--experimental-watch-progress-notify-interval={PROGRESS_NOTIFY_INTERVAL}",
    ]


def _member(args: argparse.Namespace) -> int:
    argv = member_argv(
        name=args.name,
        data_dir=args.data_dir,
        client_url=args.client_url,
        peer_url=args.peer_url,
        listen_address=args.listen_address,
        initial_cluster=args.initial_cluster,
        initial_cluster_token=args.initial_cluster_token,
    )
    executable = etcd_binary()
    sys.stdout.flush()
    os.execv(executable, [executable, *argv])


async def save_snapshot(endpoints: Sequence[str], path: Path) -> int:
    """Stream a snapshot from the first of ``endpoints`` that answers into ``path``; returns
    its size in bytes. Raises ``OSError`` when no member could give one."""
    part = path.with_name(path.name + ".part")
    failures: list[str] = []
    timeout = aiohttp.ClientTimeout(total=SNAPSHOT_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for endpoint in endpoints:
            url = f"http://{endpoint}/v3/maintenance/snapshot"
            try:
                size = await _stream_snapshot(session, url, part)
            except (OSError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                failures.append(f"{endpoint}: {str(exc) or type(exc).__name__}")
                continue
            part.replace(path)
            return size
    part.unlink(missing_ok=True)
    raise OSError("no etcd member gave a snapshot: " + "; ".join(failures))


async def _stream_snapshot(session: aiohttp.ClientSession, url: str, part: Path) -> int:
    """The gateway answers one JSON object per line, ``{"result": {"blob": <base64>, ...}}``,
    or ``{"error": {...}}``."""
    size = 0
    async with session.post(url, json={}) as resp:
        if resp.status != 200:
            raise ValueError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
        with part.open("wb") as out:
            async for line in resp.content:
                if not line.strip():
                    continue
                message = json.loads(line)
                if "error" in message:
                    raise ValueError(str(message["error"].get("message", message["error"])))
                blob = base64.b64decode(message["result"].get("blob", ""))
                out.write(blob)
                size += len(blob)
    if size == 0:
        raise ValueError("an empty snapshot")
    return size


def _save(args: argparse.Namespace) -> int:
    endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]
    path = Path(args.file)
    try:
        size = asyncio.run(save_snapshot(endpoints, path))
    except OSError as exc:
        print(f"kubelite etcd snapshot save: {exc}", file=sys.stderr)
        return 1
    print(f"snapshot saved to {path} ({size} bytes)")
    return 0


def _restore(args: argparse.Namespace) -> int:
    etcdctl = shutil.which("etcdctl")
    if etcdctl is None:
        print(
            "kubelite etcd snapshot restore: needs etcdctl (apt-get install etcd-client)",
            file=sys.stderr,
        )
        return 1
    data_dir = Path(args.data_dir)
    if data_dir.exists() and any(data_dir.iterdir()):
        print(
            f"kubelite etcd snapshot restore: {data_dir} is not empty; restore makes a new "
            "data dir (move the old one away first)",
            file=sys.stderr,
        )
        return 1
    if data_dir.exists():
        data_dir.rmdir()  # etcdctl refuses an existing directory
    argv = [
        etcdctl,
        "snapshot",
        "restore",
        str(args.file),
        f"--data-dir={data_dir}",
        f"--name={args.name}",
        f"--initial-advertise-peer-urls={args.peer_url}",
        f"--initial-cluster={args.initial_cluster or f'{args.name}={args.peer_url}'}",
        f"--initial-cluster-token={args.initial_cluster_token}",
    ]
    done = subprocess.run(
        argv, env={**os.environ, "ETCDCTL_API": "3"}, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        print(f"kubelite etcd snapshot restore: {done.stderr.strip()}", file=sys.stderr)
        return 1
    print(f"restored {args.file} into {data_dir}")
    return 0


def _add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="default", help="the member's name (default default)")
    parser.add_argument(
        "--peer-url",
        default="http://127.0.0.1:2380",
        help="the member's peer URL (default http://127.0.0.1:2380)",
    )
    parser.add_argument(
        "--initial-cluster",
        default=None,
        help="name=peer-url,... of every member (default: this member alone)",
    )
    parser.add_argument(
        "--initial-cluster-token",
        default="kubelite",
        help="the cluster's token; members of one cluster share it (default kubelite)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubelite etcd", description="Run an etcd member; save or restore a snapshot."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    member = commands.add_parser("member", help="run one etcd member (exec's etcd)")
    member.add_argument("--data-dir", required=True, help="the member's data directory")
    member.add_argument(
        "--client-url",
        default="http://127.0.0.1:2379",
        help="where the member serves clients (default http://127.0.0.1:2379)",
    )
    member.add_argument(
        "--listen-address",
        default=None,
        help="the address to listen on at the URLs' ports, when the URLs name a host that "
        "others resolve (a compose service's name; default: the URLs' own hosts)",
    )
    _add_cluster_flags(member)
    snapshot = commands.add_parser("snapshot", help="save or restore a snapshot")
    verbs = snapshot.add_subparsers(dest="verb", required=True, metavar="VERB")
    save = verbs.add_parser("save", help="save a snapshot of a running cluster to FILE")
    save.add_argument("file", metavar="FILE")
    save.add_argument(
        "--endpoints",
        default="127.0.0.1:2379",
        help="host:port[,host:port...] of the members to ask (default 127.0.0.1:2379)",
    )
    restore = verbs.add_parser("restore", help="make a new data dir from the snapshot FILE")
    restore.add_argument("file", metavar="FILE")
    restore.add_argument("--data-dir", required=True, help="the new (empty) data directory")
    _add_cluster_flags(restore)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "member":
        return _member(args)
    return _save(args) if args.verb == "save" else _restore(args)


if __name__ == "__main__":
    sys.exit(main())
