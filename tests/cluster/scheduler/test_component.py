"""The scheduler component against a real API server: what it does before its caches are in."""

from __future__ import annotations

import time

from trainctl.cluster.scheduler.component import SchedulerComponent
from trainctl.kube.client import KubeClient
from trainctl.kube.resources import NODES, PODS

from tests.support.pods import create, pod

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                   "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _wait(event, timeout=10.0):
    assert event.wait(timeout)


def test_no_pass_runs_until_the_nodes_are_listed(apiserver):
    """A pass over listed pods and not-yet-listed nodes would call every pod unschedulable
    on "0/0 nodes"; kube-scheduler waits for its caches, and so does this one."""
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0, max_attempts=1)
    try:
        client.create(NODES, NODE)
        create(client, pod("early", "pass"))
        component = SchedulerComponent(client)
        component.pods.start()
        component.namespaces.start()
        try:
            _wait(component.pods.synced)
            component.sync()
            assert "nodeName" not in client.get(PODS, "default", "early")["spec"]
            assert not client.get(PODS, "default", "early").get("status", {}).get("conditions")

            component.nodes.start()
            _wait(component.nodes.synced)
            component.sync()
            deadline = time.monotonic() + 10
            while "nodeName" not in client.get(PODS, "default", "early")["spec"]:
                assert time.monotonic() < deadline, "the pod was never bound"
                time.sleep(0.05)
            assert client.get(PODS, "default", "early")["spec"]["nodeName"] == "node-a"
        finally:
            component.pods.stop()
            component.nodes.stop()
            component.namespaces.stop()
    finally:
        client.close()
