"""What a fault kind is, and what it acts on.

A fault kind (``kill``, ``freeze``, ...) is a :class:`NodeFault`: a name that becomes the
``trainctl local node NAME`` subcommand, the help and the outcome a person reads, the kind
that undoes it, the flags it takes, and ``apply``. ``apply`` acts on a node of a
:class:`NodeHost`: the cluster directory's files and processes, plus the two things only the
cluster's supervisor can do, reap a kubelet it started and boot one again. The in-process
:class:`~trainctl.cluster.local_cluster.LocalCluster` is such a host, and so is the
supervisor of ``trainctl local up`` reached from another process
(:class:`~trainctl.cluster.supervisor.SupervisedNodes`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class NodeHost(Protocol):
    """Where the nodes run: their directory, and the supervisor's part in a fault."""

    @property
    def directory(self) -> Path: ...

    def check_boot(self, node: str) -> None:
        """Raise :class:`~trainctl.cluster.machines.NodeError` when ``node`` cannot boot here."""

    def boot(self, node: str) -> None:
        """Start ``node``'s kubelet again (its state file already says it runs)."""

    def reap(self, node: str) -> None:
        """``node``'s kubelet was SIGKILLed: collect it, so it is not taken for a crash."""


@dataclass(frozen=True)
class FaultFlag:
    """One ``--flag VALUE`` a fault kind takes; handed to ``apply`` under ``dest``."""

    flag: str
    dest: str
    help: str
    metavar: str = "VALUE"


@dataclass(frozen=True)
class NodeFault:
    """One kind of node fault (or of mending one). ``undo`` names the kind that mends it
    (empty for a kind that mends); ``outcome`` is said afterwards, ``{node}`` filled in."""

    name: str
    help: str
    outcome: str
    apply: Callable[..., None]  # (host, node, **flag values)
    undo: str = ""
    flags: tuple[FaultFlag, ...] = ()

    def __call__(self, host: NodeHost, node: str, options: Mapping[str, Any] | None = None) -> None:
        self.apply(host, node, **(options or {}))
