"""``python -m trainctl.cluster.controlplane`` as a process: its flags reach the
controllers, and SIGTERM stops it cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from trainctl.cluster.apiserver.process import ApiServerHandle
from trainctl.cluster.controlplane.__main__ import build, parser
from trainctl.kube import restmapper as r

from .conftest import FakeMetricsClient, eventually


def test_flags_take_kube_durations() -> None:
    args = parser().parse_args(["--node-monitor-grace-period", "10s", "--hpa-sync-period", "1m", "--hpa-downscale-stabilization", "30s"])
    controllers = build(args, client=None)
    nodes, autoscaler, accounts, endpoints, jobs, cronjobs, disruption, replicasets, deployments, daemonsets, statefulsets, quotas = controllers
    assert type(quotas).__name__ == "ResourceQuotaController"
    assert (type(replicasets).__name__, type(deployments).__name__) == ("ReplicaSetController", "DeploymentController")
    assert type(daemonsets).__name__ == "DaemonSetController"
    assert type(statefulsets).__name__ == "StatefulSetController"
    assert type(cronjobs).__name__ == "CronJobController"
    assert type(jobs).__name__ == "JobController" and jobs.backoff_base == 10.0
    assert type(accounts).__name__ == "ServiceAccountsController"
    assert type(endpoints).__name__ == "EndpointsController"
    assert type(disruption).__name__ == "DisruptionController"  # on by default, as in kube-controller-manager
    assert nodes.config.node_monitor_grace_period == 10.0
    assert autoscaler.loop.period == 60.0 and autoscaler.config.downscale_stabilization == 30.0
    assert [type(c).__name__ for c in build(parser().parse_args(["--controllers", "horizontal-pod-autoscaler"]), client=None)] == [
        "HorizontalPodAutoscalerController"]
    with pytest.raises(SystemExit):
        build(parser().parse_args(["--controllers", "replicationcontroller"]), client=None)


def test_process_marks_a_silent_node_unknown_and_stops_on_sigterm(apiserver: ApiServerHandle, client: FakeMetricsClient) -> None:
    client.create(r.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "silent"}, "spec": {}})
    node = client.get(r.NODES, None, "silent")
    node["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
                                      "lastHeartbeatTime": node["metadata"]["creationTimestamp"],
                                      "lastTransitionTime": node["metadata"]["creationTimestamp"]}]}
    client.replace(r.NODES, node, subresource="status")
    command = [sys.executable, "-m", "trainctl.cluster.controlplane", "--kubeconfig", str(apiserver.kubeconfig),
               "--node-monitor-grace-period", "1s", "--node-monitor-period", "0.2s"]
    process = subprocess.Popen(command, env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: any(c["status"] == "Unknown" for c in client.get(r.NODES, None, "silent")["status"]["conditions"]),
                   timeout=60, what="node Unknown")
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
