"""``trainctl controller``: run the controller against a Kubernetes API server.

The same command runs in a cluster (in-cluster service account, the Deployment in
``manifests/``) and on a laptop (``--kubeconfig``, which is how ``trainctl local up`` starts
it). SIGTERM stops taking work, lets in-flight reconciles finish and releases the lease.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from typing import Callable, Optional

log = logging.getLogger("trainctl.controller")

IN_CLUSTER_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "controller",
        help="run the PyTorchJob/MSJob controller against an API server",
        description="Reconcile PyTorchJobs and MSJobs: create their pods and services, track their status.",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account, then $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context to use")
    p.add_argument(
        "--namespace",
        default=os.environ.get("KUBEFLOW_NAMESPACE") or None,
        help="watch only this namespace (default: all; env KUBEFLOW_NAMESPACE)",
    )
    p.add_argument("--workers", type=_positive_int, default=4, help="jobs reconciled in parallel (default 4)")
    p.add_argument("--create-concurrency", type=_positive_int, default=32, help="children created in parallel (default 32)")
    p.add_argument(
        "--child-update-batch-period",
        type=float,
        default=0.025,
        metavar="SECONDS",
        help="reconcile a job once per this window of pod/service updates (default 0.025; 0 = at once)",
    )
    p.add_argument("--qps", type=float, default=100.0, help="client-side API request rate (default 100; 0 = unlimited)")
    p.add_argument("--burst", type=_positive_int, default=200, help="client-side API request burst (default 200)")
    p.add_argument("--leader-elect", action="store_true", help="take a coordination.k8s.io Lease before acting")
    p.add_argument("--leader-elect-namespace", help="namespace of the Lease (default: this pod's namespace, else 'default')")
    p.add_argument("--leader-elect-name", default="trainctl-controller", help="name of the Lease")
    p.add_argument("--lease-duration", type=float, default=15.0, help="seconds a Lease is valid (default 15)")
    p.add_argument("--renew-deadline", type=float, default=10.0, help="seconds the leader may fail to renew before stepping down (default 10)")
    p.add_argument("--retry-period", type=float, default=2.0, help="seconds between Lease attempts (default 2)")
    p.add_argument("--metrics-port", type=int, default=8080, help="Prometheus /metrics port (default 8080; 0 = off)")
    p.add_argument("--health-port", type=int, default=8081, help="/healthz and /readyz port (default 8081; 0 = off)")
    p.add_argument("--bind-address", default="0.0.0.0", help="address for the metrics and health ports")
    p.add_argument(
        "--gang-scheduler",
        metavar="volcano|scheduler-plugins|NAME",
        help="gang-schedule pods with Volcano, or with scheduler-plugins under this scheduler name",
    )
    p.add_argument("--log-format", choices=("text", "json"), default="text", help="log line format")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    p.set_defaults(func=run)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _lease_namespace(explicit: Optional[str]) -> str:
    if explicit:
        return explicit
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(IN_CLUSTER_NAMESPACE_FILE, encoding="utf-8") as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


def run(args: argparse.Namespace) -> int:
    import yaml
    from kubernetes.config import ConfigException
    from prometheus_client import start_http_server

    from trainctl.controller.kube import logs
    from trainctl.controller.kube.client import ApiError, KubeClient
    from trainctl.controller.kube.health import HealthServer
    from trainctl.controller.kube.manager import GangSchedulerMissing, Manager, ManagerOptions
    from trainctl.controller.kube.metrics import ControllerMetrics

    logs.configure(args.log_format, args.log_level)
    # Handle SIGTERM from the first moment: a pod stopped during start-up exits cleanly too.
    stopping = threading.Event()
    manager: Optional[Manager] = None

    def on_signal(signum: int, _frame: object) -> None:
        log.info("shutting down", extra={"signal": signal.Signals(signum).name})
        stopping.set()
        if manager is not None:
            manager.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if not args.lease_duration > args.renew_deadline > args.retry_period > 0:
        print("trainctl controller: need --lease-duration > --renew-deadline > --retry-period > 0", file=sys.stderr)
        return 2
    metrics = ControllerMetrics()
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        print(f"trainctl controller: kubeconfig {args.kubeconfig} does not exist", file=sys.stderr)
        return 1
    try:
        client = KubeClient.from_kubeconfig(
            args.kubeconfig, args.context, qps=args.qps, burst=args.burst, pool_size=args.create_concurrency + 16, on_response=metrics.observe_api
        )
    except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        reason = " ".join(str(exc).split())  # YAML errors span lines; the contract is one line
        print(f"trainctl controller: cannot load the cluster configuration: {reason}", file=sys.stderr)
        return 1
    options = ManagerOptions(
        namespace=args.namespace,
        workers=args.workers,
        create_concurrency=args.create_concurrency,
        child_update_batch_period=args.child_update_batch_period,
        gang_scheduler=args.gang_scheduler,
        leader_elect=args.leader_elect,
        lease_namespace=_lease_namespace(args.leader_elect_namespace),
        lease_name=args.leader_elect_name,
        identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
    )
    manager = Manager(client, options, metrics=metrics)
    try:
        manager.check_prerequisites()
    except GangSchedulerMissing as exc:
        print(f"trainctl controller: {exc}", file=sys.stderr)
        return 1
    except ApiError as exc:
        print(f"trainctl controller: cannot use the API server at {client.configuration.host}: {exc}", file=sys.stderr)
        return 1

    servers: list[Callable[[], None]] = []
    try:
        if args.metrics_port:
            server, _ = start_http_server(args.metrics_port, addr=args.bind_address, registry=metrics.registry)
            servers.append(server.shutdown)
        if args.health_port:
            health = HealthServer(args.bind_address, args.health_port, manager.healthy, manager.synced)
            health.start()
            servers.append(health.stop)
    except OSError as exc:
        print(f"trainctl controller: cannot listen: {exc}", file=sys.stderr)
        return 1

    log.info(
        "starting",
        extra={
            "server": client.configuration.host,
            "namespace": args.namespace or "(all)",
            "workers": args.workers,
            "leader_elect": args.leader_elect,
            "gang_scheduler": args.gang_scheduler or "(off)",
        },
    )
    if stopping.is_set():
        return 0
    manager.start()
    while not manager.wait(1.0):
        pass
    manager.stop()
    for stop_server in servers:
        stop_server()
    if manager.lost_leadership:
        print("trainctl controller: lost the leader lease; exiting so a fresh replica can compete", file=sys.stderr)
        return 1
    log.info("stopped")
    return 0
