"""The supervisor of ``trainctl local up``: what it is asked to run, and how it keeps it running.

:class:`UpOptions` is everything ``up`` is asked for, in one object: the foreground supervisor
builds its :class:`~trainctl.cluster.local_cluster.LocalCluster` from it, and ``up --detach``
hands it to the background supervisor as argv (:meth:`UpOptions.to_argv`, which the ``up``
parser reads back as the same options). :func:`supervise` waits for a component to exit and restarts it (a crash budget
per component), except the kubelet of a node the user killed; SIGUSR1 from ``trainctl local
node start`` (:class:`SupervisedNodes`, the node faults' host in another process) makes it
boot every node no longer marked killed. :func:`stop_cluster` is ``trainctl local down``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster import machines
from trainctl.cluster.local_cluster import SUPERVISOR_PID, ClusterError, LocalCluster, cleanup_leftovers, find_leftovers
from trainctl.cluster.machines import NodeError
from trainctl.cluster.network import isolation
from trainctl.cluster.pidfiles import read_pid_file, signal_pid_file, wait_pid_exit

# A component that crashes more often than this is not restarted again.
MAX_RESTARTS, RESTART_WINDOW_SECONDS = 5, 60.0

# kube-controller-manager's HPA settings ``up`` hands to the control plane under their names.
_CONTROLPLANE = "controlplane_flag"


def _flag(name: str, controlplane: bool = False) -> Any:
    """A field given on ``up``'s command line as ``name`` (and, with ``controlplane``, handed
    on to the control plane under that name)."""
    return field(default=None, metadata={"flag": name, _CONTROLPLANE: controlplane})


@dataclass(frozen=True)
class UpOptions:
    """What ``trainctl local up`` was asked for (``--dir``, ``--detach`` aside); the field
    names are the ``up`` parser's dests, each ``flag`` its option string."""

    gpus: int = field(default=0, metadata={"flag": "--gpus"})
    npus: int = field(default=0, metadata={"flag": "--npus"})
    no_controller: bool = field(default=False, metadata={"flag": "--no-controller"})
    nodes: int = field(default=1, metadata={"flag": "--nodes"})
    node_names: Optional[str] = _flag("--node-names")
    node_cpu: Optional[str] = _flag("--node-cpu")
    node_memory: Optional[str] = _flag("--node-memory")
    workdir: Optional[str] = _flag("--workdir")
    node_lost_grace: Optional[str] = _flag("--node-lost-grace")
    node_monitor_grace_period: Optional[str] = _flag("--node-monitor-grace-period")
    hpa_sync_period: Optional[str] = _flag("--hpa-sync-period")
    hpa_cpu_initialization_period: Optional[str] = _flag(
        "--horizontal-pod-autoscaler-cpu-initialization-period", controlplane=True)
    hpa_initial_readiness_delay: Optional[str] = _flag(
        "--horizontal-pod-autoscaler-initial-readiness-delay", controlplane=True)
    hpa_downscale_stabilization: Optional[str] = _flag(
        "--horizontal-pod-autoscaler-downscale-stabilization", controlplane=True)
    hollow_nodes: int = field(default=0, metadata={"flag": "--hollow-nodes"})
    network: Optional[str] = _flag("--network")
    sandbox: Optional[str] = _flag("--sandbox")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "UpOptions":
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})

    def to_argv(self) -> list[str]:
        """The ``up`` flags that ask for these options (the defaults left out)."""
        argv: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            argv += [f.metadata["flag"]] if isinstance(value, bool) else [f.metadata["flag"], str(value)]
        return argv

    def controlplane_args(self) -> list[str]:
        return [item for f in fields(self) if f.metadata.get(_CONTROLPLANE) and getattr(self, f.name)
                for item in (f.metadata["flag"], getattr(self, f.name))]

    def names(self) -> Optional[list[str]]:
        return [name.strip() for name in self.node_names.split(",")] if self.node_names else None

    def cluster(self, directory: Path, *, die_with_supervisor: bool) -> LocalCluster:
        return LocalCluster(directory, gpus=self.gpus, npus=self.npus, controller=not self.no_controller,
                            workdir=self.workdir, nodes=self.nodes, node_names=self.names(),
                            node_cpu=self.node_cpu, node_memory=self.node_memory,
                            node_monitor_grace_period=self.node_monitor_grace_period,
                            hpa_sync_period=self.hpa_sync_period, controlplane_args=self.controlplane_args(),
                            controller_args=["--node-lost-grace", self.node_lost_grace] if self.node_lost_grace else None,
                            die_with_supervisor=die_with_supervisor, hollow_nodes=self.hollow_nodes,
                            network=self.network or isolation.AUTO, sandbox=self.sandbox)


# --- the supervising loop -------------------------------------------------------------------
class _Wake(Exception):
    """SIGUSR1 while waiting: ``trainctl local node start`` asked for a node to boot."""


def _boot_started_nodes(cluster: LocalCluster, say: Callable[[str], None]) -> None:
    """Start the kubelet of every node no longer marked killed whose kubelet is not running."""
    for spec in cluster.nodes:
        kubelet = cluster.kubelets[spec.name]
        if not kubelet.alive and machines.node_state(cluster.directory, spec.name) != machines.KILLED:
            say(f"node {spec.name} boots")
            try:
                kubelet.start()
            except ClusterError as exc:
                say(str(exc))


def supervise(cluster: LocalCluster, say: Callable[[str], None]) -> int:
    """Wait for a component to exit (no polling: waitid on our children) and restart it,
    unless it is the kubelet of a node the user killed (``trainctl local node kill``).
    Returns 1 once a component spent its crash budget; runs until a signal ends it otherwise."""
    crashes: dict[str, list[float]] = {}
    wake = {"waiting": False, "pending": False}

    def on_usr1(_signum: int, _frame: Any) -> None:
        wake["pending"] = True
        if wake["waiting"]:
            raise _Wake()

    signal.signal(signal.SIGUSR1, on_usr1)
    while True:
        wake["waiting"] = True
        try:
            if wake["pending"]:
                raise _Wake()
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
            assert info is not None  # waitid returns None only with WNOHANG
        except _Wake:
            wake["waiting"] = wake["pending"] = False
            _boot_started_nodes(cluster, say)
            continue
        wake["waiting"] = False
        component = next((c for c in cluster.components if c.pid == info.si_pid), None)
        if component is None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(info.si_pid, 0)
            continue
        assert component.process is not None
        code: Optional[int] = component.process.wait()
        node = next((spec.name for spec in cluster.nodes if spec.component == component.name), None)
        if node is not None and machines.node_state(cluster.directory, node) == machines.KILLED:
            say(f"node {node} was killed; start it again with: trainctl local node start {node}")
            continue
        # A restart that fails (e.g. the API server cannot listen yet) is one more crash, not
        # the end of the cluster: try again until the crash budget is spent.
        while True:
            now = time.monotonic()
            recent = [t for t in crashes.get(component.name, []) if now - t < RESTART_WINDOW_SECONDS] + [now]
            crashes[component.name] = recent
            if len(recent) > MAX_RESTARTS:
                say(f"{component.name} exited {len(recent)} times within {RESTART_WINDOW_SECONDS:g}s "
                    f"(last code {code}); giving up, see {component.log_file}")
                return 1
            say(f"{component.name} exited with code {code}; restarting it")
            try:
                component.start()
                break
            except ClusterError as exc:
                say(str(exc))
                component.kill()
                code = component.process.returncode if component.process else None


# --- the supervisor seen from another process ------------------------------------------------
@dataclass(frozen=True)
class SupervisedNodes:
    """The nodes of the cluster in ``directory`` as the node faults' host from outside its
    supervisor: that supervisor reaps a killed kubelet itself, and boots a node on SIGUSR1."""

    directory: Path

    def _supervisor(self) -> int:
        pid = read_pid_file(self.directory / SUPERVISOR_PID)
        if pid is None:
            leftovers = find_leftovers(self.directory)
            raise NodeError(leftovers.refusal(self.directory) if leftovers
                            else f"no local cluster is running in {self.directory}")
        return pid

    def check_boot(self, node: str) -> None:
        self._supervisor()

    def boot(self, node: str) -> None:
        os.kill(self._supervisor(), signal.SIGUSR1)

    def reap(self, node: str) -> None:
        """The supervisor waits for its kubelets itself."""


def start_detached(options: UpOptions, directory: Path) -> int:
    """Start ``trainctl local up`` on ``directory`` as a background supervisor and wait until
    its cluster is ready; its pid. Raises ClusterError with the supervisor's last word."""
    running = read_pid_file(directory / SUPERVISOR_PID)
    if running is not None:
        raise ClusterError(f"a local cluster is already running in {directory} (supervisor pid {running}); "
                           f"stop it with: trainctl local down --dir {directory}")
    try:
        (directory / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ClusterError(f"cannot use {directory} for the local cluster: {exc.strerror or exc}") from None
    # The background supervisor's pods run where this command was started.
    options = dataclasses.replace(options, workdir=str(Path(options.workdir).resolve() if options.workdir
                                                       else Path.cwd()))
    read_fd, write_fd = os.pipe()
    argv = [sys.executable, "-m", "trainctl.cli.main", "local", "up", "--dir", str(directory),
            "--ready-fd", str(write_fd), *options.to_argv()]
    log_path = directory / "logs" / "supervisor.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, pass_fds=(write_fd,))
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as ready:
        answer = ready.read(64)
    if not answer:
        code = process.wait()
        last = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()][-1:]
        raise ClusterError(last[0].removeprefix("trainctl local: ") if last
                           else f"the supervisor exited with code {code}; see {log_path}")
    return process.pid


def stop_cluster(directory: Path, say: Callable[[str], None]) -> tuple[Optional[int], list[str]]:
    """``trainctl local down``: SIGTERM to the supervisor (SIGKILL after 60s), then whatever a
    dead supervisor left, pod processes included. The supervisor's pid, if one ran, and what
    was left (:func:`~trainctl.cluster.local_cluster.cleanup_leftovers`)."""
    pid = signal_pid_file(directory / SUPERVISOR_PID, signal.SIGTERM)
    if pid is not None and not wait_pid_exit(pid, 60):
        say(f"the supervisor (pid {pid}) did not stop within 60s; killing it")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_pid_exit(pid, 10)
    cluster = LocalCluster(directory, controller=False)
    cluster.lock(leftovers_ok=True)
    try:
        return pid, cleanup_leftovers(directory)
    finally:
        cluster.stop()
