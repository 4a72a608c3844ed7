"""The rendezvous store pod: its command really serves a TCPStore with the installed torch, and
a store that ended is replaced only while the job goes on."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import torch.distributed as torch_distributed

from tests.support.jobs import pytorchjob
from tests.support.net import free_port
from tests.support.reconcile import Cluster, at, by_name, conditions


def test_store_pod_command_serves_a_tcp_store_that_agents_can_use():
    job = pytorchjob("el", master=False, workers=2)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 2}
    store = by_name([o for o in Cluster(job).reconcile().creates if o["kind"] == "Pod"])["el-rdzv"]
    container = store["spec"]["containers"][0]
    assert container["command"][0] == "python"
    port = free_port()
    env = {**os.environ, "POD_IP": "127.0.0.1", "RDZV_PORT": str(port), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, *container["command"][1:]], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout.readline().strip() == f"rendezvous store listening on 127.0.0.1:{port}"
        client = torch_distributed.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))
        client.set("torch.rendezvous.x", "state")
        again = torch_distributed.TCPStore("127.0.0.1", port, is_master=False)
        assert again.get("torch.rendezvous.x") == b"state"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0  # SIGTERM is a clean exit


def elastic_running() -> Cluster:
    job = pytorchjob("el", master=False, workers=2)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    cluster = Cluster(job)
    for second in range(3):  # the store and its Service, then the workers
        cluster.step(at(second))
    assert sorted(cluster.pods) == ["el-rdzv", "el-worker-0", "el-worker-1"]
    cluster.set_all("Running")
    cluster.set_phase("el-rdzv", "Running")
    cluster.step(at(3))
    return cluster


def test_a_store_that_ended_while_the_job_runs_is_replaced():
    cluster = elastic_running()
    cluster.set_phase("el-rdzv", "Failed")
    assert [(d.kind, d.name) for d in cluster.step(at(4)).deletes] == [("Pod", "el-rdzv")]
    assert [o["metadata"]["name"] for o in cluster.step(at(5)).creates] == ["el-rdzv"]


def test_the_pass_that_finishes_the_job_creates_no_store():
    # Seen at scale (docs/benchmarks.md): every pod told to end at once, the store's end
    # was seen first and its pod deleted; the pass that then saw the workers' success
    # created a new store, only for the next pass to delete it as the job's clean-up.
    cluster = elastic_running()
    cluster.set_phase("el-rdzv", "Succeeded")
    cluster.step(at(4))
    assert "el-rdzv" not in cluster.pods
    cluster.set_all("Succeeded")
    plan = cluster.step(at(5))
    assert ("Succeeded", "True", "PyTorchJobSucceeded") in conditions(cluster.job["status"])
    assert plan.creates == []
    assert "el-rdzv" not in cluster.pods
    cluster.step(at(6))  # the finished path: the store's Service goes too
    assert "el-rdzv" not in cluster.services and "el-rdzv" not in cluster.pods
