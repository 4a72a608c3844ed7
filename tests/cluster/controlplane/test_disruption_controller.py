"""The disruption controller against a real API server: it keeps a budget's status as pods
come, become Ready and are evicted, so the Eviction API refuses and then allows."""

from __future__ import annotations

from typing import Any

import pytest

from trainctl.cluster.apiserver.process import ApiServerHandle
from trainctl.cluster.controlplane.api_resources import PODDISRUPTIONBUDGETS
from trainctl.cluster.controlplane.disruption_controller import DisruptionController
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient

from .conftest import eventually

NS = "default"


def ready_pod(client: KubeClient, name: str) -> None:
    client.create(r.PODS, {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": NS, "labels": {"app": "web"}},
                           "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "x"}]}})
    pod = client.get(r.PODS, NS, name)
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    client.replace(r.PODS, pod, subresource="status")


def status(client: KubeClient) -> dict[str, Any]:
    return client.get(PODDISRUPTIONBUDGETS, NS, "web").get("status") or {}


def evict(client: KubeClient, name: str) -> int:
    """The eviction's answer: 201, or the refusal's code (``client`` must not retry a 429)."""
    try:
        client.create(r.PODS, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}},
                      subresource="eviction")
    except ApiError as exc:
        return exc.code
    return 201


@pytest.fixture
def controller(client: KubeClient) -> Any:
    running = DisruptionController(client, resync_period=5.0)
    running.start()
    yield running
    running.stop()


def test_the_status_follows_ready_pods_and_holds_evictions_at_the_minimum(
        apiserver: ApiServerHandle, client: KubeClient, controller: DisruptionController) -> None:
    once = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), max_attempts=1)
    try:
        client.create(PODDISRUPTIONBUDGETS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                             "metadata": {"name": "web", "namespace": NS},
                                             "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
        eventually(lambda: status(client).get("observedGeneration") == 1, what="the budget observed")
        assert status(client)["expectedPods"] == 0
        for name in ("web-0", "web-1", "web-2"):
            ready_pod(client, name)
        eventually(lambda: status(client)["disruptionsAllowed"] == 1, what="one disruption allowed")
        current = status(client)
        assert (current["currentHealthy"], current["desiredHealthy"], current["expectedPods"]) == (3, 2, 3)
        assert [(c["type"], c["status"], c["reason"]) for c in current["conditions"]] == [
            ("DisruptionAllowed", "True", "SufficientPods")]

        assert evict(once, "web-0") == 201
        assert evict(once, "web-1") == 429  # the budget's one disruption is taken
        # the evicted pod goes (its kubelet would confirm); the controller counts 2 healthy of 2 needed
        client.delete(r.PODS, NS, "web-0", grace_period_seconds=0)
        eventually(lambda: status(client)["expectedPods"] == 2, what="the evicted pod gone from the count")
        assert (status(client)["currentHealthy"], status(client)["disruptionsAllowed"]) == (2, 0)
        assert evict(once, "web-1") == 429
        ready_pod(client, "web-3")  # a replacement comes back Ready
        eventually(lambda: status(client)["disruptionsAllowed"] == 1, what="a disruption allowed again")
        assert evict(once, "web-1") == 201
    finally:
        once.close()
