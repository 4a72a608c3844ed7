"""LocalCluster: every component a process on one directory, each killable on its own."""

from __future__ import annotations

import os
import signal
import time

import pytest

from trainctl.cluster.kubelet.runtime import process_start_time
from trainctl.cluster.local_cluster import ClusterError, LocalCluster
from trainctl.cluster.pidfiles import read_pid_file
from trainctl.kube.restmapper import LEASES, NODES, PODS, PYTORCHJOBS

from tests.support.net import with_free_port
from tests.support.pods import main_pid, pod_fifo, read_fifo, running_sleeper, wait_pod


def test_context_manager_starts_everything_and_stops_pods_on_exit(tmp_path):
    with LocalCluster(tmp_path / "cluster", controller=False, workdir=tmp_path) as cluster:
        assert oct(cluster.kubeconfig.stat().st_mode & 0o777) == "0o600"
        api = cluster.client()
        node = api.get(NODES, None, "trainctl-local")
        assert next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
        lease = api.get(LEASES, "kube-node-lease", "trainctl-local")
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


def test_a_pod_that_ends_while_the_apiserver_is_down_gets_its_final_status(tmp_path):
    with LocalCluster(tmp_path / "cluster", controller=False, workdir=tmp_path) as cluster:
        api = cluster.client()
        started, release = pod_fifo(tmp_path / "started"), pod_fifo(tmp_path / "release")  # the working directory
        script = "import sys\nopen(sys.argv[1], 'w').write('ready')\nsys.exit(int(open(sys.argv[2]).read()))"
        api.create(PODS, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "outlives", "namespace": "default"},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "python", "command": ["python", "-c", script, str(started), str(release)]}]}})
        assert read_fifo(started) == "ready"
        wait_pod(api, "outlives", lambda p: p["status"].get("phase") == "Running")
        cluster.apiserver.kill()
        with open(release, "w") as exit_code:  # the pod exits 4 while nobody can record it
            exit_code.write("4")
        cluster.apiserver.start()
        done = wait_pod(cluster.client(), "outlives", lambda p: p["status"].get("phase") in ("Succeeded", "Failed"))
        assert done["status"]["phase"] == "Failed"
        assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 4


def test_a_cleanly_stopped_apiserver_comes_back_on_its_port_and_the_cluster_carries_on(tmp_path):
    with LocalCluster(tmp_path / "cluster", controller=True, workdir=tmp_path) as cluster:
        url = cluster.url
        cluster.apiserver.process.send_signal(signal.SIGTERM)  # a clean exit removes the port file
        assert cluster.apiserver.process.wait(30) == 0
        time.sleep(15)  # away longer than the informers' longest back-off
        cluster.apiserver.start()  # what the supervisor does when a component exits
        assert cluster.url == url
        api = cluster.client()
        running_sleeper(api, tmp_path, "after-sigterm")  # the kubelet still schedules and runs pods
        api.create(PYTORCHJOBS, with_free_port({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "after", "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {
                "containers": [{"name": "pytorch", "image": "python:3.11", "command": ["python", "-c", "print('ok')"]}]}}}}}}))
        wait_pod(api, "after-master-0", lambda p: p["status"].get("phase") == "Succeeded", timeout=90)
        for component in cluster.components:
            assert component.alive, f"{component.name} did not survive the API server's absence"
            assert "Traceback" not in component.log_file.read_text(errors="replace"), component.name


def test_a_node_the_next_run_does_not_start_is_removed_and_its_pods_failed(tmp_path):
    """A run of two nodes dies (kubelets first, so nothing reports its pods' end); the next
    run on the directory has one node. Nothing may stay Running without a process, and no
    new pod may go to the node that is gone."""
    directory = tmp_path / "cluster"
    with LocalCluster(directory, controller=False, workdir=tmp_path, nodes=2) as cluster:
        api = cluster.client()
        second = cluster.nodes[1].name
        pids = [main_pid(running_sleeper(api, tmp_path, name, node))
                for name, node in (("stays", cluster.node_name), ("lost", second), ("leaving", second))]
        api.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "by-hand"}})
        for kubelet in cluster.kubelets.values():
            kubelet.kill()
        api.delete(PODS, "default", "leaving")  # graceful: no kubelet left to finish it
    assert all(process_start_time(pid) is None for pid in pids)

    with LocalCluster(directory, controller=False, workdir=tmp_path) as cluster:
        api = cluster.client()
        assert sorted(n["metadata"]["name"] for n in api.list(NODES)[0]) == ["by-hand", cluster.node_name]
        assert api.get_or_none(LEASES, "kube-node-lease", second) is None
        lost = api.get(PODS, "default", "lost")
        assert (lost["status"]["phase"], lost["status"]["reason"]) == ("Failed", "NodeRemoved")
        assert lost["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        assert {c["type"]: c["status"] for c in lost["status"]["conditions"]}["Ready"] == "False"
        assert api.get_or_none(PODS, "default", "leaving") is None
        stays = wait_pod(api, "stays", lambda p: p["status"].get("phase") == "Failed")
        assert stays["status"]["reason"] == "KubeletRestarted"


def test_a_pid_file_without_the_process_start_time_is_not_trusted(tmp_path):
    path = tmp_path / "run" / "x.pid"
    path.parent.mkdir()
    path.write_text(f"{os.getpid()}\n")  # this pid runs, but nothing says it is the one meant
    assert read_pid_file(path) is None
    path.write_text(f"{os.getpid()} {process_start_time(os.getpid())}\n")
    assert read_pid_file(path) == os.getpid()
