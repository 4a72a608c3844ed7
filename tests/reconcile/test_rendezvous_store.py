"""The rendezvous store pod's command really serves a TCPStore with the installed torch."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import torch.distributed as torch_distributed

from tests.support.jobs import pytorchjob
from tests.support.net import free_port
from tests.support.reconcile import Cluster, by_name


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
