"""The embedded cluster's nodes as machines a person can break: kill, freeze, thaw, boot.

Each node is one kubelet process (``run/kubelet*.pid``) and the process groups of its pods
(recorded under ``kubelet/<node>/processes``). ``run/nodes.json`` maps node names to their
kubelet component; ``run/nodes/<node>`` holds what the user did to a node (``killed`` or
``frozen``, ``partitioned``), so the supervisor does not restart a killed kubelet and
``trainctl local status`` can say it. Freezing uses SIGSTOP on the kubelet and every recorded pod process
(the cgroup freezer is not used: signals work without privileges). Thawing resumes the
kubelet first and lets it resume the pods that are still in the API and kill those deleted
meanwhile (:mod:`.kubelet.thaw`), so a replaced pod's old process never runs again.
Partitioning (isolated network only) asks the cluster's network router to cut the node's
pods and kubelet off, and healing to let the kubelet back first, for the same reason.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .kubelet.kubelet import DEFAULT_NODE_NAME, processes_dir
from .kubelet.node import memory_kib
from .kubelet.runtime import ProcessRegistry, process_stopped, signal_live
from .network import control
from .pidfiles import signal_pid_file

NODES_FILE = Path("run") / "nodes.json"
KILLED, FROZEN, PARTITIONED = "killed", "frozen", "partitioned"
THAW_SECONDS = 15.0  # how long a thawed kubelet may take to sort out its pods before all resume


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
    """``killed``, ``frozen`` or ``""`` (running as the supervisor left it)."""
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


def _signal_kubelet(directory: Path, spec: NodeSpec, signum: int) -> bool:
    return signal_pid_file(directory / "run" / f"{spec.component}.pid", signum) is not None


def _signal_pods(directory: Path, spec: NodeSpec, signum: int) -> int:
    """Signal every recorded process group of the node's pods; how many."""
    return signal_live(ProcessRegistry(processes_dir(directory, spec.name)).records(), signum)


def _signal_node(directory: Path, spec: NodeSpec, signum: int) -> int:
    """Signal the node's kubelet, then every recorded process group of its pods; how many."""
    return int(_signal_kubelet(directory, spec, signum)) + _signal_pods(directory, spec, signum)


def _pods_stopped(directory: Path, spec: NodeSpec) -> bool:
    return any(record.alive() and process_stopped(record.pid)
               for record in ProcessRegistry(processes_dir(directory, spec.name)).records())


def kill_node(directory: Path, name: str) -> int:
    """The machine dies: SIGKILL to the kubelet (first, so it reports nothing) and to
    every process of its pods. Marked killed first, so the supervisor leaves it down."""
    spec = find_node(directory, name)
    _refuse_partitioned(directory, name)
    if node_state(directory, name) == FROZEN:
        _signal_node(directory, spec, signal.SIGCONT)  # a stopped process still dies of SIGKILL; be plain
    set_state(directory, name, KILLED)
    return _signal_node(directory, spec, signal.SIGKILL)


def freeze_node(directory: Path, name: str) -> int:
    """The machine hangs: SIGSTOP to the kubelet and every process of its pods."""
    spec = find_node(directory, name)
    if node_state(directory, name) == KILLED:
        raise NodeError(f"node {name} is killed; start it with: trainctl local node start {name}")
    _refuse_partitioned(directory, name)
    set_state(directory, name, FROZEN)
    return _signal_node(directory, spec, signal.SIGSTOP)


def thaw_node(directory: Path, name: str, timeout: float = THAW_SECONDS) -> int:
    """The machine resumes: SIGCONT to the kubelet, which resumes its pods' processes or kills
    those of pods deleted meanwhile; after ``timeout`` (a kubelet that is gone or stuck),
    SIGCONT to whatever is still stopped. Returns how many processes were signalled here."""
    spec = find_node(directory, name)
    if node_state(directory, name) != FROZEN:
        raise NodeError(f"node {name} is not frozen")
    count = 0
    if _signal_kubelet(directory, spec, signal.SIGCONT):
        count = 1
        deadline = time.monotonic() + timeout
        while _pods_stopped(directory, spec) and time.monotonic() < deadline:
            time.sleep(0.05)
    count += _signal_pods(directory, spec, signal.SIGCONT)
    set_state(directory, name, "")
    return count


def _refuse_partitioned(directory: Path, name: str) -> None:
    """One fault at a time on a partitioned node: its cable comes back first."""
    if node_state(directory, name) == PARTITIONED:
        raise NodeError(f"node {name} is partitioned; heal it first: trainctl local node heal {name}")


def _router(directory: Path, message: dict[str, str]) -> None:
    try:
        control.request(directory, message)
    except control.RouterError as exc:
        raise NodeError(f"{exc} (partition needs the isolated pod network: trainctl local up --network isolated)") from None


def partition_node(directory: Path, name: str) -> None:
    """The machine loses the network: its pods' links go down and its kubelet's path to the
    API server is held (:mod:`.network.router`); every process keeps running."""
    find_node(directory, name)
    if node_state(directory, name):
        raise NodeError(f"node {name} is {node_state(directory, name)}")
    _router(directory, {"op": "partition", "node": name})
    set_state(directory, name, PARTITIONED)


def heal_node(directory: Path, name: str) -> None:
    """The cable is back: the kubelet first; it kills what was deleted meanwhile and only then
    gives the pods still in the API their links back."""
    find_node(directory, name)
    if node_state(directory, name) != PARTITIONED:
        raise NodeError(f"node {name} is not partitioned")
    _router(directory, {"op": "heal", "node": name})
    set_state(directory, name, "")
