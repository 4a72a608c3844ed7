"""``trainctl local up|down|status|node`` (and the hidden ``trainctl local kubelet``).

``up`` runs :class:`~trainctl.cluster.local_cluster.LocalCluster` in the foreground as the
supervisor: it restarts a component that crashes and stops everything on Ctrl-C or
SIGTERM; its components die with it even when it is killed. ``--detach`` starts that same
supervisor as a background process and returns once the cluster is ready; that cluster
outlives a crash of its supervisor, unsupervised. ``status`` says what runs, the supervisor or
not (exit 0 supervised, 1 nothing runs, 3 components or pods run without their supervisor);
``up`` refuses a directory where such orphans run, and ``down`` stops the supervisor (or,
if it died, whatever it left) and every pod process. ``node kill|freeze|thaw|start NAME``
breaks and mends one node (:mod:`.nodes`). ``node start`` asks the supervisor (SIGUSR1) to
boot a killed node's kubelet again; the supervisor never restarts a kubelet the user killed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster.flags import non_negative_int
from trainctl.cluster.kubelet.program import kubelet_arguments, run_kubelet

# `trainctl local status`: components or pods run, but their supervisor does not.
ORPHANED = 3
# A component that crashes more often than this is not restarted again.
MAX_RESTARTS, RESTART_WINDOW_SECONDS = 5, 60.0


def _positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


# Flags ``up`` passes on to a component as text are checked here with that component's own
# parser: a bad value is an error now, not a component that crashes after "ready".
def _duration(text: str) -> str:
    from trainctl.api.durations import positive_duration

    positive_duration(text)
    return text


def _duration_or_never(text: str) -> str:
    from trainctl.controller.options import duration_or_never

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




def _default_dir() -> str:
    from trainctl.cluster.local_cluster import DEFAULT_DIR

    return str(DEFAULT_DIR)


def _print_help(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """What a command group does when no subcommand is given: show its help and fail."""
    def show(_args: argparse.Namespace) -> int:
        parser.print_help()
        return 2
    return show


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    local = subparsers.add_parser("local", help="run an embedded single-machine cluster",
                                  description="An embedded Kubernetes-compatible cluster on this machine: "
                                              "API server, kubelet (pods are local processes) and controller.")
    commands = local.add_subparsers(dest="local_command", metavar="{up,down,status,node}")
    local.set_defaults(func=_print_help(local))
    dir_help = "cluster directory (default: ~/.trainctl/local)"

    up = commands.add_parser("up", help="start the cluster", description="Start the API server, the kubelet and the "
                             "controller on DIR, wait until they are ready and print how to use the cluster.")
    up.add_argument("--dir", default=None, help=dir_help)
    up.add_argument("--detach", action="store_true", help="return once ready, leaving the cluster running in the background")
    up.add_argument("--gpus", type=non_negative_int, default=0, metavar="N", help="advertise N fake nvidia.com/gpu devices")
    up.add_argument("--npus", type=non_negative_int, default=0, metavar="N", help="advertise N fake huawei.com/Ascend910 devices")
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
    up.add_argument("--hollow-nodes", type=non_negative_int, default=0, metavar="N",
                    help="also N hollow nodes (kubemark's): one process serves them, reports their pods Running, "
                         "runs no pod processes (see docs/local-cluster.md)")
    up.add_argument("--network", choices=("isolated", "shared", "auto"), default=None,
                    help="the pods' network: isolated (a network namespace, IP and port space per pod, inside an "
                         "unprivileged user namespace), shared (this machine's; ports are host ports) or auto (the "
                         "default: isolated where the machine allows it, else shared)")
    up.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    up.set_defaults(func=run_up)

    down = commands.add_parser("down", help="stop the cluster and every pod process")
    down.add_argument("--dir", default=None, help=dir_help)
    down.set_defaults(func=run_down)

    status = commands.add_parser("status", help="say what runs in the cluster")
    status.add_argument("--dir", default=None, help=dir_help)
    status.set_defaults(func=run_status)

    node = commands.add_parser("node", help="break or mend a node: kill, freeze, thaw, start, partition, heal",
                               description="Node failures as a person would cause them.")
    actions = node.add_subparsers(dest="node_command", metavar="{kill,freeze,thaw,start,partition,heal}")
    node.set_defaults(func=_print_help(node))
    for action, text in (("kill", "the machine dies: its kubelet and every process of its pods get SIGKILL"),
                         ("freeze", "the machine hangs: its kubelet and its pods' processes are stopped (SIGSTOP)"),
                         ("thaw", "a frozen machine resumes (SIGCONT)"),
                         ("start", "a killed machine boots again: its kubelet comes back, its pods' processes do not"),
                         ("partition", "the machine loses the network: its kubelet and its pods are cut off, their "
                                       "processes keep running (isolated network only)"),
                         ("heal", "a partitioned machine gets the network back: its kubelet first, then the pods "
                                  "still in the API")):
        command = actions.add_parser(action, help=text, description=text)
        command.add_argument("name", help="node name (see trainctl local status)")
        command.add_argument("--dir", default=None, help=dir_help)
        command.set_defaults(func=run_node, node_command=action)

    kubelet = commands.add_parser("kubelet")  # hidden: `up` starts it
    kubelet_arguments(kubelet)
    kubelet.set_defaults(func=run_kubelet)


def _say(message: str) -> None:
    print(f"trainctl local: {message}", file=sys.stderr)


class _Shutdown(Exception):
    """SIGTERM or SIGINT arrived."""


# --- up ------------------------------------------------------------------------------------
def _usage(cluster: Any) -> str:
    names = ", ".join(spec.name for spec in cluster.nodes)
    lines = [f"Local cluster is ready in {cluster.directory} (API server {cluster.url}, "
             f"node{'s' if len(cluster.nodes) > 1 else ''} {names}).",
             _network_line(cluster.directory),
             "Use it with:",
             f"  export KUBECONFIG={cluster.kubeconfig}",
             "  kubectl get nodes",
             "  kubectl apply -f samples/pytorch/ddp.yaml    # from a trainctl checkout",
             f"Stop it with: trainctl local down --dir {cluster.directory}"]
    return "\n".join(lines)


def _network_line(directory: Path) -> str:
    """``Pod network: isolated: ...`` as the last ``up`` on ``directory`` chose it (and why)."""
    from trainctl.cluster.local_cluster import NETWORK_FILE
    from trainctl.cluster.network.isolation import DESCRIPTIONS, ISOLATED
    from trainctl.cluster.network.nat import SERVICES_FILE

    try:
        mode, _, reason = (directory / NETWORK_FILE).read_text().partition("\n")
    except OSError:
        return "Pod network: unknown"
    line = f"Pod network: {DESCRIPTIONS.get(mode.strip(), mode.strip())} ({reason.strip()})"
    try:
        services = (directory / SERVICES_FILE).read_text().strip() if mode.strip() == ISOLATED else ""
    except OSError:
        services = ""
    return f"{line}; Service ClusterIPs: {services}" if services else line


def run_up(args: argparse.Namespace) -> int:
    from trainctl.cluster.local_cluster import ClusterError, LocalCluster
    from trainctl.cluster.machines import NodeError
    from trainctl.cluster.network import isolation

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    if args.detach:
        return _up_detached(args, directory)

    # `up --detach` runs this command in the background with --ready-fd: that cluster outlives
    # a crash of its supervisor. One in the foreground (the user's terminal) goes with it.
    in_background = args.ready_fd is not None
    try:
        cluster = LocalCluster(directory, gpus=args.gpus, npus=args.npus, controller=not args.no_controller,
                               workdir=args.workdir, nodes=args.nodes, node_names=_names(args.node_names),
                               node_cpu=args.node_cpu, node_memory=args.node_memory,
                               node_monitor_grace_period=args.node_monitor_grace_period,
                               hpa_sync_period=args.hpa_sync_period, controlplane_args=_controlplane_flags(args),
                               controller_args=["--node-lost-grace", args.node_lost_grace] if args.node_lost_grace else None,
                               die_with_supervisor=not in_background, hollow_nodes=args.hollow_nodes,
                               network=args.network or isolation.AUTO)
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
    from trainctl.cluster import machines as nodes
    from trainctl.cluster.local_cluster import ClusterError

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
    from trainctl.cluster import machines as nodes
    from trainctl.cluster.local_cluster import ClusterError

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
    from trainctl.cluster.local_cluster import SUPERVISOR_PID
    from trainctl.cluster.pidfiles import read_pid_file

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
    argv = [sys.executable, "-m", "trainctl.cli.main", "local", "up", "--dir", str(directory), "--gpus", str(args.gpus),
            "--npus", str(args.npus), "--ready-fd", str(write_fd), "--nodes", str(args.nodes)]
    for flag, value in (("--node-names", args.node_names), ("--node-cpu", args.node_cpu), ("--node-memory", args.node_memory),
                        ("--network", args.network)):
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
    if args.hollow_nodes:
        argv += ["--hollow-nodes", str(args.hollow_nodes)]
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
    from trainctl.cluster.local_cluster import LocalCluster

    cluster = LocalCluster(directory, controller=False, nodes=args.nodes, node_names=_names(args.node_names))
    print(_usage(cluster))
    print(f"Supervisor pid {process.pid}; logs in {directory / 'logs'}")
    return 0


# --- down ----------------------------------------------------------------------------------
def run_down(args: argparse.Namespace) -> int:
    from trainctl.cluster.local_cluster import SUPERVISOR_PID, ClusterError, LocalCluster, cleanup_leftovers
    from trainctl.cluster.pidfiles import signal_pid_file, wait_pid_exit

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
        cluster.lock(leftovers_ok=True)
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
    from trainctl.cluster import machines as nodes
    from trainctl.cluster.local_cluster import SUPERVISOR_PID, find_leftovers
    from trainctl.cluster.pidfiles import read_pid_file

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
        elif args.node_command == "partition":
            nodes.partition_node(directory, args.name)
            print(f"Node {args.name} partitioned: its kubelet and its pods are cut off from the network; "
                  "their processes keep running.")
        elif args.node_command == "heal":
            nodes.heal_node(directory, args.name)
            print(f"Node {args.name} healed: its kubelet is back on the network and gives its pods their links back.")
        else:
            supervisor = read_pid_file(directory / SUPERVISOR_PID)
            if supervisor is None:
                leftovers = find_leftovers(directory)
                raise nodes.NodeError(leftovers.refusal(directory) if leftovers
                                      else f"no local cluster is running in {directory}")
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
    from trainctl.cluster import machines
    from trainctl.cluster.local_cluster import SUPERVISOR_PID, find_leftovers
    from trainctl.cluster.pidfiles import read_pid_file
    from trainctl.kube.client import ApiError, KubeClient
    from trainctl.kube.resources import NODES, PODS

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    supervisor = read_pid_file(directory / SUPERVISOR_PID)
    leftovers = find_leftovers(directory)
    if supervisor is None and not leftovers:
        print(f"No local cluster is running in {directory}.")
        return 1
    if supervisor is None:
        print(f"Local cluster in {directory}: supervisor not running; "
              f"{leftovers.summary()} still running without it (orphaned)")
    else:
        print(f"Local cluster in {directory}: supervisor pid {supervisor}")
    specs = machines.read_nodes(directory)
    network_line = _network_line(directory)
    print(network_line)
    router = ("network",) if network_line.startswith("Pod network: isolated") else ()
    for name in ("apiserver", *router, "scheduler", *(spec.component for spec in specs), "controlplane", "controller"):
        pid = read_pid_file(directory / "run" / f"{name}.pid")
        print(f"  {name:<11} {'running, pid ' + str(pid) if pid else 'not running'}")
    machine = {spec.name: machines.node_state(directory, spec.name) for spec in specs}
    try:
        client = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), qps=0, max_attempts=1)
        print(f"API server: {client.host}   (export KUBECONFIG={directory / 'kubeconfig'})")
        pods = client.list(PODS)[0]
        for node in client.list(NODES)[0]:
            name = node["metadata"]["name"]
            ready: dict[str, Any] = next((c for c in node.get("status", {}).get("conditions") or [] if c.get("type") == "Ready"), {})
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
    if supervisor is None:
        print("Nothing restarts a component that stops, and `up` refuses this directory until they are gone.\n"
              f"Stop them, pods included, with: trainctl local down --dir {directory}")
        return ORPHANED
    return 0
