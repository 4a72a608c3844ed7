"""DaemonSets on a real API server: a pod per node, a node added, tainted and relabelled,
kubectl get ds, set image and rollout status, with a stand-in scheduler and kubelet."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from trainctl.cluster.controlplane import daemonset_decision as dd
from trainctl.cluster.controlplane.api_resources import DAEMONSETS
from trainctl.cluster.controlplane.daemonset_controller import DaemonSetController
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient

from tests.cluster.controlplane.conftest import eventually
from tests.support.kubectl import Kubectl

Obj = dict[str, Any]

DAEMONSET = {
    "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
    "spec": {"selector": {"matchLabels": {"app": "agent"}},
             "template": {"metadata": {"labels": {"app": "agent"}},
                          "spec": {"nodeSelector": {"pool": "train"},
                                   "containers": [{"name": "agent", "image": "python:3.11"}]}}}}


def _schedule_and_run(client: KubeClient, stop: threading.Event) -> None:
    """What the scheduler and a kubelet would do: bind each pod to its affinity's node, make it Ready."""
    while not stop.wait(0.2):
        for pod in client.list(r.PODS, "default")[0]:
            meta = pod["metadata"]
            try:
                if not pod["spec"].get("nodeName"):
                    target = dd.node_of(pod)
                    if target:
                        client.create(r.PODS, {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"], "namespace": "default"},
                                               "target": {"kind": "Node", "name": target}}, subresource="binding")
                elif pod.get("status", {}).get("phase") != "Running" and not meta.get("deletionTimestamp"):
                    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                    pod["status"] = {"phase": "Running",
                                     "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}
                    client.replace(r.PODS, pod, subresource="status")
            except ApiError:
                pass  # changed meanwhile: the next round


def _node(name: str, labels: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


@pytest.fixture
def controller(client: KubeClient) -> Iterator[None]:
    running = DaemonSetController(client, resync_period=1.0)
    stop = threading.Event()
    helper = threading.Thread(target=_schedule_and_run, args=(client, stop), daemon=True)
    helper.start()
    running.start()
    try:
        yield
    finally:
        stop.set()
        running.stop()
        helper.join(5)


def _placement(client: KubeClient) -> dict[str, str]:
    """node -> image of the live DaemonSet pods bound there."""
    pods = [p for p in client.list(r.PODS, "default", label_selector="app=agent")[0] if not p["metadata"].get("deletionTimestamp")]
    return {str(p["spec"].get("nodeName")): p["spec"]["containers"][0]["image"] for p in pods}


def test_a_pod_per_eligible_node_through_node_changes_and_a_rolling_update(
        client: KubeClient, kube_env: dict[str, str], controller: None) -> None:
    kubectl = Kubectl(kube_env)
    for name, pool in (("node-a", "train"), ("node-b", "train"), ("node-c", "serve")):
        client.create(r.NODES, _node(name, {"pool": pool}))
    kubectl.apply(DAEMONSET)
    eventually(lambda: _placement(client) == {"node-a": "python:3.11", "node-b": "python:3.11"}, what="a pod on each train node")
    kubectl("rollout", "status", "ds/agent", "--timeout=120s", timeout=150)
    header, row = kubectl("get", "ds").splitlines()
    assert header.split() == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE", "SELECTOR", "AGE"]
    assert row.split()[:7] == ["agent", "2", "2", "2", "2", "2", "pool=train"]
    daemonset = client.get(DAEMONSETS, "default", "agent")
    assert daemonset["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}

    kubectl("label", "node", "node-c", "pool=train", "--overwrite")
    eventually(lambda: set(_placement(client)) == {"node-a", "node-b", "node-c"}, what="node-c relabelled gets its pod")
    kubectl("taint", "node", "node-b", "maintenance=now:NoExecute")
    eventually(lambda: set(_placement(client)) == {"node-a", "node-c"}, what="the NoExecute taint evicts node-b's pod")

    kubectl("set", "image", "ds/agent", "agent=python:3.12")
    kubectl("rollout", "status", "ds/agent", "--timeout=120s", timeout=150)
    eventually(lambda: _placement(client) == {"node-a": "python:3.12", "node-c": "python:3.12"}, what="every pod replaced")
    status = client.get(DAEMONSETS, "default", "agent")["status"]
    assert (status["desiredNumberScheduled"], status["updatedNumberScheduled"], status["numberAvailable"]) == (2, 2, 2)

    failed = kubectl.run("create", "-f", "-", check=False, input='{"apiVersion": "apps/v1", "kind": "DaemonSet", '
                         '"metadata": {"name": "bad"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, '
                         '"template": {"metadata": {"labels": {"app": "y"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}')
    assert failed.returncode != 0 and "`selector` does not match template `labels`" in failed.stderr
