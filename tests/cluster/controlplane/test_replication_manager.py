"""ReplicationControllers on a real API server, as the Python client's own e2e suite uses them:
served with kube's defaults and scale subresource, run by the ReplicaSet rules, their pods
owned by the ReplicationController and deleted with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from trainctl.cluster.controlplane.replication_manager import ReplicationManager
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient

from tests.cluster.controlplane.conftest import eventually

Obj = dict[str, Any]


@pytest.fixture
def manager(client: KubeClient) -> Iterator[ReplicationManager]:
    running = ReplicationManager(client, resync_period=1.0)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _pods(client: KubeClient) -> list[Obj]:
    return [p for p in client.list(r.PODS, "default", label_selector="name=frontend")[0]
            if not p["metadata"].get("deletionTimestamp")]


def test_a_replication_controller_keeps_its_pods_and_takes_them_along(client: KubeClient, manager: ReplicationManager) -> None:
    # The e2e suite's manifest: no selector (it defaults to the template's labels).
    created = client.create(r.REPLICATIONCONTROLLERS, {
        "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "frontend", "namespace": "default"},
        "spec": {"replicas": 2, "template": {"metadata": {"labels": {"name": "frontend"}},
                                             "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}}).object
    assert created is not None
    assert created["spec"]["selector"] == {"name": "frontend"}
    assert created["metadata"]["labels"] == {"name": "frontend"}

    pods = eventually(lambda: (found := _pods(client)) and len(found) == 2 and found, what="two pods")
    for pod in pods:
        (owner,) = pod["metadata"]["ownerReferences"]
        assert (owner["apiVersion"], owner["kind"], owner["name"], owner["controller"]) == (
            "v1", "ReplicationController", "frontend", True)
        assert pod["metadata"]["generateName"] == "frontend-"
    eventually(lambda: (client.get(r.REPLICATIONCONTROLLERS, "default", "frontend").get("status") or {}).get("replicas") == 2,
               what="status.replicas 2")

    scale = client.get(r.REPLICATIONCONTROLLERS, "default", "frontend", subresource="scale")
    assert scale["status"]["selector"] == "name=frontend"
    client.replace(r.REPLICATIONCONTROLLERS, {**scale, "spec": {"replicas": 1}}, subresource="scale")
    eventually(lambda: len(_pods(client)) == 1, what="one pod left")

    client.delete(r.REPLICATIONCONTROLLERS, "default", "frontend", propagation="Background")
    eventually(lambda: not _pods(client), what="the pods deleted with their controller")


def test_a_selector_its_template_does_not_match_is_refused(client: KubeClient) -> None:
    with pytest.raises(ApiError) as refused:
        client.create(r.REPLICATIONCONTROLLERS, {
            "apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "odd", "namespace": "default"},
            "spec": {"selector": {"name": "other"}, "template": {"metadata": {"labels": {"name": "odd"}},
                                                                "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    assert refused.value.code == 422
    assert "`selector` does not match template `labels`" in str(refused.value)
