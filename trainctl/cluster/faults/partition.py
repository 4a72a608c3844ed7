"""``partition`` and ``heal``: the machine loses the network, and gets it back.

Only on the isolated pod network: the cluster's network router (:mod:`trainctl.cluster.network.router`)
takes the node's pods' links down and holds its kubelet's path to the API server; every
process keeps running. Healing lets the kubelet back first; it kills what was deleted
meanwhile and only then gives the pods still in the API their links back.
"""

from __future__ import annotations

from pathlib import Path

from trainctl.cluster.faults.fault import NodeFault, NodeHost
from trainctl.cluster.machines import PARTITIONED, NodeError, find_node, node_state, set_state
from trainctl.cluster.network import control


def refuse_partitioned(directory: Path, name: str) -> None:
    """One fault at a time on a partitioned node: its cable comes back first."""
    if node_state(directory, name) == PARTITIONED:
        raise NodeError(f"node {name} is partitioned; heal it first: trainctl local node heal {name}")


def ask_router(directory: Path, message: dict[str, object], what: str = "partition") -> None:
    """One request to the cluster's network router; its refusal as a :class:`NodeError`."""
    try:
        control.request(directory, message)
    except control.RouterError as exc:
        raise NodeError(f"{exc} ({what} needs the isolated pod network: trainctl local up --network isolated)") from None


def partition_node(directory: Path, name: str) -> None:
    find_node(directory, name)
    if node_state(directory, name):
        raise NodeError(f"node {name} is {node_state(directory, name)}")
    ask_router(directory, {"op": "partition", "node": name})
    set_state(directory, name, PARTITIONED)


def heal_node(directory: Path, name: str) -> None:
    find_node(directory, name)
    if node_state(directory, name) != PARTITIONED:
        raise NodeError(f"node {name} is not partitioned")
    ask_router(directory, {"op": "heal", "node": name})
    set_state(directory, name, "")


def partition(host: NodeHost, node: str) -> None:
    partition_node(host.directory, node)


def heal(host: NodeHost, node: str) -> None:
    heal_node(host.directory, node)


PARTITION = NodeFault("partition", "the machine loses the network: its kubelet and its pods are cut off, their "
                                   "processes keep running (isolated network only)",
                      "Node {node} partitioned: its kubelet and its pods are cut off from the network; "
                      "their processes keep running.", partition, undo="heal")
HEAL = NodeFault("heal", "a partitioned machine gets the network back: its kubelet first, then the pods still in the API",
                 "Node {node} healed: its kubelet is back on the network and gives its pods their links back.", heal)
