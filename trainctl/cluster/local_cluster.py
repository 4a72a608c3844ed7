"""An embedded cluster's components: API server, scheduler, kubelets, control plane and controller.

:class:`LocalCluster` starts the components on one directory (one kubelet per node, see
:mod:`.machines`; the control plane runs kube-controller-manager's node lifecycle and HPA
controllers), waits until each is
ready, installs the CRDs, and stops everything (pod processes included) on exit. Each
component is its own process with a pid file and a log under the directory, so tests can
kill and restart one alone; ``trainctl local up`` adds signal handling, crash restarts and
``--detach`` on top (:mod:`.supervisor`). A LocalCluster is also the host the node faults
(:mod:`.faults`) act through in-process: ``cluster.fault("kill", node)``.

A supervisor that dies without stopping its cluster (SIGKILL, a crash) leaves processes that
run on unsupervised: :func:`find_leftovers` names them from the pid files and the kubelets'
process records, ``trainctl local status`` reports them, a new supervisor refuses the
directory while they run (it would have to kill them: training that runs must not vanish
silently), and ``trainctl local down`` stops them (:func:`cleanup_leftovers`). With
``die_with_supervisor`` (the foreground ``up``) the components get SIGTERM as soon as their
supervisor is gone, so there is nothing left to find. A new supervisor also removes the
nodes the last one ran and it does not (:mod:`.node_removal`). On the isolated pod network
one more component runs before the kubelets: the network router (:mod:`.network.router`).

Directory layout (``DIR``):

    kubeconfig, token, apiserver.port, state.db   written by the API server
    pki/                                          the cluster CA and the API server's certificates
    pki/nodes/<node>/                             a kubelet's serving and client certificates
    kubelet/<node>/kubeconfig                     a kubelet's credentials (system:node:<node>)
    run/<component>.pid                           "<pid> <kernel start time>"
    run/nodes.json, run/nodes/<node>              the nodes and what the user did to them
    run/network, run/network.sock                 the pod network chosen (and why); the isolated network's router
    run/apiserver.sock                            the API server on a unix socket (the router forwards to it)
    run/supervisor.lock                           flock held by the supervising process
    logs/<component>.log                          each component's stdout and stderr
    pods/<uid>/<container>/<restart>.log          container logs (CRI format)
    kubelet/<node>/processes/                     the pod process groups each kubelet owns
    network/hosts, network/python/                Service names for Python resolvers
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Optional

from trainctl.api import crd as api_crd
from trainctl.api.durations import positive_duration
from trainctl.cluster import faults, machines, node_credentials, node_removal
from trainctl.cluster.apiserver.process import PORT_FILE, wait_for_port_file
from trainctl.cluster.compute import enforcer
from trainctl.cluster.kubelet.kubelet import DEFAULT_NODE_NAME, processes_dir
from trainctl.cluster.kubelet.runtime import ProcessRegistry, marked_processes
from trainctl.cluster.network import isolation
from trainctl.cluster.network.ranges import HOST_IP, cluster_ranges, node_pod_cidr
from trainctl.cluster.pidfiles import read_pid_file, signal_pid_file, wait_pid_exit, write_pid_file
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import CRDS

DEFAULT_DIR = Path.home() / ".trainctl" / "local"
NETWORK_FILE = Path("run") / "network"  # the pod network this run chose, and why
SUPERVISOR_PID = Path("run") / "supervisor.pid"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class ClusterError(Exception):
    """Something the user must be told in one line (a component failed, DIR is busy, ...)."""


# --- components --------------------------------------------------------------------------
def _die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` after which the child gets SIGTERM when its parent dies, even by
    SIGKILL (``PR_SET_PDEATHSIG``). The kernel means the parent *thread*: start such a
    child from a thread that lives as long as the process (the supervisor's main thread)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the prctl took effect
            os._exit(1)
    return preexec


class Component:
    """One supervised process: start, wait ready, stop (SIGTERM then SIGKILL), kill, restart.
    With ``die_with_parent`` it also gets SIGTERM when the process that started it dies."""

    def __init__(self, name: str, directory: Path, argv: Callable[[], list[str]],
                 ready: Callable[["Component", float], None], env: Optional[dict[str, str]] = None) -> None:
        self.name = name
        self.directory = directory
        self._argv = argv
        self._ready = ready
        self._env = env
        self.die_with_parent = False
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.pid_file = directory / "run" / f"{name}.pid"
        self.log_file = directory / "logs" / f"{name}.log"
        self.ready_fd: Optional[int] = None  # read end of the kubelet's readiness pipe

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 60.0) -> None:
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it to be ready."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        argv = self._argv()
        pass_fds: tuple[int, ...] = ()
        write_fd = None
        if self._ready is _wait_pipe:
            self.ready_fd, write_fd = os.pipe()
            argv += ["--ready-fd", str(write_fd)]
            pass_fds = (write_fd,)
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            env=self._env, start_new_session=True, pass_fds=pass_fds,
                                            cwd=str(self.directory),
                                            preexec_fn=_die_with_parent() if self.die_with_parent else None)
        if write_fd is not None:
            os.close(write_fd)
        write_pid_file(self.pid_file, self.process.pid)

    def wait_ready(self, timeout: float = 60.0) -> None:
        try:
            self._ready(self, timeout)
        finally:
            if self.ready_fd is not None:
                os.close(self.ready_fd)
                self.ready_fd = None

    def fail(self, why: str) -> ClusterError:
        tail = ""
        with contextlib.suppress(OSError):
            lines = [line for line in self.log_file.read_text(errors="replace").splitlines() if line.strip()]
            if lines:
                tail = f" (last log line: {lines[-1].strip()})"
        return ClusterError(f"{self.name} {why}; see {self.log_file}{tail}")

    def stop(self, timeout: float = 20.0) -> None:
        if self.alive:
            assert self.process is not None
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.pid_file.unlink(missing_ok=True)

    def kill(self) -> None:
        """SIGKILL, as a crash would (the fault tests use this)."""
        if self.alive:
            assert self.process is not None
            self.process.kill()
            self.process.wait()

    def restart(self, timeout: float = 60.0) -> None:
        self.stop()
        self.start(timeout)


def install_crds(client: KubeClient) -> list[str]:
    """Apply every CRD trainctl serves (create, or replace when it exists); their names.

    The CRDs are generated from the installed API models, the same source
    ``manifests/crds`` is generated from, so an installed wheel needs no checkout.
    """
    installed: list[str] = []
    for file_name, crd in api_crd.crds().items():
        name = crd["metadata"]["name"]
        try:
            if client.create(CRDS, crd).existed:
                current = client.get(CRDS, None, name)
                crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                client.replace(CRDS, crd)
        except ApiError as exc:
            raise ClusterError(f"installing CRD {name} ({file_name}): {exc.message}") from None
        installed.append(name)
    return installed


def _wait_pipe(component: Component, timeout: float) -> None:
    """The kubelet writes one line to its --ready-fd once it runs; EOF first means it died."""
    assert component.ready_fd is not None
    readable, _, _ = select.select([component.ready_fd], [], [], timeout)
    if not readable:
        raise component.fail(f"not ready after {timeout:g}s")
    if not os.read(component.ready_fd, 64):
        component.process and component.process.wait()
        raise component.fail("exited during start-up")


def _wait_started(component: Component, timeout: float) -> None:
    """The controller has no readiness signal of its own here; a fast crash is still caught."""
    assert component.process is not None
    with contextlib.suppress(subprocess.TimeoutExpired):
        component.process.wait(min(timeout, 0.5))
        raise component.fail(f"exited with code {component.process.returncode} during start-up")


class LocalCluster:
    """An embedded cluster on ``directory``; a context manager that starts and stops it all.

    ``die_with_supervisor``: every component gets SIGTERM when this process dies, even by
    SIGKILL (the foreground ``trainctl local up``; components must then be started from the
    main thread). Without it a component outlives a crashed supervisor until ``down``."""

    def __init__(self, directory: os.PathLike[str] | str = DEFAULT_DIR, gpus: int = 0, npus: int = 0,
                 controller: bool = True, workdir: Optional[os.PathLike[str] | str] = None,
                 node_name: str = DEFAULT_NODE_NAME, backoff_base: Optional[float] = None,
                 port: int = 0, controller_args: Optional[list[str]] = None, nodes: int = 1,
                 node_names: Optional[list[str]] = None, node_cpu: Optional[str] = None,
                 node_memory: Optional[str] = None, lease_renew_interval: Optional[float] = None,
                 node_monitor_grace_period: Optional[str] = None, hpa_sync_period: Optional[str] = None,
                 controlplane_args: Optional[list[str]] = None, resource_enforcer: Optional[str] = None,
                 metrics_interval: Optional[float] = None, die_with_supervisor: bool = False,
                 hollow_nodes: int = 0, hollow_node_args: Optional[list[str]] = None,
                 network: str = isolation.AUTO, sandbox: Optional[str] = None) -> None:
        self.directory = Path(directory).expanduser().resolve()
        self.gpus, self.npus = gpus, npus
        names = node_names or ([node_name] if nodes == 1 else None)
        # Hollow nodes only (nodes=0): no kubelet runs pod processes.
        self.nodes = [] if nodes == 0 and hollow_nodes and not names else \
            machines.node_specs(len(names) if names else nodes, names, node_cpu, node_memory)
        self.node_name = self.nodes[0].name if self.nodes else node_name
        self.workdir = Path(workdir).resolve() if workdir else Path.cwd()
        self.backoff_base = backoff_base
        self.sandbox = sandbox  # the kubelets' --sandbox; None: theirs ($TRAINCTL_POD_SANDBOX, else auto)
        if lease_renew_interval is None and node_monitor_grace_period:
            # As the real kubelet renews every quarter of a lease that lasts the grace period:
            # renewing only as often as the grace lets a healthy node go Unknown between beats.
            lease_renew_interval = positive_duration(node_monitor_grace_period) / 4
        self.lease_renew_interval = lease_renew_interval
        self.resource_enforcer, self.metrics_interval = resource_enforcer, metrics_interval
        # The API server's port: the one asked for, else the one it first chose. Every restart
        # passes it, however the server stopped (a clean exit removes its port file), so the
        # kubeconfig the kubelet and the controller hold stays valid for the cluster's life.
        self.port = port
        python = sys.executable
        self.apiserver = Component("apiserver", self.directory, self._apiserver_argv, self._apiserver_ready)
        self.scheduler = Component("scheduler", self.directory, lambda: [
            python, "-m", "trainctl.cluster.scheduler", "--kubeconfig", str(self.kubeconfig)], _wait_started)
        # The pod network: asked for ("auto" decides at start), then chosen (network_mode).
        self.network_request = network
        self.network_mode: Optional[str] = None
        self.network_reason = ""
        self.network = Component("network", self.directory, self._network_argv, _wait_pipe,
                                 env={**os.environ, "PATH": isolation.tool_path()})
        self.kubelets = {spec.name: self._kubelet(spec) for spec in self.nodes}
        # kubemark's hollow nodes: one process registers them all and runs no pod processes.
        self.hollow: Optional[Component] = None
        if hollow_nodes:
            self.hollow = Component("kubelet-hollow", self.directory, lambda: [
                python, "-m", "trainctl.cluster.kubelet.hollow", "--kubeconfig", str(self.kubeconfig),
                "--nodes", str(hollow_nodes),
                *(["--node-lease-renew-interval", str(self.lease_renew_interval)] if self.lease_renew_interval else []),
                *(hollow_node_args or [])], _wait_pipe)
        first = self.kubelets.get(self.node_name) or self.hollow
        assert first is not None, "a cluster needs a node"
        self.kubelet: Component = first
        # kube-controller-manager's node lifecycle and HPA controllers.
        self.controlplane = Component("controlplane", self.directory, lambda: [
            python, "-m", "trainctl.cluster.controlplane", "--kubeconfig", str(self.kubeconfig),
            *(["--node-monitor-grace-period", node_monitor_grace_period] if node_monitor_grace_period else []),
            *(["--hpa-sync-period", hpa_sync_period] if hpa_sync_period else []),
            *(controlplane_args or [])], _wait_started)
        self.controller: Optional[Component] = None
        if controller:
            self.controller = Component("controller", self.directory, lambda: [
                python, "-m", "trainctl.cli.main", "controller", "--kubeconfig", str(self.kubeconfig),
                "--metrics-port", "0", "--health-port", "0", "--bind-address", "127.0.0.1",
                *(controller_args or [])], _wait_started)
        for component in (*self.components, self.network):
            component.die_with_parent = die_with_supervisor
        self._lock_file: Optional[IO[str]] = None

    # --- paths and clients ----------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    def _kubelet(self, spec: machines.NodeSpec) -> Component:
        # One node: the cluster's whole pod range; several: a slice each, never overlapping.
        index = [s.name for s in self.nodes].index(spec.name)
        try:
            pod_cidr = ["--pod-cidr", node_pod_cidr(self.directory, index)] if len(self.nodes) > 1 else []
            isolated_cidr = ["--pod-cidr", isolation.node_cidr(index)]
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        return Component(spec.component, self.directory, lambda: [
            sys.executable, "-m", "trainctl.cluster.kubelet", "--dir", str(self.directory),
            # The node's own credentials (made once the API server has made the CA), never the admin's.
            "--kubeconfig", str(node_credentials.bootstrap(self.directory, spec.name, HOST_IP)),
            "--node-name", spec.name, "--cpu", spec.cpu, "--memory", spec.memory,
            "--gpus", str(self.gpus), "--npus", str(self.npus), "--workdir", str(self.workdir),
            *(isolated_cidr if self.isolated else pod_cidr), "--network", self.network_mode or isolation.SHARED,
            *(["--backoff-base", str(self.backoff_base)] if self.backoff_base is not None else []),
            *(["--sandbox", self.sandbox] if self.sandbox else []),
            *(["--node-lease-renew-interval", str(self.lease_renew_interval)] if self.lease_renew_interval else []),
            *(["--resource-enforcer", self.resource_enforcer] if self.resource_enforcer else []),
            *(["--metrics-interval", str(self.metrics_interval)] if self.metrics_interval is not None else [])],
            _wait_pipe)

    @property
    def isolated(self) -> bool:
        return self.network_mode == isolation.ISOLATED

    @property
    def components(self) -> list[Component]:
        network = self.network if self.isolated else None
        return [c for c in (self.apiserver, network, self.scheduler, *self.kubelets.values(), self.hollow,
                            self.controlplane, self.controller) if c is not None]

    def _network_argv(self) -> list[str]:
        # One unprivileged user namespace for the whole cluster network (see network.router).
        return ["unshare", "-U", "-r", "-n", "-m", "--", sys.executable, "-m", "trainctl.cluster.network",
                "--dir", str(self.directory), "--service-cidr", isolation.SERVICE_CIDR]

    def choose_network(self) -> str:
        """Decide the pod network (once): the one asked for, or isolated where the machine
        allows it; written to DIR/run/network for ``status``."""
        if self.network_mode is None:
            try:
                self.network_mode, self.network_reason = isolation.choose(self.network_request)
            except ValueError as exc:
                raise ClusterError(str(exc)) from None
            path = self.directory / NETWORK_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{self.network_mode}\n{self.network_reason}\n")
        return self.network_mode

    # --- node faults (trainctl local node ...): this cluster is their NodeHost --------------
    def fault(self, kind: str, node: str, **options: Any) -> None:
        """Apply the registered node fault ``kind`` (:data:`.faults.NODE_FAULTS`) to ``node``,
        with its flags' values (``cluster.fault("degrade", node, cpu=20)``)."""
        faults.NODE_FAULTS[kind](self, node, options)

    def pod_fault(self, kind: str, namespace: str, pod: str) -> None:
        """Apply the pod fault ``kind`` (:data:`.faults.POD_FAULTS`: freeze, thaw) to a pod."""
        faults.POD_FAULTS[kind](self.directory, namespace, pod)

    def kill_node(self, name: str) -> None:
        self.fault("kill", name)

    def freeze_node(self, name: str) -> None:
        self.fault("freeze", name)

    def thaw_node(self, name: str) -> None:
        self.fault("thaw", name)

    def partition_node(self, name: str) -> None:
        self.fault("partition", name)

    def heal_node(self, name: str) -> None:
        self.fault("heal", name)

    def start_node(self, name: str) -> None:
        """A killed node boots again: a new kubelet, no pod processes."""
        self.fault("start", name)

    def check_boot(self, node: str) -> None:
        """This process is the supervisor: a node can always boot."""

    def boot(self, node: str) -> None:
        kubelet = self.kubelets[node]
        if kubelet.alive:
            kubelet.kill()
        kubelet.start()

    def reap(self, node: str) -> None:
        self.kubelets[node].kill()

    @property
    def url(self) -> str:
        return self.client().host

    def client(self) -> KubeClient:
        return KubeClient.from_kubeconfig(str(self.kubeconfig), qps=0)

    def _apiserver_argv(self) -> list[str]:
        (self.directory / PORT_FILE).unlink(missing_ok=True)  # it reappears once the server serves
        service_cidr = isolation.SERVICE_CIDR if self.isolated else cluster_ranges(self.directory)[1]
        return [sys.executable, "-m", "trainctl.cluster.apiserver", "--dir", str(self.directory),
                "--port", str(self.port), "--service-cidr", service_cidr]

    def _apiserver_ready(self, component: Component, timeout: float) -> None:
        port_file = self.directory / PORT_FILE
        ready = wait_for_port_file(port_file, lambda: component.alive, timeout)
        if ready is False:
            raise component.fail("exited during start-up")
        if ready is None:
            raise component.fail(f"not ready after {timeout:g}s")
        if not self.port:
            self.port = int(port_file.read_text().strip())

    # --- lifecycle ------------------------------------------------------------------------
    def lock(self, leftovers_ok: bool = False) -> None:
        """Take DIR's supervisor lock, or say who holds it. Unless ``leftovers_ok`` (``down``,
        which is there to stop them), refuse a directory where processes a dead supervisor
        started still run: starting would kill them, and they may be training."""
        try:
            (self.directory / "run").mkdir(parents=True, exist_ok=True)
            lock_file = open(self.directory / "run" / "supervisor.lock", "a+")
        except OSError as exc:
            raise ClusterError(f"cannot use {self.directory} for the local cluster: {exc.strerror or exc}") from None
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            pid = read_pid_file(self.directory / SUPERVISOR_PID)
            who = f" (supervisor pid {pid})" if pid else ""
            raise ClusterError(f"a local cluster is already running in {self.directory}{who}; "
                               f"stop it with: trainctl local down --dir {self.directory}") from None
        leftovers = find_leftovers(self.directory)
        if leftovers and not leftovers_ok:
            lock_file.close()
            raise ClusterError(leftovers.refusal(self.directory))
        self._lock_file = lock_file
        write_pid_file(self.directory / SUPERVISOR_PID, os.getpid())

    def start(self, timeout: float = 60.0, on_step: Callable[[str], None] = lambda _msg: None) -> "LocalCluster":
        """Start every component and wait until each is ready; raise ClusterError otherwise."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            os.chmod(self.directory, 0o700)
        except OSError as exc:
            raise ClusterError(f"cannot use {self.directory} for the local cluster: {exc.strerror or exc}") from None
        if self._lock_file is None:
            self.lock()
        try:
            cleanup_leftovers(self.directory)
            on_step("choosing the pod network")
            mode = self.choose_network()
            on_step(f"pod network: {isolation.describe(mode, self.network_reason)}")
            on_step("starting the API server")
            self.apiserver.start(timeout)
            if self.isolated:
                on_step("building the pod network")
                self.network.start(timeout)
            on_step("installing CRDs, starting the scheduler and the kubelets")
            self._remove_nodes_not_started()
            machines.write_nodes(self.directory, self.nodes)
            for spec in self.nodes:
                machines.set_state(self.directory, spec.name, "")
                faults.forget_degradation(self.directory, spec.name)
            kubelets = [*self.kubelets.values(), *([self.hollow] if self.hollow else [])]
            for kubelet in kubelets:
                kubelet.launch()  # their start-up overlaps the CRD installation
            self.scheduler.start(timeout)
            self.install_crds()
            for kubelet in kubelets:
                kubelet.wait_ready(timeout)
            on_step("starting the control plane")
            self.controlplane.start(timeout)
            if self.controller is not None:
                on_step("starting the controller")
                self.controller.start(timeout)
        except ClusterError:
            self.stop()
            raise
        except Exception as exc:  # OSError, an API error while installing CRDs, ...
            self.stop()
            raise ClusterError(f"cannot start the local cluster in {self.directory}: {exc}") from exc
        except BaseException:
            self.stop()
            raise
        return self

    def _remove_nodes_not_started(self) -> None:
        """The nodes the last run started and this one does not are gone: remove them (before
        the scheduler can bind a pod to one), failing the pods they held."""
        names = {spec.name for spec in self.nodes}
        gone = sorted({spec.name for spec in machines.read_nodes(self.directory)} - names)
        if gone:
            client = self.client()
            try:
                node_removal.remove_nodes(client, gone)
            finally:
                client.close()
            for name in gone:
                machines.set_state(self.directory, name, "")
                faults.forget_degradation(self.directory, name)

    def install_crds(self) -> list[str]:
        """Apply every CRD trainctl serves (create, or replace when it exists)."""
        return install_crds(self.client())

    def stop(self) -> None:
        """Controller, kubelets (which stop every pod), scheduler, then the API server; then sweep."""
        for spec in self.nodes:  # a frozen kubelet could not stop
            faults.thaw_frozen(self.directory, spec.name)
        for component in reversed(self.components):
            component.stop()
        cleanup_leftovers(self.directory)
        if self._lock_file is not None:
            (self.directory / SUPERVISOR_PID).unlink(missing_ok=True)
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


# --- what a dead supervisor left ----------------------------------------------------------
def _component_pid_files(directory: Path) -> list[Path]:
    return [path for path in sorted((directory / "run").glob("*.pid")) if path.name != SUPERVISOR_PID.name]


def _pod_registries(directory: Path) -> list[ProcessRegistry]:
    """Every node's records of its pods' process groups (``kubelet/<node>/processes``)."""
    return [ProcessRegistry(processes_dir(directory, path.parent.name))
            for path in sorted((directory / "kubelet").glob("*/processes"))]


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


@dataclass(frozen=True)
class Leftovers:
    """The processes of a cluster that still run: components (name to pid, each checked to
    be the process its pid file names) and pod process groups still alive."""

    components: dict[str, int]
    pod_processes: int

    def __bool__(self) -> bool:
        return bool(self.components or self.pod_processes)

    def summary(self) -> str:
        """``2 components and 1 pod process group``."""
        return " and ".join(_count(n, noun) for n, noun in ((len(self.components), "component"),
                                                             (self.pod_processes, "pod process group")) if n)

    def describe(self) -> str:
        """``apiserver (pid 12), kubelet (pid 13), 2 pod process groups``."""
        parts = [f"{name} (pid {pid})" for name, pid in self.components.items()]
        if self.pod_processes:
            parts.append(_count(self.pod_processes, "pod process group"))
        return ", ".join(parts)

    def refusal(self, directory: Path) -> str:
        """Why a new supervisor does not start on ``directory``, and what to do."""
        return (f"the supervisor of the local cluster in {directory} is not running, but what it started still "
                f"runs: {self.describe()}; stop it with: trainctl local down --dir {directory}")


def find_leftovers(directory: Path) -> Leftovers:
    """What of the cluster in ``directory`` runs, whether or not its supervisor does."""
    components = {path.stem: pid for path in _component_pid_files(directory)
                  if (pid := read_pid_file(path)) is not None}
    pods = sum(record.alive() for registry in _pod_registries(directory) for record in registry.records())
    return Leftovers(components, pods)


def cleanup_leftovers(directory: Path) -> list[str]:
    """Kill component processes and pod process groups that a crashed supervisor left.

    Returns what was killed, for the user: component names, then ``"N pod process groups"``.
    """
    killed: list[str] = []
    for pid_file in _component_pid_files(directory):
        pid = signal_pid_file(pid_file, signal.SIGKILL)
        if pid is not None:
            wait_pid_exit(pid, 5)
            killed.append(pid_file.stem)
        pid_file.unlink(missing_ok=True)
    pods = [record for registry in _pod_registries(directory) for record in registry.kill_leftovers()]
    for record in pods:  # gone when this returns, and what left the group too
        for pid in (record.pid, *(marked_processes(record.container_id) if record.container_id else ())):
            wait_pid_exit(pid, 5)
    with contextlib.suppress(OSError):  # the cgroups of every node of this cluster
        enforcer.remove_cluster(cluster=enforcer.cluster_key(directory))
    if pods:
        killed.append(_count(len(pods), "pod process group"))
    return killed
