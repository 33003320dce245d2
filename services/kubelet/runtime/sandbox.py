"""The pod sandbox of the ``process`` runtime: what a container sees of the machine, decided here.

Why it exists: pods that are plain host processes see the host's hostname, share its ``/tmp``
and, as root, can rewrite any host file. With the sandbox every container instance gets new
mount, UTS, PID and IPC namespaces (``sandbox_setup.py`` builds them, in the shim's child; the
network namespace stays shared, so pods keep their 127.x pod IPs): the host's root read-only, a
private writable ``/tmp``, ``/var/tmp`` and ``/run``, the pod's hostname, ``/etc/hosts`` and
``/etc/resolv.conf``, the pod's volumes at their mount paths, root's home, ``/etc/shadow``,
``/etc/gshadow`` and kubelite's own state masked, and the container's process as PID 1.

What this module owns, on the kubelet's side:

* ``probe_sandbox``: whether this node can sandbox at all (root, and a test container built and
  run once at start) — ``--sandbox auto`` runs pods unsandboxed when it cannot, and says why;
* ``SandboxLayout``: the pod's ``/etc`` files (written into the pod's directory) and, per
  container instance, its writable directories and the spec the shim hands ``sandbox_setup``;
* ``nsenter_argv``: the prefix that runs an exec (``kubectl exec``/``cp``, exec probes) inside a
  container's namespaces.

One sandbox per container instance, not per pod: each instance has its own namespaces (and its
own ``/tmp``), all named with the pod's hostname; containers of one pod share their volumes
(host directories) and the network, not their IPC or PID namespace — Kubernetes' defaults share
IPC within a pod, this does not. A restarted container starts with a fresh ``/tmp``, as a
container's writable layer is fresh.

Not guaranteed: see ``sandbox_setup.py`` (no user namespace, seccomp or dropped capabilities;
a mount point created under a read-only host directory hides host mounts below it).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from services.kubelet.runtime.base import ContainerConfig, PodSandbox
from services.kubelet.runtime.sandbox_setup import CAPABILITIES

__all__ = [
    "CLUSTER_DOMAIN",
    "SANDBOX_MODES",
    "SandboxLayout",
    "SandboxUnavailable",
    "hosts_file",
    "nsenter_argv",
    "probe_sandbox",
]

SANDBOX_MODES = ("auto", "on", "off")
"""``--sandbox``: ``auto`` sandboxes when the start-time probe succeeds, ``on`` refuses to start
without it, ``off`` never sandboxes."""
CLUSTER_DOMAIN = "cluster.local"
SETUP = Path(__file__).with_name("sandbox_setup.py")
PROBE_TIMEOUT_SECONDS = 10.0
MASKED_FILES = ("/etc/shadow", "/etc/gshadow")


class SandboxUnavailable(Exception):
    """``--sandbox on`` was asked for and this node cannot sandbox pods (the message says why)."""


async def probe_sandbox(scratch: Path) -> str | None:
    """Why pods cannot be sandboxed on this node, or None when they can.

    Builds a sandbox in ``scratch`` (removed afterwards) and runs ``true`` in it as PID 1,
    exactly as a container would start, so a kernel without ``mount_setattr`` or a missing
    capability shows up here once rather than as every pod's StartError."""
    if os.geteuid() != 0:
        return "the kubelet is not running as root (namespaces and mounts need CAP_SYS_ADMIN)"
    await asyncio.to_thread(scratch.mkdir, parents=True, exist_ok=True)
    instance = tempfile.mkdtemp(prefix="sandbox-probe-", dir=scratch)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", str(SETUP), instance,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            _, err = await asyncio.wait_for(proc.communicate(), PROBE_TIMEOUT_SECONDS)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return f"the sandbox probe did not finish within {PROBE_TIMEOUT_SECONDS:.0f}s"
    finally:
        await asyncio.to_thread(shutil.rmtree, instance, True)
    if proc.returncode != 0:
        why = err.decode(errors="replace").strip().splitlines()
        return f"a test sandbox failed: {why[-1] if why else f'exit {proc.returncode}'}"
    return None


def hosts_file(sandbox: PodSandbox, ip: str) -> str:
    """The pod's ``/etc/hosts``, as the kubelet writes it (``managedHostsFileContent``)."""
    hostname = sandbox.hostname or sandbox.name
    lines = [
        "# Kubernetes-managed hosts file.",
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        "fe00::0\tip6-localnet",
        "fe00::0\tip6-mcastprefix",
        "fe00::1\tip6-allnodes",
        "fe00::2\tip6-allrouters",
    ]
    if sandbox.subdomain:
        fqdn = f"{hostname}.{sandbox.subdomain}.{sandbox.namespace}.svc.{CLUSTER_DOMAIN}"
        lines.append(f"{ip}\t{fqdn}\t{hostname}")
    else:
        lines.append(f"{ip}\t{hostname}")
    if sandbox.host_aliases:
        lines.append("")
        lines.append("# Entries added by HostAliases.")
        lines.extend("\t".join((alias_ip, *names)) for alias_ip, names in sandbox.host_aliases)
    return "\n".join(lines) + "\n"


def nsenter_argv(pid: int, *, cwd: str | None) -> list[str]:
    """Run what follows in the mount, UTS, IPC and PID namespaces of the process ``pid`` (a
    container's PID 1), at ``cwd`` inside it, with the container's capabilities (util-linux
    ``nsenter`` and ``setpriv``: a fork and two execs, a few milliseconds, against a Python
    ``setns`` prelude's interpreter start)."""
    # nsenter opens --wd's path before it enters: name the directory through the container's
    # root as the host sees it (/proc/<pid>/root), so it is the container's directory
    where = f"--wd=/proc/{pid}/root{cwd or '/'}"
    caps = ",".join(["-all", *(f"+{name}" for name in CAPABILITIES)])
    return [
        "nsenter", "-t", str(pid), "-m", "-u", "-i", "-p", "--root", where, "--",
        "setpriv", f"--bounding-set={caps}", "--",
    ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class SandboxLayout:
    """Where a node's sandboxes keep their files, and what every sandbox masks and keeps.

    Per pod: ``<pod dir>/etc/{hosts,hostname,resolv.conf}``. Per container instance:
    ``<pod dir>/sandbox/<instance>/`` with ``tmp/``, ``var-tmp/`` and ``run/`` (the container's
    writable directories: ``kubectl cp`` into ``/tmp`` lands in ``tmp/``), ``rootfs/`` (the
    skeleton's mount point) and ``overlays/``."""

    mask_dirs: tuple[str, ...]
    keep: tuple[str, ...]
    """Paths under a masked directory bound back read-only (the Python the images run)."""

    @classmethod
    def for_state_dir(cls, state_root: Path) -> SandboxLayout:
        """Mask root's home and kubelite's state: the kubelet's ``state_root`` and, under
        ``kubelite up`` (``<up state>/kubelets/<node>``), the whole up state dir (its store and
        kubeconfig). Keep the interpreter the built-in images run (it may live under ``/root``) and
        the runtime's own directory, whose programs they run (``{builtin}`` in the image table;
        a checkout under the host's ``/tmp`` is otherwise hidden by the pod's private ``/tmp``)."""
        state = state_root.resolve()
        masks = ["/root", str(state)]
        up = state.parent.parent
        if state.parent.name == "kubelets" and (up / "kubeconfig").exists():
            masks.append(str(up))
        runtime_dir = Path(__file__).parent  # the built-in programs: the nginx image's server
        kept = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, runtime_dir)}
        return cls(mask_dirs=tuple(masks), keep=tuple(sorted(kept)))

    def _kept(self, path: str) -> list[str]:
        """``keep``, plus the directories on the container's ``PATH`` that a mask would hide
        (the image store's per-image bin directories live in the state dir)."""
        masked = [
            d
            for d in filter(None, path.split(":"))
            if any(d == m or d.startswith(m.rstrip("/") + "/") for m in self.mask_dirs)
        ]
        return sorted({*self.keep, *(os.path.realpath(d) for d in masked if os.path.isdir(d))})

    def write_pod_files(self, pod_dir: Path, sandbox: PodSandbox, *, ip: str) -> dict[str, str]:
        """Write the pod's ``/etc`` files; container path -> node file."""
        etc = pod_dir / "etc"
        etc.mkdir(parents=True, exist_ok=True)
        resolv = sandbox.resolv_conf
        if resolv is None:
            try:
                resolv = Path("/etc/resolv.conf").read_text()
            except OSError:
                resolv = ""
        files = {
            "hosts": hosts_file(sandbox, ip),
            "hostname": (sandbox.hostname or sandbox.name) + "\n",
            "resolv.conf": resolv,
        }
        for name, text in files.items():
            tmp = etc / f".{name}.tmp"
            tmp.write_text(text)
            os.replace(tmp, etc / name)
        return {f"/etc/{name}": str(etc / name) for name in files}

    def container_spec(
        self,
        *,
        pod_dir: Path,
        instance: str,
        sandbox: PodSandbox,
        config: ContainerConfig,
        ip: str,
        working_dir: str,
        path: str,
    ) -> dict[str, object]:
        """Make the instance's directories; the ``SandboxSpec`` its shim hands ``sandbox_setup``."""
        instance_dir = pod_dir / "sandbox" / instance
        for own in ("rootfs", "tmp", "var-tmp", "run"):
            (instance_dir / own).mkdir(parents=True, exist_ok=True)
        for own in ("tmp", "var-tmp"):
            (instance_dir / own).chmod(0o1777)
        return {
            "hostname": sandbox.hostname or sandbox.name,
            "instanceDir": str(instance_dir),
            "etcFiles": self.write_pod_files(pod_dir, sandbox, ip=ip),
            "mounts": [[m.host_path, m.container_path, m.read_only] for m in config.mounts],
            "maskDirs": list(self.mask_dirs),
            "maskFiles": list(MASKED_FILES),
            "keep": self._kept(path),
            "workingDir": working_dir,
        }
