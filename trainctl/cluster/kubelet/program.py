"""The kubelet as a program: its flags, its start-up and its signal handling.

``python -m trainctl.cluster.kubelet`` and ``trainctl local kubelet`` (what the supervisor
starts, one per node) both run :func:`run_kubelet`; the kubelet itself is
:class:`~trainctl.cluster.kubelet.kubelet.Kubelet`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import sys
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster.flags import non_negative_int, positive_float


class _Shutdown(Exception):
    """SIGTERM or SIGINT arrived."""


def _say(message: str) -> None:
    print(f"trainctl local: {message}", file=sys.stderr)


def kubelet_arguments(parser: argparse.ArgumentParser) -> None:
    from trainctl.cluster.kubelet import DEFAULT_NODE_NAME

    parser.add_argument("--dir", required=True, help="cluster directory")
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig (default: the node's own, DIR/kubelet/NODE/kubeconfig, made from DIR's CA)")
    parser.add_argument("--node-name", default=DEFAULT_NODE_NAME)
    parser.add_argument("--gpus", type=non_negative_int, default=0)
    parser.add_argument("--npus", type=non_negative_int, default=0)
    parser.add_argument("--cpu", default=None, help="the node's allocatable CPU (default: the machine's)")
    parser.add_argument("--memory", default=None, help="the node's allocatable memory (default: the machine's)")
    parser.add_argument("--workdir", default=None, help="default working directory of pods (default: cwd)")
    parser.add_argument("--pod-cidr", default=None, help="pod addresses (default: DIR's own slice of 127.128.0.0/10)")
    parser.add_argument("--backoff-base", type=positive_float, default=10.0,
                        help="first CrashLoopBackOff delay in seconds (doubles up to 5 minutes)")
    parser.add_argument("--node-lease-renew-interval", type=positive_float, default=10.0, metavar="SECONDS",
                        help="how often the node's Lease is renewed (Kubernetes: 10)")
    parser.add_argument("--resource-enforcer", choices=("cgroup-v2", "cgroup-v1", "polling"), default=None,
                        help="how limits.memory and limits.cpu are enforced (default: the first that works here)")
    parser.add_argument("--metrics-interval", type=positive_float, default=15.0,
                        help="seconds between publications of the node's and its pods' metrics (default 15)")
    parser.add_argument("--network", choices=("isolated", "shared"), default="shared",
                        help="the pods' network: isolated (the cluster's router, started by `up`) or shared "
                             "(this machine's; default)")
    parser.add_argument("--tls-cert-file", type=Path, default=None,
                        help="the streaming server's certificate (default: DIR/pki/nodes/NODE/kubelet.crt)")
    parser.add_argument("--tls-private-key-file", type=Path, default=None,
                        help="its key (default: DIR/pki/nodes/NODE/kubelet.key)")
    parser.add_argument("--client-ca-file", type=Path, default=None,
                        help="the CA client certificates are checked against (default: DIR/pki/ca.crt)")
    parser.add_argument("--sandbox", choices=("auto", "bwrap", "none"),
                        default=os.environ.get("TRAINCTL_POD_SANDBOX") or "auto",
                        help="the pods' sandbox: bwrap where it runs here (auto), or none "
                             "(default: $TRAINCTL_POD_SANDBOX, else auto)")
    parser.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")


def run_kubelet(args: argparse.Namespace) -> int:
    from trainctl.cluster.kubelet import Kubelet, KubeletConfig

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Connection retries while the API server restarts are expected; the informers relist.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    directory = Path(args.dir).expanduser().resolve()
    if args.kubeconfig:
        kubeconfig = Path(args.kubeconfig)
    elif (directory / "kubeconfig").exists():
        from trainctl.cluster import node_credentials
        from trainctl.cluster.network.ranges import HOST_IP

        # The node's own credentials, as `trainctl local up` makes them: never the admin's.
        kubeconfig = node_credentials.bootstrap(directory, args.node_name, HOST_IP)
    else:
        kubeconfig = directory / "kubeconfig"
    if not kubeconfig.exists():
        _say(f"no kubeconfig at {kubeconfig}: start the API server first (trainctl local up)")
        return 1
    config = KubeletConfig(directory=directory, kubeconfig=kubeconfig, node_name=args.node_name, gpus=args.gpus,
                           npus=args.npus, workdir=Path(args.workdir).resolve() if args.workdir else Path.cwd(),
                           backoff_base=args.backoff_base, pod_cidr=args.pod_cidr, cpu=args.cpu, memory=args.memory,
                           heartbeat_seconds=args.node_lease_renew_interval,
                           resource_enforcer=args.resource_enforcer, metrics_interval=args.metrics_interval,
                           network=args.network, tls_cert_file=args.tls_cert_file,
                           tls_private_key_file=args.tls_private_key_file, client_ca_file=args.client_ca_file,
                           sandbox=args.sandbox)

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
    parser = argparse.ArgumentParser(prog="python -m trainctl.cluster.kubelet")
    kubelet_arguments(parser)
    return run_kubelet(parser.parse_args(argv))
