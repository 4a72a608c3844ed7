"""``trainctl controller``: run the controller against a Kubernetes API server.

The same command runs in a cluster (in-cluster service account, the Deployment in
``manifests/``) and on a laptop (``--kubeconfig``, which is how ``trainctl local up`` starts
it). SIGTERM stops taking work, lets in-flight reconciles finish and releases the lease.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from typing import Callable, Optional

from trainctl.controller import options

log = logging.getLogger("trainctl.controller")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "controller",
        help="run the PyTorchJob/MSJob controller against an API server",
        description="Reconcile PyTorchJobs and MSJobs: create their pods and services, track their status.",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context to use")
    options.add_flags(p)
    p.set_defaults(func=run)


def _lease_namespace(explicit: Optional[str]) -> str:
    if explicit:
        return explicit
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    from trainctl.kube.connect import service_account_file

    try:
        return service_account_file("namespace").read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


def run(args: argparse.Namespace) -> int:
    from prometheus_client import start_http_server

    from trainctl.controller.caches import GangSchedulerMissing
    from trainctl.controller.health import HealthServer
    from trainctl.controller.manager import Manager
    from trainctl.controller.metrics import ControllerMetrics
    from trainctl.kube import connect, logs
    from trainctl.kube.client import ApiError, KubeClient

    settings = options.from_args(args)
    settings = dataclasses.replace(
        settings,
        lease_namespace=_lease_namespace(settings.lease_namespace),
        identity=settings.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
    )
    logs.configure(settings.log_format, settings.log_level)
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
    if not settings.lease_duration > settings.renew_deadline > settings.retry_period > 0:
        print("trainctl controller: need --lease-duration > --renew-deadline > --retry-period > 0", file=sys.stderr)
        return 2
    metrics = ControllerMetrics()
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        print(f"trainctl controller: kubeconfig {args.kubeconfig} does not exist", file=sys.stderr)
        return 1
    try:
        client = KubeClient.from_kubeconfig(
            args.kubeconfig,
            args.context,
            qps=settings.qps,
            burst=settings.burst,
            pool_size=settings.create_concurrency + 16,
            on_response=metrics.observe_api,
        )
    except connect.ClusterConfigError as exc:
        print(f"trainctl controller: cannot load the cluster configuration: {exc}", file=sys.stderr)
        return 1
    manager = Manager(client, settings, metrics=metrics)
    delay = 0.5
    while True:
        try:
            manager.check_prerequisites()
            break
        except GangSchedulerMissing as exc:
            print(f"trainctl controller: {exc}", file=sys.stderr)
            return 1
        except ApiError as exc:
            if not exc.retryable:  # unauthorized, forbidden, …: waiting will not help
                print(f"trainctl controller: cannot use the API server at {client.host}: {exc}", file=sys.stderr)
                return 1
            # Unreachable or overloaded: it may be restarting (as under `trainctl local up`).
            log.warning("API server not answering yet, retrying", extra={"server": client.host, "error": str(exc), "retry_in": delay})
            if stopping.wait(delay):
                return 0
            delay = min(delay * 2, 10.0)

    servers: list[Callable[[], None]] = []
    try:
        if settings.metrics_port:
            server, _ = start_http_server(settings.metrics_port, addr=settings.bind_address, registry=metrics.registry)
            servers.append(server.shutdown)
        if settings.health_port:
            health = HealthServer(settings.bind_address, settings.health_port, manager.healthy, manager.synced)
            health.start()
            servers.append(health.stop)
    except OSError as exc:
        print(f"trainctl controller: cannot listen: {exc}", file=sys.stderr)
        return 1

    log.info(
        "starting",
        extra={
            "server": client.configuration.host,
            "namespace": settings.namespace or "(all)",
            "workers": settings.workers,
            "leader_elect": settings.leader_elect,
            "gang_scheduler": settings.gang_scheduler or "(off)",
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
