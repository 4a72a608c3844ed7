"""``kill`` and ``start``: the machine dies, and boots again.

A killed node's kubelet and every process of its pods get SIGKILL, the kubelet first so it
reports nothing; the node is marked killed first, so its supervisor leaves it down. Booting
brings back its kubelet (which fails the pods whose processes are gone), not those processes.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from trainctl.cluster.faults.fault import NodeFault, NodeHost
from trainctl.cluster.faults.freeze import thaw_frozen
from trainctl.cluster.faults.partition import refuse_partitioned
from trainctl.cluster.faults.processes import live_processes, signal_node
from trainctl.cluster.machines import FROZEN, KILLED, NodeError, find_node, node_state, set_state

KILL_SECONDS = 30.0  # how long a killed node's processes may take to die (a loaded machine)


def kill_node(directory: Path, name: str, timeout: float = KILL_SECONDS) -> int:
    """SIGKILL to the node's kubelet and every process of its pods; how many were signalled.
    Returns once every one of those processes is dead, as after a real machine's death
    nothing of it runs; a process still alive after ``timeout`` is a :class:`NodeError`."""
    spec = find_node(directory, name)
    refuse_partitioned(directory, name)
    if node_state(directory, name) == FROZEN:
        signal_node(directory, spec, signal.SIGCONT)  # a stopped process still dies of SIGKILL; be plain
    set_state(directory, name, KILLED)
    count = signal_node(directory, spec, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while live := live_processes(directory, spec):
        if time.monotonic() >= deadline:
            raise NodeError(f"node {name}: processes {', '.join(map(str, live))} still alive "
                            f"{timeout:g}s after SIGKILL")
        time.sleep(0.02)
        signal_node(directory, spec, signal.SIGKILL)  # any the first round did not reach
    return count


def kill(host: NodeHost, node: str) -> None:
    kill_node(host.directory, node)
    host.reap(node)


def start(host: NodeHost, node: str) -> None:
    """A frozen node is thawed first; then its state is cleared and its host boots it."""
    find_node(host.directory, node)
    host.check_boot(node)
    thaw_frozen(host.directory, node)
    set_state(host.directory, node, "")
    host.boot(node)


KILL = NodeFault("kill", "the machine dies: its kubelet and every process of its pods get SIGKILL",
                 "Node {node} killed: its kubelet and its pods' processes are gone.", kill, undo="start")
START = NodeFault("start", "a killed machine boots again: its kubelet comes back, its pods' processes do not",
                  "Node {node} is booting: its kubelet starts again (see trainctl local status).", start)
