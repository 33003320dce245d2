"""Inside a container's fresh namespaces: build its view of the machine, then exec the container.

Why it exists: the ``process`` runtime's sandbox (``sandbox.py`` decides *what* a pod sees) has
to be built by the container's own process, between ``fork`` and ``exec``, in the mount, UTS and
IPC namespaces it has just unshared — after the shim (``shim.py``) unshared a PID namespace for
it, so it is PID 1 there. This module is that code: standard library only (the shim imports it,
``python -I -S``), syscalls through ``ctypes`` because Python 3.11 has no ``os.unshare``,
``os.mount`` or ``pivot_root``.

What ``enter(spec)`` builds, in this order (a later mount may sit on an earlier one):

1. a tmpfs skeleton as the new root, with every top-level host directory rbind-mounted into it
   and made recursively read-only (``mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY)``) and every
   top-level symlink (``/bin -> usr/bin``) recreated;
2. a fresh ``/proc`` for the new PID namespace (``/proc/sys``, ``/proc/sysrq-trigger``,
   ``/proc/irq``, ``/proc/bus`` read-only and ``/proc/kcore`` masked, as runc does); ``/sys``
   read-only; a small ``/dev`` (null, zero, full, random, urandom, tty, a private ``devpts`` for
   ttys and a private ``/dev/shm``);
3. the writable directories (``/tmp``, ``/var/tmp``, ``/run``) bound from the container
   instance's own directories on the node, and the pod's ``/etc/hosts``, ``/etc/hostname`` and
   ``/etc/resolv.conf`` bound over the host's;
4. masks: directories (``/root``, kubelite's state dir) under an empty read-only tmpfs, files
   (``/etc/shadow``, ``/etc/gshadow``) under ``/dev/null``; ``keep`` paths under a masked
   directory (the kubelet's own Python, the image store's bin directories) bound back read-only;
5. the volumes, in order, read-only where asked (their mount points, and the working directory,
   were created right after step 1, so that an overlay needed for one hides none of the above);
6. ``pivot_root`` into the skeleton (runc's ``pivot_root(".", ".")``), the old root detached,
   the skeleton itself made read-only; the hostname set; the working directory entered;
7. every capability outside ``CAPABILITIES`` (Docker's default set less ``CAP_MKNOD``) dropped
   from the bounding set, so even a root container cannot remount its read-only mounts
   writable, unmount a mask (``CAP_SYS_ADMIN``), make device nodes for the host's disks
   (``CAP_MKNOD``; there is no device cgroup), load modules or change the host's network.

Mount paths are resolved inside the new root (symlinks followed as the container will follow
them), so a mount never lands on the host's side of a link.

A mount point that does not exist is created: in the skeleton or a writable directory simply;
under a read-only host directory by an overlay on its nearest existing ancestor (the host
directory as the lower layer, the instance's directory as the upper), made read-only again once
the mount point is in place. Limit: an overlay shows its lower directory's own filesystem only,
so host mounts *below* that ancestor are hidden inside the pod.

Not guaranteed: a root container still shares the host's network namespace (raw sockets
included) and reads the host's ``/sys``; its user ids are the host's (no user namespace) and
there is no seccomp filter — a sandbox against accidents and careless images, not a security
boundary against a hostile one.
"""

from __future__ import annotations

import ctypes
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    class SandboxSpec(TypedDict):
        """What ``sandbox.py`` hands the shim for one container instance."""

        hostname: str
        instanceDir: str
        """Writable, per instance: ``rootfs/`` (the skeleton's mount point), ``tmp/``, ``var-tmp/``,
        ``run/`` and ``overlays/``."""
        etcFiles: dict[str, str]
        """Container path -> node file bound over it (``/etc/hosts`` ...)."""
        mounts: list[list[object]]
        """``[host_path, container_path, read_only]`` in order."""
        maskDirs: list[str]
        maskFiles: list[str]
        keep: list[str]
        """Node paths that must show read-only at their own path (masked or not)."""
        workingDir: NotRequired[str]


CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_SLAVE = 0x80000
MNT_DETACH = 0x2

AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1

_SYSCALLS = {"x86_64": {"pivot_root": 155}, "aarch64": {"pivot_root": 41}}
"""``pivot_root`` has no glibc wrapper; ``mount_setattr`` is 442 on every architecture."""
SYS_MOUNT_SETATTR = 442

_libc = ctypes.CDLL(None, use_errno=True)


CAPABILITIES = {
    "chown": 0, "dac_override": 1, "fowner": 3, "fsetid": 4, "kill": 5, "setgid": 6,
    "setuid": 7, "setpcap": 8, "net_bind_service": 10, "net_raw": 13, "sys_chroot": 18,
    "audit_write": 29, "setfcap": 31,
}  # fmt: skip
"""What a container keeps (name -> number in ``linux/capability.h``): Docker's default set
without ``mknod``. ``nsenter_argv`` gives an exec the same set."""
PR_CAPBSET_DROP = 24


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class SetupError(Exception):
    """A step of the sandbox failed; the message names it (shown as the StartError message)."""


def _check(result: int, what: str) -> None:
    if result < 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def _b(path: str | None) -> bytes | None:
    return None if path is None else path.encode()


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    result = _libc.mount(_b(source), _b(target), _b(fstype), ctypes.c_ulong(flags), _b(data))
    _check(result, f"mount {source or fstype} on {target}")


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(_b(target), flags), f"umount {target}")


def set_readonly(path: str, *, recursive: bool) -> None:
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    flags = AT_RECURSIVE if recursive else 0
    result = _libc.syscall(
        SYS_MOUNT_SETATTR, AT_FDCWD, _b(path), flags, ctypes.byref(attr), ctypes.sizeof(attr)
    )
    _check(result, f"make {path} read-only")


def pivot_root(new_root: str, put_old: str) -> None:
    machine = os.uname().machine  # not platform.machine(): importing platform costs 15 ms
    number = _SYSCALLS.get(machine, {}).get("pivot_root")
    if number is None:
        raise SetupError(f"pivot_root: unknown syscall number on {machine}")
    _check(_libc.syscall(number, _b(new_root), _b(put_old)), "pivot_root")


def drop_capabilities() -> None:
    """Drop every capability outside ``CAPABILITIES`` from the bounding set: after exec even
    root holds no more than that."""
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    keep = set(CAPABILITIES.values())
    for cap in range(last + 1):
        if cap not in keep:
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc.sethostname(raw, len(raw)), f"sethostname {name}")


# ---- the view ------------------------------------------------------------------------------

_OWN_TOP = ("proc", "dev", "sys", "tmp", "run")
"""Top-level directories the sandbox provides itself instead of binding the host's."""
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus")


class _Root:
    """The skeleton being built at ``path``, and the per-instance directory beside it."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.instance = spec["instanceDir"]
        self.path = os.path.join(self.instance, "rootfs")
        self._overlays = 0

    def at(self, container_path: str) -> str:
        return os.path.join(self.path, container_path.lstrip("/"))

    def resolve(self, container_path: str) -> str:
        """``container_path`` with every symlink on the way followed inside the new root (an
        absolute target read as the container will read it), as runc's securejoin does. The
        result names no symlink, so a mount never lands on the host's side of a link
        (``/var/run -> /run`` would otherwise lead to the host's ``/run``)."""
        parts = [p for p in container_path.split("/") if p not in ("", ".")]
        done: list[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            link = self.at("/".join([*done, part]))
            if not os.path.islink(link):
                done.append(part)
                continue
            hops += 1
            if hops > 40:  # the kernel's limit
                raise SetupError(f"{container_path}: too many levels of symbolic links")
            target = os.readlink(link)
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
        return "/" + "/".join(done)

    def ensure(self, container_path: str, *, directory: bool) -> str:
        """The mount point for ``container_path`` (symlinks resolved inside the new root) in
        the skeleton, created if missing."""
        target = self.at(self.resolve(container_path))
        if os.path.exists(target):
            return target
        try:
            self._create(target, directory=directory)
        except OSError as exc:
            if exc.errno != 30:  # EROFS: the parent is a read-only host directory
                raise SetupError(f"create {container_path}: {exc.strerror}") from None
            ancestor = self._existing_ancestor(target)
            self._overlay(ancestor)
            try:
                self._create(target, directory=directory)
            finally:
                set_readonly(ancestor, recursive=False)
        return target

    @staticmethod
    def _create(target: str, *, directory: bool) -> None:
        if directory:
            os.makedirs(target)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))

    def _existing_ancestor(self, target: str) -> str:
        path = target
        while not os.path.isdir(path):
            path = os.path.dirname(path)
        return path

    def _overlay(self, lower: str) -> None:
        self._overlays += 1
        base = os.path.join(self.instance, "overlays", str(self._overlays))
        upper, work = os.path.join(base, "upper"), os.path.join(base, "work")
        os.makedirs(upper)
        os.makedirs(work)
        options = f"lowerdir={lower},upperdir={upper},workdir={work}"
        mount("overlay", lower, "overlay", 0, options)

    def bind(self, source: str, container_path: str, *, read_only: bool) -> None:
        if not os.path.exists(source):
            raise SetupError(f"mount {container_path}: {source} does not exist on the node")
        target = self.ensure(container_path, directory=os.path.isdir(source))
        mount(source, target, None, MS_BIND | MS_REC)
        if read_only:
            set_readonly(target, recursive=True)


def _host_tree(root: _Root) -> None:
    for name in sorted(os.listdir("/")):
        source, target = "/" + name, root.at(name)
        if os.path.islink(source):
            os.symlink(os.readlink(source), target)
        elif name in _OWN_TOP:
            os.mkdir(target)
        elif os.path.isdir(source):
            os.mkdir(target)
            mount(source, target, None, MS_BIND | MS_REC)
            set_readonly(target, recursive=True)
    sys_dir = root.at("sys")
    mount("/sys", sys_dir, None, MS_BIND | MS_REC)
    set_readonly(sys_dir, recursive=True)


def _mount_points(root: _Root, working_dir: str) -> None:
    """Create the volumes' mount points and the working directory in the host tree now, before
    the sandbox mounts anything of its own: an overlay placed later would hide those mounts."""
    wanted = [(str(m[1]), os.path.isdir(str(m[0]))) for m in root.spec["mounts"]]
    wanted += [(path, False) for path in root.spec["etcFiles"]]
    for path, directory in [*wanted, (working_dir, True)]:
        resolved = root.resolve(path)
        top = resolved.strip("/").split("/", 1)[0]
        if top not in _OWN_TOP and not _under(resolved, "/var/tmp"):
            root.ensure(resolved, directory=directory)


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _proc_and_dev(root: _Root) -> None:
    proc = root.at("proc")
    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in _PROC_READONLY:
        path = os.path.join(proc, name)
        if os.path.exists(path):
            mount(path, path, None, MS_BIND | MS_REC)
            set_readonly(path, recursive=True)
    if os.path.exists(os.path.join(proc, "kcore")):
        mount("/dev/null", os.path.join(proc, "kcore"), None, MS_BIND)
    dev = root.at("dev")
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=0755,size=64k")
    for name in _DEVICES:
        if os.path.exists("/dev/" + name):
            os.close(os.open(os.path.join(dev, name), os.O_CREAT | os.O_WRONLY, 0o666))
            mount("/dev/" + name, os.path.join(dev, name), None, MS_BIND)
    os.mkdir(os.path.join(dev, "pts"))
    mount(
        "devpts",
        os.path.join(dev, "pts"),
        "devpts",
        MS_NOSUID | MS_NOEXEC,
        "newinstance,ptmxmode=0666,mode=0620",
    )
    os.symlink("pts/ptmx", os.path.join(dev, "ptmx"))
    os.mkdir(os.path.join(dev, "shm"))
    mount("shm", os.path.join(dev, "shm"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, os.path.join(dev, name))


def _writable(root: _Root) -> None:
    for container_path, own in (("/tmp", "tmp"), ("/var/tmp", "var-tmp"), ("/run", "run")):
        root.bind(os.path.join(root.instance, own), container_path, read_only=False)
    for container_path, source in root.spec["etcFiles"].items():
        root.bind(source, container_path, read_only=False)


def _masks(root: _Root) -> None:
    """Mask, then make sure every ``keep`` path shows at its own path: bound into the mask while
    it is still writable, or bound like a volume when it is not visible at all (a state dir
    under the host's ``/tmp`` is not, under the pod's own ``/tmp``)."""
    kept = set(root.spec["keep"])
    masked: list[str] = []
    # outer first: a mask inside another is already hidden by it, and what is kept under both
    # is bound into the outer one
    for path in sorted(root.spec["maskDirs"], key=len):
        target = root.at(root.resolve(path))
        if any(_under(path, outer) for outer in masked) or not os.path.isdir(target):
            continue  # hidden already, or not visible in the pod (under its private /tmp, say)
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
        for keep in sorted(k for k in kept if _under(k, path)):
            root.bind(keep, keep, read_only=True)
            kept.discard(keep)
        set_readonly(target, recursive=False)
        masked.append(path)
    for keep in sorted(kept):
        if not os.path.exists(root.at(root.resolve(keep))):
            root.bind(keep, keep, read_only=True)
    for path in root.spec["maskFiles"]:
        target = root.at(root.resolve(path))
        if os.path.isfile(target):
            mount("/dev/null", target, None, MS_BIND)
            set_readonly(target, recursive=False)


def _pivot(root: _Root) -> None:
    old_root = os.open("/", os.O_DIRECTORY | os.O_RDONLY)
    os.chdir(root.path)
    pivot_root(".", ".")
    os.fchdir(old_root)
    os.close(old_root)
    mount(None, ".", None, MS_SLAVE | MS_REC)
    umount2(".", MNT_DETACH)
    os.chdir("/")
    set_readonly("/", recursive=False)


def enter(spec: SandboxSpec) -> None:
    """Build the sandbox described by ``spec`` around this process (PID 1 of a new PID
    namespace) and enter it; raises ``SetupError`` naming the step that failed."""
    try:
        unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        root = _Root(spec)
        mount("tmpfs", root.path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        working_dir = spec.get("workingDir") or "/"
        _host_tree(root)
        _mount_points(root, working_dir)
        _proc_and_dev(root)
        _writable(root)
        _masks(root)
        for source, container_path, read_only in spec["mounts"]:
            root.bind(str(source), str(container_path), read_only=bool(read_only))
        root.ensure(working_dir, directory=True)
        _pivot(root)
        sethostname(spec["hostname"])
        os.chdir(working_dir)
        drop_capabilities()
    except OSError as exc:
        raise SetupError(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")) from None


def probe(instance_dir: str) -> None:
    """Build a sandbox with nothing in it and run ``true`` there, as PID 1 of a new PID
    namespace: what the kubelet runs once at start to learn whether pods can be sandboxed."""
    for own in ("rootfs", "tmp", "var-tmp", "run"):
        os.makedirs(os.path.join(instance_dir, own), exist_ok=True)
    hosts = os.path.join(instance_dir, "hosts")
    with open(hosts, "w") as fh:
        fh.write("127.0.0.1\tlocalhost\n")
    unshare(CLONE_NEWPID)
    child = os.fork()
    if child == 0:
        try:
            enter(
                {
                    "hostname": "kubelite-probe",
                    "instanceDir": instance_dir,
                    "etcFiles": {"/etc/hosts": hosts},
                    "mounts": [],
                    "maskDirs": ["/root"],
                    "maskFiles": ["/etc/shadow"],
                    "keep": [],
                }
            )
            if os.getpid() != 1:
                raise SetupError("the container would not be PID 1 of its namespace")
            os.execv("/bin/sh", ["sh", "-c", "exec true"])
        except BaseException as exc:
            sys.stderr.write(f"{exc}\n")
            sys.stderr.flush()
            os._exit(1)
    _, status = os.waitpid(child, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SetupError("the sandbox's test container failed")


if __name__ == "__main__":
    try:
        probe(sys.argv[1])
    except (SetupError, OSError) as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(1)
