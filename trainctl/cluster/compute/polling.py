"""Memory limits without cgroups: watch each container's process tree, kill it when too big.

Where no cgroup hierarchy is writable (an unprivileged user, macOS), one thread per node
reads the process table every ``interval`` seconds (psutil). A container's processes are
its main process, every descendant of it (torchrun's workers leave its session but stay its
children) and whatever is left in its process group. When their resident sets together
exceed ``limits.memory`` the container is SIGKILLed and reported as OOMKilled. Resident
sets of forked processes share pages, so the sum can overstate use: a limit errs on the
strict side. CPU limits are not enforced.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Optional

import psutil

from trainctl.cluster.compute.accounting import ZERO_USAGE, Usage
from trainctl.cluster.compute.container_limits import ContainerLimits
from trainctl.cluster.compute.cpu_cap import CpuCapUnsupported

DEFAULT_INTERVAL = 0.25


class ProcessTable:
    """One reading of every process: parent, resident set and CPU time (with reaped children)."""

    def __init__(self) -> None:
        self.children: dict[int, list[int]] = {}
        self.rss: dict[int, int] = {}
        self.cpu: dict[int, float] = {}
        for process in psutil.process_iter(["ppid", "memory_info", "cpu_times"]):
            info = process.info
            if info["memory_info"] is None or info["cpu_times"] is None:  # gone, or not ours to read
                continue
            times = info["cpu_times"]
            self.children.setdefault(info["ppid"], []).append(process.pid)
            self.rss[process.pid] = info["memory_info"].rss
            self.cpu[process.pid] = (times.user + times.system + getattr(times, "children_user", 0.0)
                                     + getattr(times, "children_system", 0.0))

    def members(self, leader: int) -> set[int]:
        """``leader``, its descendants and what remains in its process group."""
        found: set[int] = set()
        pending = [leader] if leader in self.rss else []
        for pid in self.rss:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == leader:
                    pending.append(pid)
        while pending:
            pid = pending.pop()
            if pid not in found:
                found.add(pid)
                pending.extend(self.children.get(pid, ()))
        return found


class PolledGroup:
    def __init__(self, limits: ContainerLimits, *, on_close: Callable[["PolledGroup"], None]) -> None:
        self.limits = limits
        self.leader: Optional[int] = None
        self.joined: set[int] = set()  # exec'd processes, each followed with its descendants
        self._on_close = on_close
        self._oom = False
        self._cpu_seconds = 0.0
        self._usage = ZERO_USAGE
        self._lock = threading.Lock()

    def preexec(self) -> None:
        return None

    def add(self, pid: int) -> None:
        self.leader = pid

    def join(self, pid: int) -> None:
        with self._lock:
            self.joined.add(pid)

    def observe(self, table: ProcessTable) -> None:
        """Account this reading; kill the container if it is over its memory limit."""
        if self.leader is None:
            return
        with self._lock:
            self.joined &= set(table.rss)  # forget exec'd processes that ended
            joined = set(self.joined)
        members = table.members(self.leader).union(*(table.members(pid) for pid in joined))
        memory = sum(table.rss[pid] for pid in members)
        with self._lock:
            # CPU time of a process that exits unreaped by a member is lost: never go back.
            self._cpu_seconds = max(self._cpu_seconds, sum(table.cpu[pid] for pid in members))
            self._usage = Usage(cpu_seconds=self._cpu_seconds, memory_bytes=memory)
            over = self.limits.memory_bytes is not None and memory > self.limits.memory_bytes and not self._oom
            if over:
                self._oom = True
        if over:
            self._kill(members)

    def _kill(self, members: set[int]) -> None:
        assert self.leader is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.leader, signal.SIGKILL)
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def usage(self) -> Usage:
        with self._lock:
            return self._usage

    def oom_killed(self) -> bool:
        with self._lock:
            return self._oom

    def close(self) -> None:
        self._on_close(self)


class PollingEnforcer:
    kind = "polling"

    def __init__(self, *, node: str, interval: float = DEFAULT_INTERVAL) -> None:
        self.interval = interval
        self._groups: set[PolledGroup] = set()
        self._finished_cpu_seconds = 0.0  # of closed containers: node CPU time only grows
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"resources-{node}")
        self._thread.start()

    def describe(self) -> str:
        return (f"polling the process tree every {self.interval:g} s: memory limits enforced by killing "
                f"the container (SIGKILL) when its processes' resident memory exceeds the limit; "
                f"CPU limits not enforced")

    def container(self, pod_uid: str, container: str, limits: ContainerLimits) -> PolledGroup:
        group = PolledGroup(limits, on_close=self._forget)
        with self._lock:
            self._groups.add(group)
        return group

    def cap_cpu(self, percent: Optional[int]) -> None:
        if percent is not None:
            raise CpuCapUnsupported("this node enforces no CPU limits (no writable cgroup cpu controller: its "
                                    "resource enforcer polls the process tree)")

    def _forget(self, group: PolledGroup) -> None:
        with self._lock:
            if group in self._groups:
                self._groups.discard(group)
                self._finished_cpu_seconds += group.usage().cpu_seconds

    def _run(self) -> None:
        while not self._stopped.wait(self.interval):
            with self._lock:
                groups = [group for group in self._groups if group.leader is not None]
            if groups:
                table = ProcessTable()
                for group in groups:
                    group.observe(table)

    def node_usage(self) -> Usage:
        with self._lock:
            usages = [group.usage() for group in self._groups]
            finished = self._finished_cpu_seconds
        return Usage(cpu_seconds=finished + sum(u.cpu_seconds for u in usages),
                     memory_bytes=sum(u.memory_bytes for u in usages))

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
