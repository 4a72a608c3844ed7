"""``trainctl local up|down|status|node`` (and the hidden ``trainctl local kubelet``).

``up`` runs :class:`~trainctl.controller.local.cluster.LocalCluster` in the foreground as the
supervisor: it restarts a component that crashes and stops everything on Ctrl-C or
SIGTERM. ``--detach`` starts that same supervisor as a background process and returns once
the cluster is ready. ``down`` stops the supervisor (or, if it died, whatever it left) and
every pod process; ``status`` says what runs; ``node kill|freeze|thaw|start NAME`` breaks and
mends one node (:mod:`.nodes`). ``node start`` asks the supervisor (SIGUSR1) to boot a
killed node's kubelet again; the supervisor never restarts a kubelet the user killed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

SUPERVISOR_PID = Path("run") / "supervisor.pid"
# A component that crashes more often than this is not restarted again.
MAX_RESTARTS, RESTART_WINDOW_SECONDS = 5, 60.0


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


# Flags ``up`` passes on to a component as text are checked here with that component's own
# parser: a bad value is an error now, not a component that crashes after "ready".
def _duration(text: str) -> str:
    from trainctl.controller.commands.run import parse_duration

    parse_duration(text)
    return text


def _duration_or_never(text: str) -> str:
    from trainctl.controller.kube.options import duration_or_never

    duration_or_never(text)
    return text


# kube-controller-manager's HPA settings ``up`` hands to the control plane under their names.
_HPA_FLAGS = (
    ("--horizontal-pod-autoscaler-cpu-initialization-period", "--hpa-cpu-initialization-period",
     "hpa_cpu_initialization_period", "how long after a pod starts its CPU does not count for the HPA (default 5m)"),
    ("--horizontal-pod-autoscaler-initial-readiness-delay", "--hpa-initial-readiness-delay",
     "hpa_initial_readiness_delay", "after that, an unready pod whose readiness changed this soon after its start "
     "has never been ready and its CPU does not count (default 30s)"),
    ("--horizontal-pod-autoscaler-downscale-stabilization", "--hpa-downscale-stabilization",
     "hpa_downscale_stabilization", "an HPA scales down to the highest size it recommended within this window, and keeps "
     "a size set with kubectl scale for as long unless load asks for more (default 5m)"),
)


def _controlplane_flags(args: argparse.Namespace) -> list[str]:
    return [item for flag, _, dest, _ in _HPA_FLAGS if getattr(args, dest) for item in (flag, getattr(args, dest))]


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {value:g}")
    return value


def _default_dir() -> str:
    from .cluster import DEFAULT_DIR

    return str(DEFAULT_DIR)


def register(subparsers: argparse._SubParsersAction) -> None:
    local = subparsers.add_parser("local", help="run an embedded single-machine cluster",
                                  description="An embedded Kubernetes-compatible cluster on this machine: "
                                              "API server, kubelet (pods are local processes) and controller.")
    commands = local.add_subparsers(dest="local_command", metavar="{up,down,status,node}")
    local.set_defaults(func=lambda _args: local.print_help() or 2)
    dir_help = "cluster directory (default: ~/.trainctl/local)"

    up = commands.add_parser("up", help="start the cluster", description="Start the API server, the kubelet and the "
                             "controller on DIR, wait until they are ready and print how to use the cluster.")
    up.add_argument("--dir", default=None, help=dir_help)
    up.add_argument("--detach", action="store_true", help="return once ready, leaving the cluster running in the background")
    up.add_argument("--gpus", type=_non_negative, default=0, metavar="N", help="advertise N fake nvidia.com/gpu devices")
    up.add_argument("--npus", type=_non_negative, default=0, metavar="N", help="advertise N fake huawei.com/Ascend910 devices")
    up.add_argument("--no-controller", action="store_true", help="do not start trainctl's controller (run your own)")
    up.add_argument("--nodes", type=_positive_int, default=1, metavar="N", help="start N nodes, a kubelet each (default 1)")
    up.add_argument("--node-names", default=None, metavar="A,B,..", help="the nodes' names (default trainctl-local, "
                    "trainctl-local-2, ...); sets the number of nodes")
    up.add_argument("--node-cpu", default=None, metavar="Q",
                    help="each node's allocatable CPU (default: the machine's, split evenly)")
    up.add_argument("--node-memory", default=None, metavar="Q",
                    help="each node's allocatable memory (default: the machine's, split evenly)")
    up.add_argument("--workdir", default=None, help="directory pods run in when their workingDir does not exist "
                    "here (default: the current directory)")
    up.add_argument("--node-lost-grace", default=None, metavar="DURATION", type=_duration_or_never,
                    help="the controller's --node-lost-grace: replace a job's pods whose node is not Ready "
                         "for this long (default 30s)")
    up.add_argument("--node-monitor-grace-period", default=None, metavar="DURATION", type=_duration,
                    help="a node whose Lease is not renewed for this long becomes Ready=Unknown (default 40s)")
    up.add_argument("--hpa-sync-period", "--horizontal-pod-autoscaler-sync-period", dest="hpa_sync_period", default=None,
                    metavar="DURATION", type=_duration,
                    help="how often the HorizontalPodAutoscaler controller syncs each HPA (default 15s)")
    for flag, short, dest, text in _HPA_FLAGS:
        up.add_argument(flag, short, dest=dest, default=None, metavar="DURATION", type=_duration, help=text)
    up.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    up.set_defaults(func=run_up)

    down = commands.add_parser("down", help="stop the cluster and every pod process")
    down.add_argument("--dir", default=None, help=dir_help)
    down.set_defaults(func=run_down)

    status = commands.add_parser("status", help="say what runs in the cluster")
    status.add_argument("--dir", default=None, help=dir_help)
    status.set_defaults(func=run_status)

    node = commands.add_parser("node", help="break or mend a node: kill, freeze, thaw, start",
                               description="Node failures as a person would cause them.")
    actions = node.add_subparsers(dest="node_command", metavar="{kill,freeze,thaw,start}")
    node.set_defaults(func=lambda _args: node.print_help() or 2)
    for action, text in (("kill", "the machine dies: its kubelet and every process of its pods get SIGKILL"),
                         ("freeze", "the machine hangs: its kubelet and its pods' processes are stopped (SIGSTOP)"),
                         ("thaw", "a frozen machine resumes (SIGCONT)"),
                         ("start", "a killed machine boots again: its kubelet comes back, its pods' processes do not")):
        command = actions.add_parser(action, help=text, description=text)
        command.add_argument("name", help="node name (see trainctl local status)")
        command.add_argument("--dir", default=None, help=dir_help)
        command.set_defaults(func=run_node, node_command=action)

    kubelet = commands.add_parser("kubelet")  # hidden: `up` starts it
    _kubelet_arguments(kubelet)
    kubelet.set_defaults(func=run_kubelet)


def _kubelet_arguments(parser: argparse.ArgumentParser) -> None:
    from .kubelet import DEFAULT_NODE_NAME

    parser.add_argument("--dir", required=True, help="cluster directory")
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig (default: DIR/kubeconfig)")
    parser.add_argument("--node-name", default=DEFAULT_NODE_NAME)
    parser.add_argument("--gpus", type=_non_negative, default=0)
    parser.add_argument("--npus", type=_non_negative, default=0)
    parser.add_argument("--cpu", default=None, help="the node's allocatable CPU (default: the machine's)")
    parser.add_argument("--memory", default=None, help="the node's allocatable memory (default: the machine's)")
    parser.add_argument("--workdir", default=None, help="default working directory of pods (default: cwd)")
    parser.add_argument("--pod-cidr", default=None, help="pod addresses (default: DIR's own slice of 127.128.0.0/10)")
    parser.add_argument("--backoff-base", type=_positive_float, default=10.0,
                        help="first CrashLoopBackOff delay in seconds (doubles up to 5 minutes)")
    parser.add_argument("--node-lease-renew-interval", type=_positive_float, default=10.0, metavar="SECONDS",
                        help="how often the node's Lease is renewed (Kubernetes: 10)")
    parser.add_argument("--resource-enforcer", choices=("cgroup-v2", "cgroup-v1", "polling"), default=None,
                        help="how limits.memory and limits.cpu are enforced (default: the first that works here)")
    parser.add_argument("--metrics-interval", type=_positive_float, default=15.0,
                        help="seconds between publications of the node's and its pods' metrics (default 15)")
    parser.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")


def _say(message: str) -> None:
    print(f"trainctl local: {message}", file=sys.stderr)


# --- kubelet -------------------------------------------------------------------------------
def run_kubelet(args: argparse.Namespace) -> int:
    from .kubelet import Kubelet, KubeletConfig

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Connection retries while the API server restarts are expected; the informers relist.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    directory = Path(args.dir).expanduser().resolve()
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else directory / "kubeconfig"
    if not kubeconfig.exists():
        _say(f"no kubeconfig at {kubeconfig}: start the API server first (trainctl local up)")
        return 1
    config = KubeletConfig(directory=directory, kubeconfig=kubeconfig, node_name=args.node_name, gpus=args.gpus,
                           npus=args.npus, workdir=Path(args.workdir).resolve() if args.workdir else Path.cwd(),
                           backoff_base=args.backoff_base, pod_cidr=args.pod_cidr, cpu=args.cpu, memory=args.memory,
                           heartbeat_seconds=args.node_lease_renew_interval,
                           resource_enforcer=args.resource_enforcer, metrics_interval=args.metrics_interval)

    def on_signal(_signum: int, _frame: Any) -> None:
        raise _Shutdown()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    kubelet: Optional[Kubelet] = None
    try:
        try:
            kubelet = node = Kubelet(config)
            signal.signal(signal.SIGCONT, lambda _signum, _frame: node.thawed())
            kubelet.start()
        except _Shutdown:
            raise
        except Exception as exc:  # a bad kubeconfig, an unreachable or refusing API server
            _say(f"kubelet cannot start: {' '.join(str(exc).split())}")
            return 1
        logging.getLogger("trainctl.kubelet").info("node %s ready", config.node_name)
        if args.ready_fd is not None:
            with contextlib.suppress(OSError):
                os.write(args.ready_fd, b"ready\n")
                os.close(args.ready_fd)
        _wait_for_signals()
    except _Shutdown:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if kubelet is not None:
        kubelet.stop()
    return 0


def _wait_for_signals() -> None:
    """Run the main thread's signal handlers as signals come, for ever (until one raises).

    Not ``signal.pause()``: the kernel may deliver a signal to any of the kubelet's threads,
    and then the main thread would sleep on with the handler pending (a thawed node's SIGCONT
    must reach :meth:`Kubelet.thawed` at once). The wakeup fd is written whichever thread the
    signal hit, and the handlers run as soon as the main thread wakes."""
    readable, writable = os.pipe()
    os.set_blocking(writable, False)
    signal.set_wakeup_fd(writable)
    while True:
        select.select([readable], [], [])
        os.read(readable, 512)


def main_kubelet(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainctl.controller.local.kubelet")
    _kubelet_arguments(parser)
    return run_kubelet(parser.parse_args(argv))


class _Shutdown(Exception):
    """SIGTERM or SIGINT arrived."""


# --- up ------------------------------------------------------------------------------------
def _usage(cluster: Any) -> str:
    names = ", ".join(spec.name for spec in cluster.nodes)
    lines = [f"Local cluster is ready in {cluster.directory} (API server {cluster.url}, "
             f"node{'s' if len(cluster.nodes) > 1 else ''} {names}).",
             "Use it with:",
             f"  export KUBECONFIG={cluster.kubeconfig}",
             "  kubectl get nodes",
             "  trainctl run -f samples/<job>.yaml",
             f"Stop it with: trainctl local down --dir {cluster.directory}"]
    return "\n".join(lines)


def run_up(args: argparse.Namespace) -> int:
    from .cluster import ClusterError, LocalCluster
    from .nodes import NodeError

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    if args.detach:
        return _up_detached(args, directory)

    try:
        cluster = LocalCluster(directory, gpus=args.gpus, npus=args.npus, controller=not args.no_controller,
                               workdir=args.workdir, nodes=args.nodes, node_names=_names(args.node_names),
                               node_cpu=args.node_cpu, node_memory=args.node_memory,
                               node_monitor_grace_period=args.node_monitor_grace_period,
                               hpa_sync_period=args.hpa_sync_period, controlplane_args=_controlplane_flags(args),
                               controller_args=["--node-lost-grace", args.node_lost_grace] if args.node_lost_grace else None)
        cluster.lock()
    except (ClusterError, NodeError, OSError) as exc:
        _say(str(exc))
        return 1

    def on_signal(_signum: int, _frame: Any) -> None:
        raise _Shutdown()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        _start_with_spinner(cluster)
        print(_usage(cluster), flush=True)
        if args.ready_fd is not None:
            with contextlib.suppress(OSError):
                os.write(args.ready_fd, b"ready\n")
                os.close(args.ready_fd)
        return _supervise(cluster)
    except _Shutdown:
        _say("stopping")
        return 0
    except ClusterError as exc:
        _say(str(exc))
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cluster.stop()


def _start_with_spinner(cluster: Any) -> None:
    from rich.console import Console

    console = Console(stderr=True)
    if console.is_terminal:
        with console.status("starting the local cluster") as status:
            cluster.start(on_step=lambda step: status.update(step))
    else:
        cluster.start()


def _names(text: Optional[str]) -> Optional[list[str]]:
    return [name.strip() for name in text.split(",")] if text else None


class _Wake(Exception):
    """SIGUSR1 while waiting: ``trainctl local node start`` asked for a node to boot."""


def _boot_started_nodes(cluster: Any) -> None:
    """Start the kubelet of every node no longer marked killed whose kubelet is not running."""
    from . import nodes
    from .cluster import ClusterError

    for spec in cluster.nodes:
        kubelet = cluster.kubelets[spec.name]
        if not kubelet.alive and nodes.node_state(cluster.directory, spec.name) != nodes.KILLED:
            _say(f"node {spec.name} boots")
            try:
                kubelet.start()
            except ClusterError as exc:
                _say(str(exc))


def _supervise(cluster: Any) -> int:
    """Wait for a component to exit (no polling: waitid on our children) and restart it,
    unless it is the kubelet of a node the user killed (``trainctl local node kill``)."""
    from . import nodes
    from .cluster import ClusterError

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
        except _Wake:
            wake["waiting"] = wake["pending"] = False
            _boot_started_nodes(cluster)
            continue
        wake["waiting"] = False
        component = next((c for c in cluster.components if c.pid == info.si_pid), None)
        if component is None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(info.si_pid, 0)
            continue
        code = component.process.wait()
        node = next((spec.name for spec in cluster.nodes if spec.component == component.name), None)
        if node is not None and nodes.node_state(cluster.directory, node) == nodes.KILLED:
            _say(f"node {node} was killed; start it again with: trainctl local node start {node}")
            continue
        # A restart that fails (e.g. the API server cannot listen yet) is one more crash, not
        # the end of the cluster: try again until the crash budget is spent.
        while True:
            now = time.monotonic()
            recent = [t for t in crashes.get(component.name, []) if now - t < RESTART_WINDOW_SECONDS] + [now]
            crashes[component.name] = recent
            if len(recent) > MAX_RESTARTS:
                _say(f"{component.name} exited {len(recent)} times within {RESTART_WINDOW_SECONDS:g}s "
                     f"(last code {code}); giving up, see {component.log_file}")
                return 1
            _say(f"{component.name} exited with code {code}; restarting it")
            try:
                component.start()
                break
            except ClusterError as exc:
                _say(str(exc))
                component.kill()
                code = component.process.returncode if component.process else None


def _up_detached(args: argparse.Namespace, directory: Path) -> int:
    from .cluster import read_pid_file

    running = read_pid_file(directory / SUPERVISOR_PID)
    if running is not None:
        _say(f"a local cluster is already running in {directory} (supervisor pid {running}); "
             f"stop it with: trainctl local down --dir {directory}")
        return 1
    try:
        (directory / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _say(f"cannot use {directory} for the local cluster: {exc.strerror or exc}")
        return 1
    read_fd, write_fd = os.pipe()
    argv = [sys.executable, "-m", "trainctl.controller.cli", "local", "up", "--dir", str(directory), "--gpus", str(args.gpus),
            "--npus", str(args.npus), "--ready-fd", str(write_fd), "--nodes", str(args.nodes)]
    for flag, value in (("--node-names", args.node_names), ("--node-cpu", args.node_cpu), ("--node-memory", args.node_memory)):
        if value:
            argv += [flag, value]
    if args.no_controller:
        argv.append("--no-controller")
    for flag, value in (("--node-monitor-grace-period", args.node_monitor_grace_period),
                        ("--hpa-sync-period", args.hpa_sync_period),
                        ("--node-lost-grace", args.node_lost_grace)):
        if value:
            argv += [flag, value]
    argv += _controlplane_flags(args)
    argv += ["--workdir", str(Path(args.workdir).resolve() if args.workdir else Path.cwd())]
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
        _say(last[0].removeprefix("trainctl local: ") if last else f"the supervisor exited with code {code}; see {log_path}")
        return 1
    from .cluster import LocalCluster

    cluster = LocalCluster(directory, controller=False, nodes=args.nodes, node_names=_names(args.node_names))
    print(_usage(cluster))
    print(f"Supervisor pid {process.pid}; logs in {directory / 'logs'}")
    return 0


# --- down ----------------------------------------------------------------------------------
def run_down(args: argparse.Namespace) -> int:
    from .cluster import ClusterError, LocalCluster, cleanup_leftovers, signal_pid_file, wait_pid_exit

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    if not directory.is_dir():
        _say(f"no local cluster in {directory}")
        return 1
    pid = signal_pid_file(directory / SUPERVISOR_PID, signal.SIGTERM)
    if pid is not None and not wait_pid_exit(pid, 60):
        _say(f"the supervisor (pid {pid}) did not stop within 60s; killing it")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_pid_exit(pid, 10)
    # Whatever is left (a killed supervisor's components, pod processes) goes too.
    cluster = LocalCluster(directory, controller=False)
    try:
        cluster.lock()
    except ClusterError as exc:
        _say(str(exc))
        return 1
    try:
        leftovers = cleanup_leftovers(directory)
    finally:
        cluster.stop()
    if pid is not None:
        print(f"Local cluster in {directory} stopped.")
    elif leftovers:
        print(f"Local cluster in {directory} stopped (its supervisor was gone; stopped what it left: {', '.join(leftovers)}).")
    else:
        print(f"No local cluster was running in {directory}.")
    return 0


# --- node ----------------------------------------------------------------------------------
def run_node(args: argparse.Namespace) -> int:
    from . import nodes
    from .cluster import read_pid_file

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    try:
        nodes.find_node(directory, args.name)
        if args.node_command == "kill":
            nodes.kill_node(directory, args.name)
            print(f"Node {args.name} killed: its kubelet and its pods' processes are gone.")
        elif args.node_command == "freeze":
            nodes.freeze_node(directory, args.name)
            print(f"Node {args.name} frozen: its kubelet and its pods' processes are stopped.")
        elif args.node_command == "thaw":
            nodes.thaw_node(directory, args.name)
            print(f"Node {args.name} thawed.")
        else:
            supervisor = read_pid_file(directory / SUPERVISOR_PID)
            if supervisor is None:
                raise nodes.NodeError(f"no local cluster is running in {directory}")
            if nodes.node_state(directory, args.name) == nodes.FROZEN:
                nodes.thaw_node(directory, args.name)
            nodes.set_state(directory, args.name, "")
            os.kill(supervisor, signal.SIGUSR1)
            print(f"Node {args.name} is booting: its kubelet starts again (see trainctl local status).")
    except nodes.NodeError as exc:
        _say(str(exc))
        return 1
    return 0


# --- status --------------------------------------------------------------------------------
def run_status(args: argparse.Namespace) -> int:
    from trainctl.controller.kube.client import ApiError, KubeClient
    from trainctl.controller.kube.resources import NODES, PODS

    from . import nodes as local_nodes
    from .cluster import read_pid_file

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    supervisor = read_pid_file(directory / SUPERVISOR_PID)
    if supervisor is None:
        print(f"No local cluster is running in {directory}.")
        return 1
    print(f"Local cluster in {directory}: supervisor pid {supervisor}")
    specs = local_nodes.read_nodes(directory)
    for name in ("apiserver", "scheduler", *(spec.component for spec in specs), "controlplane", "controller"):
        pid = read_pid_file(directory / "run" / f"{name}.pid")
        print(f"  {name:<11} {'running, pid ' + str(pid) if pid else 'not running'}")
    machine = {spec.name: local_nodes.node_state(directory, spec.name) for spec in specs}
    try:
        client = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), qps=0, max_attempts=1)
        print(f"API server: {client.host}   (export KUBECONFIG={directory / 'kubeconfig'})")
        pods = client.list(PODS)[0]
        for node in client.list(NODES)[0]:
            name = node["metadata"]["name"]
            ready = next((c for c in node.get("status", {}).get("conditions") or [] if c.get("type") == "Ready"), {})
            allocatable = node.get("status", {}).get("allocatable", {})
            extras = ", ".join(f"{k}={v}" for k, v in sorted(allocatable.items()) if "/" in k)
            here = [p["metadata"]["name"] for p in pods if p.get("spec", {}).get("nodeName") == name]
            print(f"Node {name}: Ready={ready.get('status', 'Unknown')}{', ' + machine[name] if machine.get(name) else ''}, "
                  f"cpu={allocatable.get('cpu')}, memory={allocatable.get('memory')}{', ' + extras if extras else ''}; "
                  f"pods: {', '.join(here) or 'none'}")
        phases: dict[str, int] = {}
        for pod in pods:
            phase = pod.get("status", {}).get("phase") or "Pending"
            phases[phase] = phases.get(phase, 0) + 1
        summary = ", ".join(f"{n} {phase}" for phase, n in sorted(phases.items())) or "none"
        print(f"Pods: {len(pods)} ({summary})")
        for pod in pods:
            meta = pod["metadata"]
            print(f"  {meta.get('namespace')}/{meta['name']}: {pod.get('status', {}).get('phase') or 'Pending'}")
    except (ApiError, OSError, ValueError) as exc:
        print(f"API server: not answering ({exc})")
    except Exception as exc:  # urllib3 connection errors and kubeconfig errors
        print(f"API server: not answering ({type(exc).__name__})")
    return 0
