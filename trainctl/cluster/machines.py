"""The embedded cluster's nodes as machines: which run, with what share, and what was done to them.

Each node is one kubelet process (``run/kubelet*.pid``) and the process groups of its pods
(recorded under ``kubelet/<node>/processes``). ``run/nodes.json`` maps node names to their
kubelet component and share of the machine; ``run/nodes/<node>`` holds the fault the user
caused to a node (``killed``, ``frozen`` or ``partitioned``, see :mod:`.faults`), so the
supervisor does not restart a killed kubelet and ``trainctl local status`` can say it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from trainctl.cluster.kubelet.kubelet import DEFAULT_NODE_NAME
from trainctl.cluster.kubelet.node import memory_kib

NODES_FILE = Path("run") / "nodes.json"
KILLED, FROZEN, PARTITIONED = "killed", "frozen", "partitioned"


class NodeError(Exception):
    """A node command that cannot be done (unknown node, wrong state); one line for the user."""


@dataclass(frozen=True)
class NodeSpec:
    """One node of the cluster: its name, its kubelet component, its share of the machine."""

    name: str
    component: str
    cpu: str
    memory: str


def node_names(count: int, names: Optional[Sequence[str]] = None) -> list[str]:
    """``trainctl-local``, ``trainctl-local-2``, ... or the names given (as many as nodes)."""
    if names:
        if len(set(names)) != len(names) or not all(names):
            raise NodeError(f"node names must be distinct and non-empty: {','.join(names)}")
        return list(names)
    return [DEFAULT_NODE_NAME] + [f"{DEFAULT_NODE_NAME}-{i}" for i in range(2, count + 1)]


def node_specs(count: int, names: Optional[Sequence[str]] = None, cpu: Optional[str] = None,
               memory: Optional[str] = None) -> list[NodeSpec]:
    """The nodes to start: the machine's CPUs and memory split evenly unless given per node.
    The first node's kubelet keeps the component name ``kubelet`` (its pid file and log)."""
    chosen = node_names(count, names)
    share_cpu = cpu or format(max(1, math.floor((os.cpu_count() or 1) * 1000 / len(chosen))), "d") + "m"
    share_memory = memory or f"{memory_kib() // len(chosen)}Ki"
    if len(chosen) == 1:
        share_cpu, share_memory = cpu or str(os.cpu_count() or 1), memory or f"{memory_kib()}Ki"
    return [NodeSpec(name, "kubelet" if i == 0 else f"kubelet-{name}", share_cpu, share_memory)
            for i, name in enumerate(chosen)]


def write_nodes(directory: Path, specs: Sequence[NodeSpec]) -> None:
    path = directory / NODES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([spec.__dict__ for spec in specs]))


def read_nodes(directory: Path) -> list[NodeSpec]:
    try:
        return [NodeSpec(**entry) for entry in json.loads((directory / NODES_FILE).read_text())]
    except (OSError, ValueError, TypeError):
        return []


def find_node(directory: Path, name: str) -> NodeSpec:
    for spec in read_nodes(directory):
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in read_nodes(directory)) or "none"
    raise NodeError(f"no node {name!r} in the cluster in {directory} (nodes: {known})")


def state_file(directory: Path, name: str) -> Path:
    return directory / "run" / "nodes" / name


def node_state(directory: Path, name: str) -> str:
    """``killed``, ``frozen``, ``partitioned`` or ``""`` (running as the supervisor left it)."""
    try:
        return state_file(directory, name).read_text().strip()
    except OSError:
        return ""


def set_state(directory: Path, name: str, state: str) -> None:
    path = state_file(directory, name)
    if not state:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(state + "\n")
