"""Containers as Linux control groups: the kernel enforces their memory and CPU limits.

Each node owns ``trainctl/<cluster>/<node>`` at the top of every hierarchy it uses (as the
kubelet owns ``/kubepods``), and each container run ``<node>/<pod-uid>/<container>`` below
it. A node's groups left behind by a previous run (a crashed kubelet) are emptied and
removed when the node starts.

cgroup v2 (the unified hierarchy, needs the ``memory`` and ``cpu`` controllers available at
its root): ``memory.max``, ``memory.oom.group`` (the whole container dies, as on Kubernetes),
``cpu.max``; ``memory.events`` ``oom_kill``, ``cpu.stat`` ``usage_usec``, ``memory.current``.
cgroup v1: ``memory.limit_in_bytes``, ``memory.swappiness`` 0, ``cpu.cfs_quota_us``;
``memory.oom_control`` ``oom_kill``, ``cpuacct.usage``, ``memory.usage_in_bytes``. v1 has no
``memory.oom.group``: the kernel kills one process (a launcher's child, say) and the rest
would run on, so an OOM notification (``cgroup.event_control``) makes the kubelet kill the
whole container at once, as on v2. The memory reported is the working set (usage minus
inactive file cache), as cAdvisor computes it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

from trainctl.cluster.compute.accounting import Usage
from trainctl.cluster.compute.container_limits import ContainerLimits
from trainctl.cluster.compute.cpu_cap import capped_millicores

CFS_PERIOD_US = 100_000
OOM_KILL_COUNTED_WITHIN = 2.0  # seconds from a v1 OOM notification to its kill in memory.oom_control
V1_CONTROLLERS = ("memory", "cpu", "cpuacct")
V2_CONTROLLERS = ("memory", "cpu")
ENABLE_V2_CONTROLLERS = " ".join(f"+{controller}" for controller in V2_CONTROLLERS)


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy: version 1 (one or more controllers) or 2 (unified)."""

    mount: Path
    version: int
    controllers: frozenset[str]


def mounted_hierarchies(mountinfo: str, *, read_v2_controllers: Callable[[Path], str]) -> list[Hierarchy]:
    """The cgroup hierarchies in ``/proc/self/mountinfo`` text."""
    found = []
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, tail_parts = fields.split(), tail.split()
        if len(parts) < 5 or len(tail_parts) < 3:
            continue
        mount, fstype, options = Path(parts[4].replace("\\040", " ")), tail_parts[0], tail_parts[2]
        if fstype == "cgroup":
            found.append(Hierarchy(mount, 1, frozenset(options.split(",")) & frozenset(V1_CONTROLLERS)))
        elif fstype == "cgroup2":
            try:
                controllers = frozenset(read_v2_controllers(mount).split())
            except OSError:
                controllers = frozenset()
            found.append(Hierarchy(mount, 2, controllers))
    return found


def system_hierarchies() -> list[Hierarchy]:
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    except OSError:  # not Linux
        return []
    return mounted_hierarchies(mountinfo, read_v2_controllers=lambda mount: (mount / "cgroup.controllers").read_text())


def _read_keyed(path: Path) -> dict[str, int]:
    """``key value`` lines (memory.stat, memory.events, cpu.stat, memory.oom_control)."""
    values = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            values[key] = int(value)
    return values


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _processes(group: Path) -> list[int]:
    try:
        return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def _kill_all(group: Path, *, timeout: float = 5.0) -> None:
    """SIGKILL every process in ``group`` until it is empty (a process may fork meanwhile)."""
    kill_file = group / "cgroup.kill"  # v2, Linux 5.14+
    deadline = time.monotonic() + timeout
    while (pids := _processes(group)) and time.monotonic() < deadline:
        if kill_file.exists():
            with contextlib.suppress(OSError):
                _write(kill_file, "1")
        else:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _remove_tree(top: Path, *, keep_top: bool = False) -> None:
    """Empty and remove ``top`` and every group below it, deepest first."""
    if not top.is_dir():
        return
    groups = [Path(root) for root, _, _ in os.walk(top)]
    for group in reversed(groups):
        if keep_top and group == top:
            continue
        _kill_all(group)
        for _ in range(50):  # rmdir fails with EBUSY until the last task has exited
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


def _make(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)


def _remove_node(node: Path) -> None:
    """Remove a node's group, then ``trainctl/<cluster>`` and ``trainctl`` if nothing else uses them."""
    _remove_tree(node)
    for parent in (node.parent, node.parent.parent):
        with contextlib.suppress(OSError):
            parent.rmdir()


class _CgroupGroup:
    """One container run's group, in one directory per hierarchy used."""

    def __init__(self, directories: Iterable[Path], limits: ContainerLimits) -> None:
        self.directories = list(dict.fromkeys(directories))
        self.limits = limits
        self._procs_files: list[int] = []
        self._final: Optional[tuple[Usage, bool]] = None  # read just before the group is removed
        for directory in self.directories:
            if directory.exists():  # a container name reused within a pod restart: start afresh
                _remove_tree(directory)
            _make(directory)

    def preexec(self) -> Optional[Callable[[], None]]:
        self._close_procs_files()
        # Opened here, written in the child between fork and exec: nothing allocates there.
        self._procs_files = [os.open(directory / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
                             for directory in self.directories]
        files = tuple(self._procs_files)

        def join() -> None:
            pid = str(os.getpid()).encode()
            for fd in files:
                os.write(fd, pid)
        return join

    def _close_procs_files(self) -> None:
        for fd in self._procs_files:
            os.close(fd)
        self._procs_files = []

    def add(self, pid: int) -> None:
        self._close_procs_files()
        for directory in self.directories:  # already there after preexec: a no-op
            with contextlib.suppress(ProcessLookupError):
                _write(directory / "cgroup.procs", str(pid))

    join = add  # a group holds any number of processes

    @property
    def closed(self) -> bool:
        return self._final is not None

    def set_cpu(self, millicores: Optional[int]) -> None:
        """Limit the container to ``millicores`` of CPU time (None: unlimited)."""
        raise NotImplementedError

    def usage(self) -> Usage:
        return self._final[0] if self._final else self._read_usage()

    def oom_killed(self) -> bool:
        return self._final[1] if self._final else self._read_oom_killed()

    def _read_usage(self) -> Usage:
        raise NotImplementedError

    def _read_oom_killed(self) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        """Kill what is left, remove the group; its last usage and OOM verdict stay readable."""
        self._close_procs_files()
        if self._final:
            return
        for directory in self.directories:  # nothing new gets charged after this
            _kill_all(directory)
        self._final = (self._read_usage(), self._read_oom_killed())
        for directory in self.directories:
            _remove_tree(directory)
            with contextlib.suppress(OSError):  # the pod's group, once its last container is gone
                directory.parent.rmdir()


def _working_set(usage: int, stat: dict[str, int], inactive_file_key: str) -> int:
    return max(0, usage - stat.get(inactive_file_key, 0))


class CgroupV1Group(_CgroupGroup):
    def __init__(self, *, memory: Path, cpu: Path, cpuacct: Path, limits: ContainerLimits) -> None:
        super().__init__([memory, cpu, cpuacct], limits)
        self._memory, self._cpuacct = memory, cpuacct
        if limits.memory_bytes is not None:
            with contextlib.suppress(OSError):  # refused when the parent has children in use
                _write(memory / "memory.swappiness", "0")
            _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes))
            self._watch_oom()
        self._cpu = cpu
        if limits.cpu_millicores is not None:
            self.set_cpu(limits.cpu_millicores)

    def set_cpu(self, millicores: Optional[int]) -> None:
        if millicores is not None:
            _write(self._cpu / "cpu.cfs_period_us", str(CFS_PERIOD_US))
        _write(self._cpu / "cpu.cfs_quota_us", "-1" if millicores is None else str(cfs_quota_us(millicores)))

    def _watch_oom(self) -> None:
        """Kill the whole container on its first OOM kill (v2's ``memory.oom.group``).

        The eventfd fires on an OOM and when the group is removed; without notifications
        (an old kernel) the container lives on as it would on such a node."""
        try:
            event = os.eventfd(0, os.EFD_CLOEXEC)
        except (AttributeError, OSError):
            return
        control = -1
        try:
            control = os.open(self._memory / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
            _write(self._memory / "cgroup.event_control", f"{event} {control}")
        except OSError:
            os.close(event)
            if control >= 0:
                os.close(control)
            return
        threading.Thread(target=self._on_oom, args=(event, control), daemon=True,
                         name=f"oom-{self._memory.parent.name}-{self._memory.name}").start()

    def _on_oom(self, event: int, control: int) -> None:
        try:
            while True:
                os.eventfd_read(event)
                # The notification comes as the OOM killer starts; its kill is counted a
                # moment later (or never, when memory was freed meanwhile).
                deadline = time.monotonic() + OOM_KILL_COUNTED_WITHIN
                while self._final is None and self._memory.is_dir() and time.monotonic() < deadline:
                    with contextlib.suppress(OSError):
                        if self._read_oom_killed():
                            for directory in self.directories:
                                _kill_all(directory)
                            return
                    time.sleep(0.01)
                if self._final is not None or not self._memory.is_dir():
                    return  # closed: the wake-up of the group's removal
        finally:
            os.close(event)
            os.close(control)

    def _read_usage(self) -> Usage:
        return v1_usage(memory=self._memory, cpuacct=self._cpuacct)

    def _read_oom_killed(self) -> bool:
        control = _read_keyed(self._memory / "memory.oom_control")
        if "oom_kill" in control:
            return control["oom_kill"] > 0
        # Kernels before 4.13 do not count kills: hitting the limit is the best sign there is.
        return int((self._memory / "memory.failcnt").read_text()) > 0


def v1_usage(*, memory: Path, cpuacct: Path) -> Usage:
    try:
        cpu_ns = int((cpuacct / "cpuacct.usage").read_text())
        usage = int((memory / "memory.usage_in_bytes").read_text())
        stat = _read_keyed(memory / "memory.stat")
    except FileNotFoundError:
        return Usage(cpu_seconds=0.0, memory_bytes=0)
    return Usage(cpu_seconds=cpu_ns / 1e9, memory_bytes=_working_set(usage, stat, "total_inactive_file"))


class CgroupV2Group(_CgroupGroup):
    def __init__(self, directory: Path, *, limits: ContainerLimits) -> None:
        super().__init__([directory], limits)
        self._directory = directory
        if limits.memory_bytes is not None:
            _write(directory / "memory.max", str(limits.memory_bytes))
            for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                with contextlib.suppress(OSError):  # no swap controller; a kernel before 4.19
                    _write(directory / name, value)
        if limits.cpu_millicores is not None:
            self.set_cpu(limits.cpu_millicores)

    def set_cpu(self, millicores: Optional[int]) -> None:
        quota = "max" if millicores is None else str(cfs_quota_us(millicores))
        _write(self._directory / "cpu.max", f"{quota} {CFS_PERIOD_US}")

    def _read_usage(self) -> Usage:
        return v2_usage(self._directory)

    def _read_oom_killed(self) -> bool:
        return _read_keyed(self._directory / "memory.events").get("oom_kill", 0) > 0


def v2_usage(directory: Path) -> Usage:
    try:
        cpu_us = _read_keyed(directory / "cpu.stat").get("usage_usec", 0)
        usage = int((directory / "memory.current").read_text())
        stat = _read_keyed(directory / "memory.stat")
    except FileNotFoundError:
        return Usage(cpu_seconds=0.0, memory_bytes=0)
    return Usage(cpu_seconds=cpu_us / 1e6, memory_bytes=_working_set(usage, stat, "inactive_file"))


def cfs_quota_us(millicores: int) -> int:
    """CPU time per CFS period for a limit in millicores (the kernel's minimum is 1 ms)."""
    return max(1000, millicores * CFS_PERIOD_US // 1000)


class _CpuCaps:
    """A node's live container groups and the CPU cap they are held to (:mod:`.cpu_cap`)."""

    def __init__(self) -> None:
        self.percent: Optional[int] = None
        self._groups: list[_CgroupGroup] = []
        self._lock = threading.Lock()

    def track(self, group: _CgroupGroup) -> None:
        with self._lock:
            self._groups = [g for g in self._groups if not g.closed]
            self._groups.append(group)
            if self.percent is not None:
                group.set_cpu(capped_millicores(group.limits.cpu_millicores, self.percent))

    def cap(self, percent: Optional[int]) -> None:
        with self._lock:
            self.percent = percent
            for group in self._groups:
                if not group.closed:
                    with contextlib.suppress(FileNotFoundError):  # its container ended meanwhile
                        group.set_cpu(capped_millicores(group.limits.cpu_millicores, percent))


def node_path(*, cluster: str, node: str) -> Path:
    return Path("trainctl", cluster, node)


def remove_cluster(cluster: str, hierarchies: Iterable[Hierarchy]) -> list[Path]:
    """Kill and remove every group of ``cluster`` (all its nodes), e.g. when it is torn down."""
    removed = []
    for hierarchy in hierarchies:
        top = hierarchy.mount / node_path(cluster=cluster, node="-").parent
        if top.is_dir():
            _remove_tree(top)
            with contextlib.suppress(OSError):
                top.parent.rmdir()
            removed.append(top)
    return removed


class CgroupV1Enforcer:
    kind = "cgroup-v1"

    def __init__(self, mounts: dict[str, Path], *, cluster: str, node: str) -> None:
        """``mounts``: the mount point of the memory, cpu and cpuacct hierarchies."""
        relative = node_path(cluster=cluster, node=node)
        self._mounts = mounts
        self._nodes = {controller: mounts[controller] / relative for controller in V1_CONTROLLERS}
        self._relative = relative
        self._caps = _CpuCaps()
        try:
            for directory in dict.fromkeys(self._nodes.values()):
                _make(directory)
                with contextlib.suppress(OSError):  # usage of the node includes its containers
                    _write(directory / "memory.use_hierarchy", "1")
                _remove_tree(directory, keep_top=True)  # a previous run's leftovers
        except OSError:
            self.close()
            raise

    def describe(self) -> str:
        mounts = list(dict.fromkeys(self._mounts[c] for c in V1_CONTROLLERS))
        if len({mount.parent for mount in mounts}) == 1 and not any("," in mount.name for mount in mounts):
            where = f"{mounts[0].parent}/{{{','.join(mount.name for mount in mounts)}}}/{self._relative}"
        else:
            where = ", ".join(f"{mount}/{self._relative}" for mount in mounts)
        return (f"cgroup v1 ({', '.join(V1_CONTROLLERS)}) under {where}: memory limits and CPU limits "
                f"(CFS quota) enforced by the kernel")

    def container(self, pod_uid: str, container: str, limits: ContainerLimits) -> CgroupV1Group:
        group = CgroupV1Group(**{controller: node / pod_uid / container for controller, node in self._nodes.items()},
                              limits=limits)
        self._caps.track(group)
        return group

    def cap_cpu(self, percent: Optional[int]) -> None:
        self._caps.cap(percent)

    def node_usage(self) -> Usage:
        return v1_usage(memory=self._nodes["memory"], cpuacct=self._nodes["cpuacct"])

    def close(self) -> None:
        for directory in dict.fromkeys(self._nodes.values()):
            _remove_node(directory)


class CgroupV2Enforcer:
    kind = "cgroup-v2"

    def __init__(self, mount: Path, *, cluster: str, node: str) -> None:
        self._node = mount / node_path(cluster=cluster, node=node)
        self._caps = _CpuCaps()
        try:
            _make(self._node)
            _remove_tree(self._node, keep_top=True)
            # Controllers reach a group only when enabled in every ancestor's subtree_control.
            for directory in [mount, *reversed(self._node.parents[:len(self._node.relative_to(mount).parts) - 1]),
                              self._node]:
                _write(directory / "cgroup.subtree_control", ENABLE_V2_CONTROLLERS)
        except OSError:
            self.close()
            raise

    def describe(self) -> str:
        return f"cgroup v2 (memory, cpu) under {self._node}: memory limits and CPU limits enforced by the kernel"

    def container(self, pod_uid: str, container: str, limits: ContainerLimits) -> CgroupV2Group:
        pod = self._node / pod_uid
        _make(pod)
        _write(pod / "cgroup.subtree_control", ENABLE_V2_CONTROLLERS)
        group = CgroupV2Group(pod / container, limits=limits)
        self._caps.track(group)
        return group

    def cap_cpu(self, percent: Optional[int]) -> None:
        self._caps.cap(percent)

    def node_usage(self) -> Usage:
        return v2_usage(self._node)

    def close(self) -> None:
        _remove_node(self._node)
