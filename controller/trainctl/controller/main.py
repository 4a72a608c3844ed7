"""The controller's command: run the controller against a Kubernetes API server.

It lives in the controller's own distribution so the controller image needs no CLI: the image
runs it as ``trainctl-controller`` (or ``python -m trainctl.controller``), and the trainctl
CLI offers the same flags as ``trainctl controller``. It runs in a cluster (in-cluster service
account, the Deployment in ``manifests/``) and on a laptop (``--kubeconfig``, which is how
``trainctl local up`` starts it). SIGTERM stops taking work, lets in-flight reconciles finish
and releases the lease.
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
from typing import TYPE_CHECKING, Callable, Optional

from trainctl.controller import options

if TYPE_CHECKING:  # imported when the command runs, so other commands start without them
    from trainctl.controller.manager import Manager
    from trainctl.controller.prometheus_metrics import ControllerMetrics
    from trainctl.kube.client import KubeClient

log = logging.getLogger("trainctl.controller")


HELP = "run the PyTorchJob/MSJob controller against an API server"
DESCRIPTION = "Reconcile PyTorchJobs and MSJobs: create their pods and services, track their status."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's flags, on its own parser or on the ``trainctl controller`` subcommand's."""
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context to use")
    options.add_flags(parser)


def main(argv: Optional[list[str]] = None) -> int:
    """``trainctl-controller`` and ``python -m trainctl.controller``."""
    parser = argparse.ArgumentParser(prog="trainctl-controller", description=DESCRIPTION)
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except KeyboardInterrupt:
        return 130


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


class _Exit(Exception):
    """A start-up step cannot go on: the command prints ``message`` and exits with ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _ShutdownSignals:
    """SIGTERM and SIGINT stop the controller, from the first moment: a pod stopped during
    start-up exits cleanly too. Once the manager exists, they ask it to stop as well."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.manager: Optional[Manager] = None
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        log.info("shutting down", extra={"signal": signal.Signals(signum).name})
        self.stopping.set()
        if self.manager is not None:
            self.manager.request_stop()


def run(args: argparse.Namespace) -> int:
    from trainctl.controller.manager import Manager
    from trainctl.controller.prometheus_metrics import ControllerMetrics
    from trainctl.kube import structured_logging

    settings = _settings(args)
    structured_logging.configure(settings.log_format, settings.log_level)
    shutdown = _ShutdownSignals()
    try:
        _validate_leader_election(settings)
        metrics = ControllerMetrics()
        client = _client(args, settings, metrics)
        manager = shutdown.manager = Manager(client, settings, metrics=metrics)
        if not _wait_for_api_server(manager, client, shutdown.stopping):
            return 0
        servers = _serve_metrics_and_health(settings, metrics, manager)
    except _Exit as exc:
        print(f"trainctl controller: {exc.message}", file=sys.stderr)
        return exc.code
    _log_starting(client, settings)
    if shutdown.stopping.is_set():
        return 0
    return _run_manager(manager, servers)


def _settings(args: argparse.Namespace) -> options.ManagerOptions:
    """The flags, with the lease namespace and this replica's leader-election identity filled in."""
    settings = options.from_args(args)
    return dataclasses.replace(
        settings,
        lease_namespace=_lease_namespace(settings.lease_namespace),
        identity=settings.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
    )


def _validate_leader_election(settings: options.ManagerOptions) -> None:
    if not settings.lease_duration > settings.renew_deadline > settings.retry_period > 0:
        raise _Exit(2, "need --lease-duration > --renew-deadline > --retry-period > 0")


def _client(args: argparse.Namespace, settings: options.ManagerOptions, metrics: ControllerMetrics) -> KubeClient:
    from trainctl.kube import connect
    from trainctl.kube.client import KubeClient

    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        raise _Exit(1, f"kubeconfig {args.kubeconfig} does not exist")
    try:
        return KubeClient.from_kubeconfig(
            args.kubeconfig,
            args.context,
            qps=settings.qps,
            burst=settings.burst,
            pool_size=settings.create_concurrency + 16,
            on_response=metrics.observe_api,
            component="trainctl-controller",
        )
    except connect.ClusterConfigError as exc:
        raise _Exit(1, f"cannot load the cluster configuration: {exc}") from None


def _wait_for_api_server(manager: Manager, client: KubeClient, stopping: threading.Event) -> bool:
    """Check the manager's prerequisites, retrying while the API server does not answer.

    False when a shutdown signal came first.
    """
    from trainctl.controller.caches import GangSchedulerMissing
    from trainctl.kube.client import ApiError

    delay = 0.5
    while True:
        try:
            manager.check_prerequisites()
            return True
        except GangSchedulerMissing as exc:
            raise _Exit(1, str(exc)) from None
        except ApiError as exc:
            if not exc.retryable:  # unauthorized, forbidden, …: waiting will not help
                raise _Exit(1, f"cannot use the API server at {client.host}: {exc}") from None
            # Unreachable or overloaded: it may be restarting (as under `trainctl local up`).
            log.warning("API server not answering yet, retrying", extra={"server": client.host, "error": str(exc), "retry_in": delay})
            if stopping.wait(delay):
                return False
            delay = min(delay * 2, 10.0)


def _serve_metrics_and_health(settings: options.ManagerOptions, metrics: ControllerMetrics, manager: Manager) -> list[Callable[[], None]]:
    """Start the metrics and health endpoints that are asked for; what stops each."""
    from prometheus_client import start_http_server

    from trainctl.controller.health import HealthServer

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
        raise _Exit(1, f"cannot listen: {exc}") from None
    return servers


def _log_starting(client: KubeClient, settings: options.ManagerOptions) -> None:
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


def _run_manager(manager: Manager, servers: list[Callable[[], None]]) -> int:
    """Run until a signal or a lost lease stops the manager, then stop the servers."""
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
