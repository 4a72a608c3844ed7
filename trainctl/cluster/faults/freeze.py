"""``freeze`` and ``thaw``: the machine hangs, and resumes.

Freezing sends SIGSTOP to the kubelet and every recorded pod process (the cgroup freezer is
not used: signals work without privileges). Thawing resumes the kubelet first and lets it
resume the pods that are still in the API and kill those deleted meanwhile
(:mod:`trainctl.cluster.kubelet.thaw`), so a replaced pod's old process never runs again.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from trainctl.cluster.faults.fault import NodeFault, NodeHost
from trainctl.cluster.faults.partition import refuse_partitioned
from trainctl.cluster.faults.processes import pods_stopped, signal_kubelet, signal_node, signal_pods
from trainctl.cluster.machines import FROZEN, KILLED, NodeError, find_node, node_state, set_state

THAW_SECONDS = 15.0  # how long a thawed kubelet may take to sort out its pods before all resume


def freeze_node(directory: Path, name: str) -> int:
    """SIGSTOP to the node's kubelet and every process of its pods; how many were signalled."""
    spec = find_node(directory, name)
    if node_state(directory, name) == KILLED:
        raise NodeError(f"node {name} is killed; start it with: trainctl local node start {name}")
    refuse_partitioned(directory, name)
    set_state(directory, name, FROZEN)
    return signal_node(directory, spec, signal.SIGSTOP)


def thaw_node(directory: Path, name: str, timeout: float = THAW_SECONDS) -> int:
    """SIGCONT to the kubelet, which resumes its pods' processes or kills those of pods
    deleted meanwhile; after ``timeout`` (a kubelet that is gone or stuck), SIGCONT to
    whatever is still stopped. Returns how many processes were signalled here."""
    spec = find_node(directory, name)
    if node_state(directory, name) != FROZEN:
        raise NodeError(f"node {name} is not frozen")
    count = 0
    if signal_kubelet(directory, spec, signal.SIGCONT):
        count = 1
        deadline = time.monotonic() + timeout
        while pods_stopped(directory, spec) and time.monotonic() < deadline:
            time.sleep(0.05)
    count += signal_pods(directory, spec, signal.SIGCONT)
    set_state(directory, name, "")
    return count


def thaw_frozen(directory: Path, name: str) -> None:
    """Thaw ``name`` if it is frozen: what booting or stopping a node does first (a stopped
    kubelet can neither be replaced cleanly nor stop)."""
    if node_state(directory, name) == FROZEN:
        thaw_node(directory, name)


def freeze(host: NodeHost, node: str) -> None:
    freeze_node(host.directory, node)


def thaw(host: NodeHost, node: str) -> None:
    thaw_node(host.directory, node)


FREEZE = NodeFault("freeze", "the machine hangs: its kubelet and its pods' processes are stopped (SIGSTOP)",
                   "Node {node} frozen: its kubelet and its pods' processes are stopped.", freeze, undo="thaw")
THAW = NodeFault("thaw", "a frozen machine resumes (SIGCONT)", "Node {node} thawed.", thaw)
