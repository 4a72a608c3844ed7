"""Deployments on a real API server: kubectl create, scale, set image, rollout status and undo,
with the ReplicaSet and Deployment controllers and a stand-in kubelet that makes pods Ready."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from trainctl.cluster.controlplane.deployment_controller import DeploymentController
from trainctl.cluster.controlplane.replicaset_controller import ReplicaSetController
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient

from tests.cluster.controlplane.conftest import eventually
from tests.support.kubectl import Kubectl

Obj = dict[str, Any]


def _mark_ready(client: KubeClient, stop: threading.Event) -> None:
    """What a kubelet would do: every new pod runs and is Ready."""
    while not stop.wait(0.2):
        for pod in client.list(r.PODS, "default")[0]:
            if pod.get("status", {}).get("phase") == "Running" or pod["metadata"].get("deletionTimestamp"):
                continue
            now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            pod["spec"]["nodeName"] = pod["spec"].get("nodeName") or "node-1"
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}
            try:
                client.replace(r.PODS, pod, subresource="status")
            except ApiError:
                pass  # changed meanwhile: the next round


@pytest.fixture
def controllers(client: KubeClient) -> Iterator[None]:
    running = [ReplicaSetController(client, resync_period=1.0), DeploymentController(client, resync_period=1.0)]
    stop = threading.Event()
    kubelet = threading.Thread(target=_mark_ready, args=(client, stop), daemon=True)
    kubelet.start()
    for controller in running:
        controller.start()
    try:
        yield
    finally:
        stop.set()
        for controller in running:
            controller.stop()
        kubelet.join(5)


def _live_pods(client: KubeClient) -> list[Obj]:
    return [p for p in client.list(r.PODS, "default", label_selector="app=web")[0] if not p["metadata"].get("deletionTimestamp")]


def test_create_scale_roll_out_and_undo_a_deployment(client: KubeClient, kube_env: dict[str, str], controllers: None) -> None:
    kubectl = Kubectl(kube_env)
    kubectl("create", "deployment", "web", "--image=python:3.11", "--replicas=2", "--", "python3", "-m", "http.server")
    deployment = client.get(r.DEPLOYMENTS, "default", "web")
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    kubectl("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
    [rs] = client.list(r.REPLICASETS, "default")[0]
    pods = _live_pods(client)
    assert len(pods) == 2 and all(p["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"] for p in pods)
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    header, row = kubectl("get", "deploy").splitlines()
    assert header.split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"] and row.split()[:4] == ["web", "2/2", "2", "2"]
    header, row = kubectl("get", "rs").splitlines()
    assert header.split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"] and row.split()[:4] == [rs["metadata"]["name"], "2", "2", "2"]

    kubectl("scale", "deploy/web", "--replicas=3")
    eventually(lambda: len(_live_pods(client)) == 3, what="a third pod")
    kubectl("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
    scale = client.get(r.DEPLOYMENTS, "default", "web", subresource="scale")
    assert (scale["spec"]["replicas"], scale["status"]["replicas"], scale["status"]["selector"]) == (3, 3, "app=web")

    victim = _live_pods(client)[0]["metadata"]["name"]
    kubectl("delete", "pod", victim, "--wait=false")
    eventually(lambda: len(_live_pods(client)) == 3 and victim not in {p["metadata"]["name"] for p in _live_pods(client)},
               what="the deleted pod replaced")

    kubectl("set", "image", "deployment/web", "python=python:3.12")
    kubectl("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
    replicasets = {x["metadata"]["name"]: x for x in client.list(r.REPLICASETS, "default")[0]}
    assert len(replicasets) == 2 and replicasets[rs["metadata"]["name"]]["spec"]["replicas"] == 0
    images = {p["spec"]["containers"][0]["image"] for p in _live_pods(client)}
    eventually(lambda: {p["spec"]["containers"][0]["image"] for p in _live_pods(client)} == {"python:3.12"},
               what="only new pods left", timeout=60)
    assert "python:3.12" in images

    kubectl("rollout", "undo", "deployment/web")
    kubectl("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
    back = client.get(r.REPLICASETS, "default", rs["metadata"]["name"])
    assert back["spec"]["replicas"] == 3 and back["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    status = client.get(r.DEPLOYMENTS, "default", "web")["status"]
    conditions = {c["type"]: c["reason"] for c in status["conditions"]}
    assert conditions == {"Available": "MinimumReplicasAvailable", "Progressing": "NewReplicaSetAvailable"}

    # A paused Deployment keeps its template change until it is resumed; a restart is a new template.
    kubectl("rollout", "pause", "deployment/web")
    kubectl("set", "image", "deployment/web", "python=python:3.13")
    eventually(lambda: {c["type"]: c["reason"] for c in client.get(r.DEPLOYMENTS, "default", "web")["status"]["conditions"]}
               .get("Progressing") == "DeploymentPaused", what="the Deployment seen paused")
    assert len(client.list(r.REPLICASETS, "default")[0]) == 2
    kubectl("rollout", "resume", "deployment/web")
    kubectl("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
    assert len(client.list(r.REPLICASETS, "default")[0]) == 3
    kubectl("rollout", "restart", "deployment/web")
    kubectl("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
    replicasets = {x["metadata"]["name"]: x for x in client.list(r.REPLICASETS, "default")[0]}
    assert len(replicasets) == 4 and sorted(x["spec"]["replicas"] for x in replicasets.values()) == [0, 0, 0, 3]

    described = kubectl("describe", "deployment", "web")
    assert "StrategyType:           RollingUpdate" in described and "NewReplicaSet:" in described
    assert "ScalingReplicaSet" in described
    assert {line.split()[0] for line in kubectl("get", "all", "--no-headers").splitlines()} >= {"deployment.apps/web"}

    # Deleting the Deployment takes its ReplicaSets and their pods (owner references, garbage collection).
    kubectl("delete", "deployment", "web", "--wait=false")
    eventually(lambda: not client.list(r.REPLICASETS, "default")[0] and not _live_pods(client), what="ReplicaSets and pods collected")


def test_a_replicaset_adopts_an_orphan_its_selector_matches(client: KubeClient, kube_env: dict[str, str], controllers: None) -> None:
    kubectl = Kubectl(kube_env)
    container = {"name": "main", "image": "busybox", "command": ["sleep", "3600"]}
    kubectl.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan", "labels": {"app": "cache"}}, "spec": {"containers": [container]}})
    kubectl.apply({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "cache"},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "cache"}},
                            "template": {"metadata": {"labels": {"app": "cache"}}, "spec": {"containers": [container]}}}})
    rs = client.get(r.REPLICASETS, "default", "cache")
    orphan = eventually(lambda: (p := client.get(r.PODS, "default", "orphan"))["metadata"].get("ownerReferences") and p,
                        what="the orphan adopted")
    assert orphan["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    eventually(lambda: client.get(r.REPLICASETS, "default", "cache").get("status", {}).get("readyReplicas") == 2, what="two ready")
    assert len(client.list(r.PODS, "default", label_selector="app=cache")[0]) == 2  # the orphan and one new pod


def test_pods_the_server_refuses_set_replicafailure(client: KubeClient, kube_env: dict[str, str], controllers: None) -> None:
    container = {"name": "main", "image": "busybox", "command": ["sleep", "3600"]}
    Kubectl(kube_env).apply({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "nobody"},
                             "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "nobody"}},
                                      "template": {"metadata": {"labels": {"app": "nobody"}},
                                                   "spec": {"serviceAccountName": "missing", "containers": [container]}}}})
    conditions = eventually(lambda: client.get(r.REPLICASETS, "default", "nobody").get("status", {}).get("conditions"),
                            what="the ReplicaFailure condition")
    assert conditions[0]["type"] == "ReplicaFailure" and conditions[0]["reason"] == "FailedCreate"
    assert 'serviceaccount "missing" not found' in conditions[0]["message"]
