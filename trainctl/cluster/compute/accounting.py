"""The interface every resource enforcer offers the kubelet's container runtime.

A node has one :class:`Enforcer` (cgroup v2, cgroup v1 or process-tree polling, chosen at
start); each container run gets a :class:`ContainerGroup` from it that holds the container's
processes, enforces its limits and answers for its usage and for an OOM kill.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Protocol

from trainctl.cluster.compute.container_limits import ContainerLimits


@dataclass(frozen=True)
class Usage:
    """CPU time used so far (cumulative) and the memory working set now."""

    cpu_seconds: float
    memory_bytes: int


ZERO_USAGE = Usage(cpu_seconds=0.0, memory_bytes=0)


class ContainerGroup(Protocol):
    """The processes of one container run."""

    def preexec(self) -> Optional[Callable[[], None]]:
        """A ``preexec_fn`` for ``subprocess.Popen`` that puts the child into the group before
        it runs anything (so nothing it forks escapes), or None when not needed."""

    def add(self, pid: int) -> None:
        """Call right after the container's main process started (``Popen.pid``)."""

    def join(self, pid: int) -> None:
        """Another process started in the running container (``kubectl exec``, with ``preexec``):
        it and what it starts count against the container's limits and usage."""

    def usage(self) -> Usage:
        ...

    def oom_killed(self) -> bool:
        """Whether a process of the container was killed for exceeding ``limits.memory``;
        decided once the main process has exited."""

    def close(self) -> None:
        """Kill whatever is left of the container and release the group (idempotent)."""


class Enforcer(Protocol):
    """One node's resource enforcement and accounting."""

    kind: str  # "cgroup-v2", "cgroup-v1" or "polling"

    def describe(self) -> str:
        """Which mechanism runs and what it enforces, in a sentence for status and docs."""

    def container(self, pod_uid: str, container: str, limits: ContainerLimits) -> ContainerGroup:
        ...

    def node_usage(self) -> Usage:
        """The sum over this node's containers (NodeMetrics)."""

    def cap_cpu(self, percent: Optional[int]) -> None:
        """Hold every container, running or started later, to ``percent`` of its CPU limit or
        of one core (None: lift); :class:`~.cpu_cap.CpuCapUnsupported` where CPU is not enforced."""

    def close(self) -> None:
        """Release the node's groups (containers must have been closed)."""
