"""Signals to a node's processes: its kubelet (``run/<component>.pid``) and the process groups
of its pods (``kubelet/<node>/processes``), as the kill and freeze faults send them, or one
pod's (the pod faults)."""

from __future__ import annotations

from pathlib import Path

from trainctl.cluster.kubelet.kubelet import processes_dir
from trainctl.cluster.kubelet.runtime import (
    ProcessRecord,
    ProcessRegistry,
    marked_processes,
    process_start_time,
    process_stopped,
    signal_live,
)
from trainctl.cluster.machines import NodeSpec
from trainctl.cluster.pidfiles import read_pid_file, signal_pid_file


def signal_kubelet(directory: Path, spec: NodeSpec, signum: int) -> bool:
    return signal_pid_file(directory / "run" / f"{spec.component}.pid", signum) is not None


def signal_pods(directory: Path, spec: NodeSpec, signum: int) -> int:
    """Signal every recorded process group of the node's pods; how many."""
    return signal_live(ProcessRegistry(processes_dir(directory, spec.name)).records(), signum)


def pod_processes(directory: Path, node: str, pod_uid: str) -> list[ProcessRecord]:
    """The recorded process groups of one pod's containers on ``node``."""
    return [record for record in ProcessRegistry(processes_dir(directory, node)).records() if record.pod_uid == pod_uid]


def signal_node(directory: Path, spec: NodeSpec, signum: int) -> int:
    """Signal the node's kubelet, then every recorded process group of its pods; how many."""
    return int(signal_kubelet(directory, spec, signum)) + signal_pods(directory, spec, signum)


def pods_stopped(directory: Path, spec: NodeSpec) -> bool:
    return any(record.alive() and process_stopped(record.pid)
               for record in ProcessRegistry(processes_dir(directory, spec.name)).records())


def live_processes(directory: Path, spec: NodeSpec) -> list[int]:
    """The node's kubelet and its pods' processes that are still alive (a zombie is dead)."""
    kubelet = read_pid_file(directory / "run" / f"{spec.component}.pid")
    live = [] if kubelet is None else [kubelet]
    for record in ProcessRegistry(processes_dir(directory, spec.name)).records():
        if record.alive():
            live.append(record.pid)
        if record.container_id:
            live.extend(pid for pid in marked_processes(record.container_id) if process_start_time(pid) is not None)
    return sorted(set(live))
