"""Signals to a node's processes: its kubelet (``run/<component>.pid``) and the process groups
of its pods (``kubelet/<node>/processes``), as the kill and freeze faults send them."""

from __future__ import annotations

from pathlib import Path

from trainctl.cluster.kubelet.kubelet import processes_dir
from trainctl.cluster.kubelet.runtime import ProcessRegistry, process_stopped, signal_live
from trainctl.cluster.machines import NodeSpec
from trainctl.cluster.pidfiles import signal_pid_file


def signal_kubelet(directory: Path, spec: NodeSpec, signum: int) -> bool:
    return signal_pid_file(directory / "run" / f"{spec.component}.pid", signum) is not None


def signal_pods(directory: Path, spec: NodeSpec, signum: int) -> int:
    """Signal every recorded process group of the node's pods; how many."""
    return signal_live(ProcessRegistry(processes_dir(directory, spec.name)).records(), signum)


def signal_node(directory: Path, spec: NodeSpec, signum: int) -> int:
    """Signal the node's kubelet, then every recorded process group of its pods; how many."""
    return int(signal_kubelet(directory, spec, signum)) + signal_pods(directory, spec, signum)


def pods_stopped(directory: Path, spec: NodeSpec) -> bool:
    return any(record.alive() and process_stopped(record.pid)
               for record in ProcessRegistry(processes_dir(directory, spec.name)).records())
