"""``python -m trainctl.cluster.controlplane``: run the control-plane controllers.

The flags mirror kube-controller-manager's, so the same values mean the same thing here.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any, Optional

from trainctl.api.durations import positive_duration

CONTROLLERS = ("node-lifecycle", "horizontal-pod-autoscaler", "serviceaccount", "endpoint", "job", "cronjob", "disruption",
               "replicaset", "replicationcontroller", "deployment", "daemonset", "statefulset", "resourcequota")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainctl.cluster.controlplane",
                                description="The node lifecycle, horizontal pod autoscaler, ServiceAccount, endpoint(slice), Job, CronJob, disruption, ReplicaSet, Deployment, DaemonSet, StatefulSet and ResourceQuota controllers of kube-controller-manager.")
    p.add_argument("--kubeconfig", help="kubeconfig of the API server (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--controllers", default=",".join(CONTROLLERS),
                   help=f"comma-separated controllers to run (default: {','.join(CONTROLLERS)})")
    p.add_argument("--node-monitor-grace-period", type=positive_duration, default=40.0, metavar="DURATION",
                   help="a node whose Lease is not renewed for this long becomes Ready=Unknown (default 40s)")
    p.add_argument("--node-startup-grace-period", type=positive_duration, default=60.0, metavar="DURATION",
                   help="the same for a node that never posted its Ready condition (default 1m)")
    p.add_argument("--node-eviction-rate", type=float, default=0.1,
                   help="nodes per second tainted for eviction in a healthy zone (default 0.1)")
    p.add_argument("--secondary-node-eviction-rate", type=float, default=0.01,
                   help="the same in a partially disrupted zone of a large cluster (default 0.01)")
    p.add_argument("--unhealthy-zone-threshold", type=float, default=0.55,
                   help="share of not-Ready nodes (more than 2) that makes a zone partially disrupted (default 0.55)")
    p.add_argument("--large-cluster-size-threshold", type=int, default=50,
                   help="zones of at most this many nodes stop evicting when partially disrupted (default 50)")
    p.add_argument("--node-monitor-period", type=positive_duration, default=5.0, metavar="DURATION",
                   help="how often node health is checked (default 5s)")
    p.add_argument("--hpa-sync-period", "--horizontal-pod-autoscaler-sync-period", dest="hpa_sync_period",
                   type=positive_duration, default=15.0, metavar="DURATION", help="how often each HPA is synced (default 15s)")
    p.add_argument("--hpa-tolerance", "--horizontal-pod-autoscaler-tolerance", dest="hpa_tolerance", type=float, default=0.1,
                   help="metric/target ratios this close to 1.0 do not rescale (default 0.1)")
    p.add_argument("--hpa-downscale-stabilization", "--horizontal-pod-autoscaler-downscale-stabilization",
                   dest="hpa_downscale_stabilization", type=positive_duration, default=300.0, metavar="DURATION",
                   help="scale-down stabilization window when an HPA sets none (default 5m)")
    p.add_argument("--hpa-cpu-initialization-period", "--horizontal-pod-autoscaler-cpu-initialization-period",
                   dest="hpa_cpu_initialization_period", type=positive_duration, default=300.0, metavar="DURATION",
                   help="how long after a pod starts its CPU does not count (default 5m)")
    p.add_argument("--hpa-initial-readiness-delay", "--horizontal-pod-autoscaler-initial-readiness-delay",
                   dest="hpa_initial_readiness_delay", type=positive_duration, default=30.0, metavar="DURATION",
                   help="after the initialization period, an unready pod whose readiness changed this soon after its start has never been ready, and its CPU does not count (default 30s)")
    p.add_argument("--job-backoff", type=positive_duration, default=10.0, metavar="DURATION",
                   help="the first delay before a Job's failed pod is replaced, doubled per failure up to 6m (default 10s, as kube)")
    p.add_argument("--log-format", choices=("text", "json"), default="text")
    p.add_argument("--log-level", default="info")
    return p


def build(args: argparse.Namespace, client: Any) -> list[Any]:
    """The controllers ``args`` asks for, on ``client`` (not started)."""
    from trainctl.cluster.controlplane import disruption, hpa_decision, node_lifecycle
    from trainctl.cluster.controlplane.hpa_controller import HorizontalPodAutoscalerController
    from trainctl.cluster.controlplane.node_lifecycle_controller import NodeLifecycleController

    wanted = [name.strip() for name in args.controllers.split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(CONTROLLERS))
    if unknown:
        raise SystemExit(f"unknown controller(s): {', '.join(unknown)}; choose from {', '.join(CONTROLLERS)}")
    controllers: list[Any] = []
    if "node-lifecycle" in wanted:
        zones = disruption.DisruptionConfig(
            node_eviction_rate=args.node_eviction_rate, secondary_node_eviction_rate=args.secondary_node_eviction_rate,
            unhealthy_zone_threshold=args.unhealthy_zone_threshold, large_cluster_size_threshold=args.large_cluster_size_threshold)
        lifecycle = node_lifecycle.NodeLifecycleConfig(node_monitor_grace_period=args.node_monitor_grace_period,
                                                       node_startup_grace_period=args.node_startup_grace_period,
                                                       zone_disruption=zones)
        controllers.append(NodeLifecycleController(client, config=lifecycle, monitor_period=args.node_monitor_period))
    if "horizontal-pod-autoscaler" in wanted:
        autoscaling = hpa_decision.HpaConfig(tolerance=args.hpa_tolerance, downscale_stabilization=args.hpa_downscale_stabilization,
                                    cpu_initialization_period=args.hpa_cpu_initialization_period,
                                    initial_readiness_delay=args.hpa_initial_readiness_delay)
        controllers.append(HorizontalPodAutoscalerController(client, sync_period=args.hpa_sync_period, config=autoscaling))
    if "serviceaccount" in wanted:
        from trainctl.cluster.controlplane.serviceaccounts_controller import ServiceAccountsController

        controllers.append(ServiceAccountsController(client))
    if "endpoint" in wanted:
        from trainctl.cluster.controlplane.endpoints_controller import EndpointsController

        controllers.append(EndpointsController(client))
    if "job" in wanted:
        from trainctl.cluster.controlplane.job_controller import JobController

        controllers.append(JobController(client, backoff_base=args.job_backoff))
    if "cronjob" in wanted:
        from trainctl.cluster.controlplane.cronjob_controller import CronJobController

        controllers.append(CronJobController(client))
    if "disruption" in wanted:
        from trainctl.cluster.controlplane.disruption_controller import DisruptionController

        controllers.append(DisruptionController(client))
    if "replicaset" in wanted:
        from trainctl.cluster.controlplane.replicaset_controller import ReplicaSetController

        controllers.append(ReplicaSetController(client))
    if "replicationcontroller" in wanted:
        from trainctl.cluster.controlplane.replication_manager import ReplicationManager

        controllers.append(ReplicationManager(client))
    if "deployment" in wanted:
        from trainctl.cluster.controlplane.deployment_controller import DeploymentController

        controllers.append(DeploymentController(client))
    if "daemonset" in wanted:
        from trainctl.cluster.controlplane.daemonset_controller import DaemonSetController

        controllers.append(DaemonSetController(client))
    if "statefulset" in wanted:
        from trainctl.cluster.controlplane.statefulset_controller import StatefulSetController

        controllers.append(StatefulSetController(client))
    if "resourcequota" in wanted:
        from trainctl.cluster.controlplane.resourcequota_controller import ResourceQuotaController

        controllers.append(ResourceQuotaController(client))
    return controllers


def main(argv: Optional[list[str]] = None) -> int:
    args = parser().parse_args(argv)
    from trainctl.kube import structured_logging
    from trainctl.kube.client import KubeClient

    structured_logging.configure(args.log_format, args.log_level)
    client = KubeClient.from_kubeconfig(args.kubeconfig, args.context, component="kube-controller-manager")
    controllers = build(args, client)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for controller in controllers:
        controller.start()
    while not stop.wait(1.0):
        pass
    for controller in controllers:
        controller.stop()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
