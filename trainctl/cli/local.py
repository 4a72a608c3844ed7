"""``trainctl local up|down|status|node`` (and the hidden ``trainctl local kubelet``).

``up`` runs :class:`~trainctl.cluster.local_cluster.LocalCluster` in the foreground as the
supervisor (:mod:`trainctl.cluster.supervisor`): it restarts a component that crashes and
stops everything on Ctrl-C or SIGTERM; its components die with it even when it is killed. ``--detach`` starts that same
supervisor as a background process and returns once the cluster is ready; that cluster
outlives a crash of its supervisor, unsupervised. ``status`` says what runs, the supervisor or
not (exit 0 supervised, 1 nothing runs, 3 components or pods run without their supervisor);
``up`` refuses a directory where such orphans run, and ``down`` stops the supervisor (or,
if it died, whatever it left) and every pod process. ``node KIND NAME`` breaks and mends one
node: a subcommand for every fault kind registered in :mod:`trainctl.cluster.faults`.
``node start`` asks the supervisor (SIGUSR1) to boot a killed node's kubelet again; the
supervisor never restarts a kubelet the user killed.

This module parses and prints; what runs is in the cluster package.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainctl.cluster.flags import non_negative_int
from trainctl.cluster.kubelet.program import kubelet_arguments, run_kubelet

if TYPE_CHECKING:
    from trainctl.cluster.supervisor import UpOptions

# `trainctl local status`: components or pods run, but their supervisor does not.
ORPHANED = 3


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
    up.add_argument("--sandbox", choices=("auto", "bwrap", "none"), default=None,
                    help="the pods' sandbox: bwrap (each pod an unprivileged user in PID, mount and user namespaces "
                         "of its own), none (pods run as this user on this machine) or auto (the default, also "
                         "from $TRAINCTL_POD_SANDBOX: bwrap where it runs here, else none)")
    up.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    up.set_defaults(func=run_up)

    down = commands.add_parser("down", help="stop the cluster and every pod process")
    down.add_argument("--dir", default=None, help=dir_help)
    down.set_defaults(func=run_down)

    status = commands.add_parser("status", help="say what runs in the cluster")
    status.add_argument("--dir", default=None, help=dir_help)
    status.set_defaults(func=run_status)

    _register_faults(commands, dir_help)

    kubelet = commands.add_parser("kubelet")  # hidden: `up` starts it
    kubelet_arguments(kubelet)
    kubelet.set_defaults(func=run_kubelet)



def _register_faults(commands: Any, dir_help: str) -> None:
    """``local node KIND`` and ``local pod KIND``, one subcommand per fault of the registry."""
    from trainctl.cluster.faults import NODE_FAULTS

    kinds = ", ".join(NODE_FAULTS)
    node = commands.add_parser("node", help=f"break or mend a node: {kinds}",
                               description="Node failures as a person would cause them.")
    actions = node.add_subparsers(dest="node_command", metavar="{" + ",".join(NODE_FAULTS) + "}")
    node.set_defaults(func=_print_help(node))
    for fault in NODE_FAULTS.values():
        command = actions.add_parser(fault.name, help=fault.help, description=fault.help)
        command.add_argument("name", help="node name (see trainctl local status)")
        command.add_argument("--dir", default=None, help=dir_help)
        for option in fault.flags:
            command.add_argument(option.flag, dest=option.dest, metavar=option.metavar, help=option.help)
        command.set_defaults(func=run_node, node_command=fault.name)

    from trainctl.cluster.faults import POD_FAULTS

    pod = commands.add_parser("pod", help=f"hang or resume one pod: {', '.join(POD_FAULTS)}",
                              description="Pod failures that do not announce themselves.")
    pod_actions = pod.add_subparsers(dest="pod_command", metavar="{" + ",".join(POD_FAULTS) + "}")
    pod.set_defaults(func=_print_help(pod))
    for pod_fault in POD_FAULTS.values():
        command = pod_actions.add_parser(pod_fault.name, help=pod_fault.help, description=pod_fault.help)
        command.add_argument("name", help="pod name")
        command.add_argument("-n", "--namespace", default="default", help="the pod's namespace (default: default)")
        command.add_argument("--dir", default=None, help=dir_help)
        command.set_defaults(func=run_pod, pod_command=pod_fault.name)


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
    from trainctl.cluster.network.isolation import ISOLATED, describe
    from trainctl.cluster.network.nat import SERVICES_FILE

    try:
        mode, _, reason = (directory / NETWORK_FILE).read_text().partition("\n")
    except OSError:
        return "Pod network: unknown"
    line = f"Pod network: {describe(mode.strip(), reason.strip())}"
    try:
        services = (directory / SERVICES_FILE).read_text().strip() if mode.strip() == ISOLATED else ""
    except OSError:
        services = ""
    return f"{line}; Service ClusterIPs: {services}" if services else line


def run_up(args: argparse.Namespace) -> int:
    from trainctl.cluster.local_cluster import ClusterError
    from trainctl.cluster.machines import NodeError
    from trainctl.cluster.supervisor import UpOptions, supervise

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    options = UpOptions.from_args(args)
    if args.detach:
        return _up_detached(options, directory)

    # `up --detach` runs this command in the background with --ready-fd: that cluster outlives
    # a crash of its supervisor. One in the foreground (the user's terminal) goes with it.
    in_background = args.ready_fd is not None
    try:
        cluster = options.cluster(directory, die_with_supervisor=not in_background)
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
        return supervise(cluster, _say)
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


def _up_detached(options: "UpOptions", directory: Path) -> int:
    from trainctl.cluster.local_cluster import ClusterError, LocalCluster
    from trainctl.cluster.supervisor import start_detached

    try:
        pid = start_detached(options, directory)
    except ClusterError as exc:
        _say(str(exc))
        return 1
    cluster = LocalCluster(directory, controller=False, nodes=options.nodes, node_names=options.names())
    print(_usage(cluster))
    print(f"Supervisor pid {pid}; logs in {directory / 'logs'}")
    return 0


# --- down ----------------------------------------------------------------------------------
def run_down(args: argparse.Namespace) -> int:
    from trainctl.cluster.local_cluster import ClusterError
    from trainctl.cluster.supervisor import stop_cluster

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    if not directory.is_dir():
        _say(f"no local cluster in {directory}")
        return 1
    try:
        pid, leftovers = stop_cluster(directory, _say)
    except ClusterError as exc:
        _say(str(exc))
        return 1
    if pid is not None:
        print(f"Local cluster in {directory} stopped.")
    elif leftovers:
        print(f"Local cluster in {directory} stopped (its supervisor was gone; stopped what it left: {', '.join(leftovers)}).")
    else:
        print(f"No local cluster was running in {directory}.")
    return 0


# --- node ----------------------------------------------------------------------------------
def run_node(args: argparse.Namespace) -> int:
    from trainctl.cluster.faults import NODE_FAULTS
    from trainctl.cluster.machines import NodeError, find_node
    from trainctl.cluster.supervisor import SupervisedNodes

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    fault = NODE_FAULTS[args.node_command]
    try:
        find_node(directory, args.name)
        fault(SupervisedNodes(directory), args.name, {option.dest: getattr(args, option.dest) for option in fault.flags})
    except NodeError as exc:
        _say(str(exc))
        return 1
    print(fault.outcome.format(node=args.name))
    return 0


# --- pod -----------------------------------------------------------------------------------
def run_pod(args: argparse.Namespace) -> int:
    from trainctl.cluster.faults import POD_FAULTS
    from trainctl.cluster.machines import NodeError

    directory = Path(args.dir or _default_dir()).expanduser().resolve()
    fault = POD_FAULTS[args.pod_command]
    try:
        fault(directory, args.namespace, args.name)
    except NodeError as exc:
        _say(str(exc))
        return 1
    print(fault.outcome.format(pod=f"{args.namespace}/{args.name}"))
    return 0


# --- status --------------------------------------------------------------------------------
def run_status(args: argparse.Namespace) -> int:
    from trainctl.cluster import machines
    from trainctl.cluster.faults import degrade
    from trainctl.cluster.kubelet.sandbox import SANDBOX_LABEL
    from trainctl.cluster.local_cluster import SUPERVISOR_PID, find_leftovers
    from trainctl.cluster.pidfiles import read_pid_file
    from trainctl.kube.client import ApiError, KubeClient
    from trainctl.kube.restmapper import NODES, PODS

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
    machine = {spec.name: ", ".join(filter(None, (machines.node_state(directory, spec.name),
                                                  degrade.describe(degrade.degradation(directory, spec.name)))))
               for spec in specs}
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
            sandboxed = (node["metadata"].get("labels") or {}).get(SANDBOX_LABEL)
            print(f"Node {name}: Ready={ready.get('status', 'Unknown')}{', ' + machine[name] if machine.get(name) else ''}, "
                  f"cpu={allocatable.get('cpu')}, memory={allocatable.get('memory')}{', ' + extras if extras else ''}"
                  f"{', pod sandbox: ' + sandboxed if sandboxed else ''}; pods: {', '.join(here) or 'none'}")
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
