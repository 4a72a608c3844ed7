"""StatefulSets on a real API server, with a stand-in kubelet that makes only the pods it is
told Ready: an ordered set stops at the first pod that is not Ready, goes on once it is, and
records its template as a ControllerRevision; its status is written for kubectl."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from trainctl.cluster.controlplane.api_resources import CONTROLLER_REVISIONS, STATEFULSETS
from trainctl.cluster.controlplane.statefulset_controller import StatefulSetController
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient

from tests.cluster.controlplane.conftest import eventually
from tests.support.kubectl import Kubectl

Obj = dict[str, Any]

STATEFULSET = {
    "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
    "spec": {"serviceName": "db", "replicas": 3, "selector": {"matchLabels": {"app": "db"}},
             "template": {"metadata": {"labels": {"app": "db"}},
                          "spec": {"containers": [{"name": "db", "image": "python:3.11"}]}}}}


class StandInKubelet:
    """Runs the pods named in ``ready`` (Running and Ready) and finishes deletions at once."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.ready: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            for pod in self.client.list(r.PODS, "default")[0]:
                meta = pod["metadata"]
                try:
                    if meta.get("deletionTimestamp"):
                        self.client.delete(r.PODS, "default", meta["name"], grace_period_seconds=0)
                    elif meta["name"] in self.ready and pod.get("status", {}).get("phase") != "Running":
                        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                        pod["status"] = {"phase": "Running",
                                         "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}
                        self.client.replace(r.PODS, pod, subresource="status")
                except ApiError:
                    pass  # changed meanwhile: the next round


@pytest.fixture
def kubelet(client: KubeClient) -> Iterator[StandInKubelet]:
    stand_in = StandInKubelet(client)
    stand_in.thread.start()
    running = StatefulSetController(client, resync_period=1.0)
    running.start()
    try:
        yield stand_in
    finally:
        stand_in.stop.set()
        running.stop()
        stand_in.thread.join(5)


def names(client: KubeClient) -> set[str]:
    return {p["metadata"]["name"] for p in client.list(r.PODS, "default", label_selector="app=db")[0]
            if not p["metadata"].get("deletionTimestamp")}


def test_an_ordered_set_waits_for_each_pod_to_be_ready(client: KubeClient, kube_env: dict[str, str],
                                                       kubelet: StandInKubelet) -> None:
    kubectl = Kubectl(kube_env)
    kubectl.apply(STATEFULSET)
    eventually(lambda: names(client) == {"db-0"}, what="db-0 made first")
    eventually(lambda: client.get(STATEFULSETS, "default", "db").get("status", {}).get("replicas") == 1,
               what="the status counts db-0")
    assert names(client) == {"db-0"}  # db-0 is not Ready: nothing more was made
    kubelet.ready.add("db-0")
    eventually(lambda: names(client) == {"db-0", "db-1"}, what="db-1 once db-0 is Ready")
    kubelet.ready.update({"db-1", "db-2"})
    kubectl("rollout", "status", "sts/db", "--timeout=120s", timeout=150)
    assert names(client) == {"db-0", "db-1", "db-2"}
    [revision] = client.list(CONTROLLER_REVISIONS, "default")[0]
    assert revision["revision"] == 1 and revision["metadata"]["ownerReferences"][0]["name"] == "db"
    status = client.get(STATEFULSETS, "default", "db")["status"]
    assert status["currentRevision"] == status["updateRevision"] == revision["metadata"]["name"]
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"], status["observedGeneration"]) == (3, 3, 3, 1)

    kubectl("scale", "sts", "db", "--replicas=1")
    eventually(lambda: names(client) == {"db-0"}, what="scaled down to db-0")
