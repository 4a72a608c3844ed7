"""The ResourceQuota controller against a real API server: status.hard and status.used follow
the namespace's pods (an ended pod stops counting) and its other counted objects."""

from __future__ import annotations

from typing import Any

import pytest

from trainctl.cluster.controlplane.api_resources import RESOURCE_QUOTAS
from trainctl.cluster.controlplane.resourcequota_controller import ResourceQuotaController
from trainctl.kube import restmapper as r
from trainctl.kube.client import KubeClient

from .conftest import eventually

NS = "default"


@pytest.fixture
def controller(client: KubeClient) -> Any:
    running = ResourceQuotaController(client, resync_period=5.0)
    running.start()
    yield running
    running.stop()


def used(client: KubeClient) -> dict[str, str]:
    return (client.get(RESOURCE_QUOTAS, NS, "compute").get("status") or {}).get("used") or {}


def test_the_status_counts_running_pods_and_forgets_ended_ones(client: KubeClient, controller: Any) -> None:
    client.create(RESOURCE_QUOTAS, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": NS},
                                    "spec": {"hard": {"pods": "5", "requests.cpu": "2", "limits.memory": "2Gi",
                                                      "configmaps": "10"}}})
    for name in ("a", "b"):
        client.create(r.PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
                               "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                                   "requests": {"cpu": "250m"}, "limits": {"cpu": "500m", "memory": "512Mi"}}}]}})
    expected = {"pods": "2", "requests.cpu": "500m", "limits.memory": "1Gi"}
    eventually(lambda: all(used(client).get(k) == v for k, v in expected.items()), what="two pods counted")
    status = client.get(RESOURCE_QUOTAS, NS, "compute")["status"]
    assert status["hard"] == {"pods": "5", "requests.cpu": "2", "limits.memory": "2Gi", "configmaps": "10"}
    assert int(status["used"]["configmaps"]) >= 0
    pod = client.get(r.PODS, NS, "a")
    pod["status"] = {"phase": "Succeeded"}
    client.replace(r.PODS, pod, subresource="status")
    eventually(lambda: used(client).get("pods") == "1" and used(client).get("limits.memory") == "512Mi",
               what="the ended pod no longer counted")
    before = int(used(client)["configmaps"])
    client.create(r.CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra", "namespace": NS}})
    eventually(lambda: int(used(client)["configmaps"]) == before + 1, what="a new ConfigMap counted on a later pass")
