"""LocalCluster: every component a process on one directory, each killable on its own."""

from __future__ import annotations

import os

import pytest

from controller.local.cluster import ClusterError, LocalCluster, read_pid_file
from controller.local.kubelet.runtime import process_start_time

from .conftest import main_pid, sleeper_pod, wait_pod


def running_sleeper(api, tmp_path, name):
    fifo = tmp_path / f"{name}.ready"
    os.mkfifo(fifo)
    api.create("/api/v1/namespaces/default/pods", sleeper_pod(name, str(fifo)))
    with open(fifo) as ready:  # blocks until the pod's process runs
        assert ready.read() == "ready"
    return wait_pod(api, name, lambda p: p.get("status", {}).get("phase") == "Running")


def test_context_manager_starts_everything_and_stops_pods_on_exit(tmp_path):
    with LocalCluster(tmp_path / "cluster", controller=False, workdir=tmp_path) as cluster:
        assert oct(cluster.kubeconfig.stat().st_mode & 0o777) == "0o600"
        api = cluster.client()
        node = api.get("/api/v1/nodes/trainctl-local")
        assert next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
        lease = api.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/trainctl-local")
        assert lease["spec"]["holderIdentity"] == "trainctl-local"
        pid = main_pid(running_sleeper(api, tmp_path, "sleeper"))
        components = [c.pid for c in cluster.components]
        with pytest.raises(ClusterError, match="already running"):
            LocalCluster(tmp_path / "cluster", controller=False).start()
    assert process_start_time(pid) is None
    assert all(process_start_time(p) is None for p in components)
    assert read_pid_file(tmp_path / "cluster" / "run" / "supervisor.pid") is None


def test_kubelet_crash_kills_its_pods_and_the_restarted_kubelet_marks_them_failed(tmp_path):
    with LocalCluster(tmp_path / "cluster", controller=False, workdir=tmp_path) as cluster:
        api = cluster.client()
        pid = main_pid(running_sleeper(api, tmp_path, "victim"))
        cluster.kubelet.kill()
        cluster.kubelet.start()
        failed = wait_pod(api, "victim", lambda p: p["status"].get("phase") == "Failed")
        assert failed["status"]["reason"] == "KubeletRestarted"
        assert failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        assert process_start_time(pid) is None
        # The node keeps working after the restart.
        assert main_pid(running_sleeper(api, tmp_path, "after")) > 0


def test_apiserver_restart_keeps_its_port_and_the_kubelet_follows(tmp_path):
    with LocalCluster(tmp_path / "cluster", controller=False, workdir=tmp_path) as cluster:
        url = cluster.url
        cluster.apiserver.kill()
        cluster.apiserver.start()
        assert cluster.url == url
        running_sleeper(cluster.client(), tmp_path, "after-restart")
