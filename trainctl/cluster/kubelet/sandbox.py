"""Pods in a sandbox: what keeps a pod away from the cluster, the machine and other pods.

Without a sandbox a pod's processes run as the kubelet's user on the machine's filesystem and
PID namespace: they read the cluster directory (the admin token, the CA key, the store, the
API server's socket), other pods' tokens and environments, and signal any process. So where
bubblewrap can run here, each pod gets a sandbox, made before its first container starts:

- a *holder* process, ``bwrap`` started as the unprivileged user :data:`POD_USER` (nobody),
  with a user, PID, mount and IPC namespace of its own, in the pod's network namespace (the
  isolated network's pause process's, entered first; the machine's in the shared network).
  Its mount namespace shows the machine's system directories read-only, a ``/tmp`` and
  ``/dev/shm`` of the pod's own, the pod's HOME, its namespace's data directory, the
  Service-name resolver, its ServiceAccount token at ``/var/run/secrets/kubernetes.io/
  serviceaccount`` and its volumes at their ``mountPath``; the cluster directory, other
  pods' directories, ``/root``, ``/home`` and the machine's ``/tmp`` and ``/run`` are not
  there (what a pod needs outside the system directories, the working directory and the
  Python it runs, is bound in read-only). The sources are staged first where the pod's user can reach them (:data:`STAGE`).
- every container and ``kubectl exec`` enters the holder's namespaces with ``nsenter`` as
  that user, with no capability, and changes to its working directory inside. Its cgroup is
  joined before, as without a sandbox. The holder reads a pipe the kubelet holds: when the
  kubelet closes it (the pod ended) or dies, the holder ends, and with the PID namespace's
  first process every process of the pod.

:func:`choose` decides once per kubelet (``--sandbox auto|bwrap|none``, or the
:data:`SANDBOX_ENV` variable): ``bwrap`` where a probe sandbox runs, else ``none`` (the pod
runs as before), and the kubelet says which in its log and on its Node's
:data:`SANDBOX_LABEL`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from trainctl.cluster.kubelet.volumes import Mount

BWRAP, NONE, AUTO = "bwrap", "none", "auto"
MODES = (BWRAP, NONE)
SANDBOX_ENV = "TRAINCTL_POD_SANDBOX"
SANDBOX_LABEL = "trainctl.io/pod-sandbox"
POD_USER = 65534  # nobody, inside the sandbox and outside it
TOOLS = ("bwrap", "nsenter", "setpriv", "env")
SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# The machine's system directories a pod sees, read-only (where they exist). Nothing else of
# the top level is there (users' homes, /tmp, /run, where cluster directories and tokens
# live) but the kernel's file systems, fresh or read-only, and what is bound in by name.
SYSTEM = ("bin", "etc", "lib", "lib32", "lib64", "libx32", "opt", "sbin", "srv", "usr", "var")

DESCRIPTIONS = {
    BWRAP: "bwrap: each pod as an unprivileged user in PID, mount and user namespaces of its own",
    NONE: "none: pods run as the kubelet's user on this machine's filesystem and PID namespace",
}


class SandboxError(Exception):
    """A pod's sandbox could not be made; the message says why."""


def _isolation_args(uid: int) -> list[str]:
    return ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--uid", str(uid), "--gid", str(uid)]


def _drop_to(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def sandbox_problem() -> Optional[str]:
    """Why pods cannot run in a bwrap sandbox here (None: they can)."""
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    argv = [*_drop_to(POD_USER), "bwrap", *_isolation_args(POD_USER), "--ro-bind", "/", "/", "--proc", "/proc",
            "--dev", "/dev", "--", "true"]
    try:
        probe = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap: {exc}"
    if probe.returncode != 0:
        return "bwrap cannot make user, PID and mount namespaces here (" + \
            " ".join(probe.stderr.decode(errors="replace").split())[:200] + ")"
    return None


def workdir_problem(workdir: Optional[Path]) -> Optional[str]:
    """Why the pods' user could not use the working directory in a sandbox (None: it can).

    The sandbox shows the directory itself at its path (not its parents), as its owner made
    it: the pods' user needs to read and enter it. A private directory (mode 0700, as a
    home directory or a test's scratch directory often is) would leave every pod unable to
    start, so ``auto`` runs pods without the sandbox there, and says why.
    """
    if workdir is None:
        return None
    try:
        mode = os.stat(workdir).st_mode
    except OSError as exc:
        return f"cannot read the working directory {workdir}: {exc.strerror or exc}"
    if mode & 0o005 != 0o005:
        return (f"the working directory {workdir} is not readable by the pods' user (mode {mode & 0o777:o}; "
                "chmod o+rx it, or give local up another --workdir)")
    return None


def choose(requested: str, workdir: Optional[Path] = None) -> tuple[str, str]:
    """(mode, why) for ``--sandbox requested``; ``bwrap`` where it cannot run raises ValueError."""
    if requested == NONE:
        return NONE, "asked for"
    problem = sandbox_problem() or workdir_problem(workdir)
    if problem is None:
        return BWRAP, "asked for" if requested == BWRAP else "bwrap runs here"
    if requested == BWRAP:
        raise ValueError(f"--sandbox bwrap: {problem}")
    return NONE, f"no sandbox is possible: {problem}"


def describe(mode: str, reason: str) -> str:
    return f"{DESCRIPTIONS.get(mode, mode)} ({reason})"


def _top(path: str) -> str:
    return path.strip("/").split("/", 1)[0]


def sandbox_path(target: str) -> str:
    """``target`` with the machine's symlinks in system directories followed (bwrap makes a
    mount point's missing parents, and cannot through a symlink on a read-only directory):
    ``/var/run/secrets/...`` is ``/run/secrets/...`` where ``/var/run`` links to ``/run``."""
    parts = Path(target).parts
    for end in range(2, len(parts)):
        prefix = os.path.join(*parts[:end])
        if _top(prefix) in SYSTEM and os.path.islink(prefix):
            return sandbox_path(os.path.join(os.path.realpath(prefix), *parts[end:]))
    return target


@dataclass
class SandboxLayout:
    """What one pod's sandbox shows (the paths are the machine's, the targets the pod's)."""

    cluster_dir: Path  # hidden whole, then what is the pod's own is bound back
    tmp: Path  # the pod's /tmp
    read_only: list[Path] = field(default_factory=list)  # outside the system dirs: repo, Python
    own_read_only: list[Path] = field(default_factory=list)  # under the cluster dir: resolver
    own_writable: list[Path] = field(default_factory=list)  # under the cluster dir: HOME, data
    service_account: Optional[Path] = None
    volumes: list[Mount] = field(default_factory=list)


def python_paths() -> list[Path]:
    """What the cluster's Python needs to run: its prefixes and import path."""
    found = [Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent]
    found += [Path(p) for p in sys.path if p and os.path.isdir(p)]
    return found


def _visible_roots() -> list[tuple[str, Optional[str]]]:
    """(name, symlink target or None) of the machine's top-level entries the pod sees."""
    roots: list[tuple[str, Optional[str]]] = []
    for entry in sorted(os.scandir("/"), key=lambda e: e.name):
        if entry.name not in SYSTEM:
            continue
        if entry.is_symlink():
            roots.append((entry.name, os.readlink(entry.path)))
        elif entry.is_dir():
            roots.append((entry.name, None))
    return roots


# The sandbox is made by bwrap as the pod's user, who may not pass through the directories the
# sources lie in (the cluster directory is the kubelet's user's alone, and so may be the
# Python's). So a stage comes first: in a mount namespace of its own, as the kubelet's user,
# a tmpfs at STAGE and each source bound on STAGE/<n> there, from where bwrap binds it.
STAGE = "/run"
_STAGE_SCRIPT = (
    'stage=$1; shift; mount -t tmpfs -o mode=755 trainctl-stage "$stage" || exit 1; n=0; '
    'while [ "$1" != "--" ]; do '
    'if [ -d "$1" ]; then mkdir "$stage/$n"; else : > "$stage/$n"; fi; '
    'mount --rbind "$1" "$stage/$n" || exit 1; n=$((n + 1)); shift; done; shift; exec "$@"')


def _depth(target: str) -> int:
    return len(Path(target).parts)


class BwrapArgs:
    """bwrap's arguments, and the sources it binds from the stage (see :data:`STAGE`).

    The pod's mounts (:meth:`bind`, :meth:`tmpfs`) are placed by :meth:`place_mounts` with
    parents before what lies inside them, as containerd orders a container's mounts: a volume
    at ``/tmp`` does not hide the working directory or the Python bound below it (which a real
    pod has in its image, not under the volume), and the same target keeps the order asked.
    """

    def __init__(self) -> None:
        self.args: list[str] = []
        self.sources: list[str] = []
        self._mounts: list[tuple[str, str, Optional[str]]] = []  # (target, option, source)

    def bind(self, source: Path, target: str, read_only: bool) -> None:
        self._mounts.append((target, "--ro-bind" if read_only else "--bind", str(source)))

    def tmpfs(self, target: str) -> None:
        self._mounts.append((target, "--tmpfs", None))

    def place_mounts(self) -> None:
        placed = [(sandbox_path(target), option, source) for target, option, source in self._mounts]
        for target, option, source in sorted(placed, key=lambda mount: _depth(mount[0])):
            if source is None:
                self.args += [option, target]
                continue
            self.args += [option, f"{STAGE}/{len(self.sources)}", target]
            self.sources.append(source)
        self._mounts.clear()

    def stage_argv(self) -> list[str]:
        """The prefix that makes the stage, then runs the rest of the command line."""
        return ["unshare", "-m", "--propagation", "private", "--", "sh", "-c", _STAGE_SCRIPT, "sh", STAGE,
                *self.sources, "--"]


def _outermost(candidates: Iterable[Path]) -> list[Path]:
    """The paths not inside another of them, in their first order."""
    texts = list(dict.fromkeys(str(path) for path in candidates))
    return [Path(text) for text in texts
            if not any(other != text and text.startswith(other.rstrip("/") + "/") for other in texts)]


def bwrap_args(layout: SandboxLayout) -> BwrapArgs:
    """The mounts of a pod's sandbox, in the order bwrap makes them."""
    built = BwrapArgs()
    for name, target in _visible_roots():
        if target is not None:
            built.args += ["--symlink", target, f"/{name}"]
        else:
            built.args += ["--ro-bind", f"/{name}", f"/{name}"]
    # The machine's /dev/pts: the terminal the kubelet opens for a container or an exec is one
    # of its (only its owner, the kubelet's user, may open the others).
    built.args += ["--ro-bind-try", "/sys", "/sys", "--proc", "/proc", "--dev", "/dev", "--dev-bind", "/dev/pts",
                   "/dev/pts", "--tmpfs", "/dev/shm", "--tmpfs", "/run"]
    built.bind(layout.tmp, "/tmp", read_only=False)
    cluster = str(layout.cluster_dir)
    for path in _outermost(layout.read_only):  # the repository and the Python, where hidden above
        text = str(path)
        inside_cluster = text == cluster or text.startswith(cluster + "/")
        if _top(text) not in SYSTEM and not inside_cluster and path.is_dir():
            built.bind(path, text, read_only=True)
    built.tmpfs(cluster)
    for path in layout.own_read_only:
        built.bind(path, str(path), read_only=True)
    for path in layout.own_writable:
        built.bind(path, str(path), read_only=False)
    if layout.service_account is not None:
        built.bind(layout.service_account, SERVICE_ACCOUNT_PATH, read_only=True)
    for mount in layout.volumes:
        built.bind(mount.source, mount.target, read_only=mount.read_only)
    built.place_mounts()
    return built


class PodSandbox:
    """One pod's holder process (see the module doc) and how to run a process in it."""

    def __init__(self, holder: subprocess.Popen[bytes], pid: int, uid: int) -> None:
        self._holder = holder
        self.pid = pid  # the holder's first process, in the machine's PID namespace
        self.uid = uid

    @classmethod
    def start(cls, layout: SandboxLayout, enter_network: Sequence[str], log_path: Path,
              uid: int = POD_USER) -> "PodSandbox":
        """The sandbox, running; what its tools say goes to ``log_path``."""
        built = bwrap_args(layout)
        info_read, info_write = os.pipe()
        try:
            argv = [*enter_network, *built.stage_argv(), *_drop_to(uid), "bwrap", *_isolation_args(uid), *built.args,
                    "--info-fd", str(info_write), "--", "sh", "-c", "echo ready && exec cat"]
            with open(log_path, "ab") as log:
                holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                          pass_fds=(info_write,), close_fds=True)
        except OSError as exc:
            os.close(info_read)
            raise SandboxError(f"cannot start bwrap: {exc}") from None
        finally:
            os.close(info_write)
        with os.fdopen(info_read, "rb") as info:
            text = info.read()  # bwrap closes it once the sandbox runs (or it failed)
        try:
            pid = int(json.loads(text)["child-pid"])
            assert holder.stdout is not None
            if holder.stdout.readline() != b"ready\n":  # bwrap failed after it wrote the info
                raise ValueError("not ready")
        except (ValueError, KeyError, TypeError):
            holder.kill()
            holder.wait()
            said = log_path.read_text(errors="replace").splitlines()[-3:]
            raise SandboxError("bwrap: " + " ".join(" ".join(said).split())[:400]) from None
        return cls(holder, pid, uid)

    def enter_argv(self, workdir: str, terminal: bool = False) -> list[str]:
        """The prefix that runs a command in the sandbox, as its user, in ``workdir`` there;
        with ``terminal``, in a session of its own there whose controlling terminal is its stdin."""
        return ["nsenter", "-t", str(self.pid), "-U", "-m", "-p", "-i", "-n", "-u",
                "-S", str(self.uid), "-G", str(self.uid), "--", *(["setsid", "-c"] if terminal else []),
                "env", "-C", workdir, "--"]

    def alive(self) -> bool:
        return self._holder.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """End the holder and with it every process left in the pod."""
        if self._holder.stdin is not None:
            with contextlib.suppress(OSError):
                self._holder.stdin.close()
        try:
            self._holder.wait(timeout)
        except subprocess.TimeoutExpired:
            self._holder.kill()
            self._holder.wait()
        if self._holder.stdout is not None:
            self._holder.stdout.close()


def chown_all(paths: Iterable[Path], uid: int) -> None:
    """Give the pod's user the directories it writes (not what is in them)."""
    for path in paths:
        os.chown(path, uid, uid)
