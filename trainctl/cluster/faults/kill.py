"""``kill`` and ``start``: the machine dies, and boots again.

A killed node's kubelet and every process of its pods get SIGKILL, the kubelet first so it
reports nothing; the node is marked killed first, so its supervisor leaves it down. Booting
brings back its kubelet (which fails the pods whose processes are gone), not those processes.
"""

from __future__ import annotations

import signal
from pathlib import Path

from trainctl.cluster.faults.fault import NodeFault, NodeHost
from trainctl.cluster.faults.freeze import thaw_frozen
from trainctl.cluster.faults.partition import refuse_partitioned
from trainctl.cluster.faults.processes import signal_node
from trainctl.cluster.machines import FROZEN, KILLED, find_node, node_state, set_state


def kill_node(directory: Path, name: str) -> int:
    """SIGKILL to the node's kubelet and every process of its pods; how many were signalled."""
    spec = find_node(directory, name)
    refuse_partitioned(directory, name)
    if node_state(directory, name) == FROZEN:
        signal_node(directory, spec, signal.SIGCONT)  # a stopped process still dies of SIGKILL; be plain
    set_state(directory, name, KILLED)
    return signal_node(directory, spec, signal.SIGKILL)


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
