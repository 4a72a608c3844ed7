"""Evicted, preempted and reclaimed pods: an elastic job shrinks and grows back, a static job
restarts once with a message naming the disruption; neither counts a failure."""

from __future__ import annotations

from typing import Any

import pytest

from trainctl.controller.reconcile.disruption import disruption

from tests.support.jobs import pytorchjob
from tests.support.reconcile import Cluster, at, node

RECLAIM = {"key": "trainctl.io/spot-reclaim", "value": "1764300000", "effect": "NoExecute"}


def target(reason: str, when: str = "2026-01-01T00:00:05Z") -> dict[str, Any]:
    return {"type": "DisruptionTarget", "status": "True", "reason": reason, "lastTransitionTime": when}


def pod(*conditions: dict[str, Any], terminating: bool = False, node_name: str = "node-b") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j-worker-1", "uid": "u1"}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:35Z"
        meta["deletionGracePeriodSeconds"] = 30
    return {"metadata": meta, "spec": {"nodeName": node_name}, "status": {"phase": "Running", "conditions": list(conditions)}}


@pytest.mark.parametrize(("reason", "said"), [
    ("EvictionByEvictionAPI", "evicted on node node-b"),
    ("PreemptionByScheduler", "preempted by the scheduler on node node-b"),
    ("TerminationByKubelet", "terminated by its kubelet (node shutdown) on node node-b"),
    ("DeletionByTaintManager", "evicted by a NoExecute taint on node node-b"),
])
def test_each_disruption_target_reason_is_named(reason: str, said: str) -> None:
    found = disruption(pod(target(reason)), {"node-b": node("node-b")})
    assert found is not None and found.why == said and found.since is not None


def test_a_pod_deleted_from_a_reclaimed_node_is_preempted_even_without_a_condition() -> None:
    nodes = {"node-b": node("node-b", taints=[RECLAIM])}
    found = disruption(pod(terminating=True), nodes)
    assert found is not None and found.describe() == "pod j-worker-1 was preempted: node node-b was reclaimed"
    assert found.since is not None and found.since.second == 5  # the delete's deadline less its grace


def test_plain_pods_and_a_false_condition_are_not_disrupted() -> None:
    nodes = {"node-b": node("node-b")}
    assert disruption(pod(), nodes) is None
    assert disruption(pod(terminating=True), nodes) is None  # a delete on a healthy node says nothing
    assert disruption(pod({**target("EvictionByEvictionAPI"), "status": "False"}), nodes) is None
    assert disruption(pod(node_name="node-b"), {"node-b": node("node-b", taints=[RECLAIM])}) is None  # not deleted yet


def started(job: dict[str, Any]) -> Cluster:
    cluster = Cluster(job)
    cluster.step(at(0))
    cluster.step(at(0))
    for name, one in cluster.pods.items():
        one["spec"]["nodeName"] = "node-b" if name.endswith("worker-1") else "node-a"
        one["status"] = {"phase": "Running"}
        one["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    cluster.nodes = {"node-a": node("node-a"), "node-b": node("node-b")}
    cluster.step(at(1))
    return cluster


def reclaim_worker_1(cluster: Cluster) -> None:
    """node-b is being reclaimed: the taint manager marked worker-1 and deleted it."""
    cluster.nodes["node-b"] = node("node-b", taints=[RECLAIM])
    worker = cluster.pods["mnist-worker-1"]
    worker["status"]["conditions"] = [target("DeletionByTaintManager", "2026-01-01T00:00:05Z")]
    worker["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:35Z"
    worker["metadata"]["deletionGracePeriodSeconds"] = 30


def elastic() -> dict[str, Any]:
    return pytorchjob(master=False, workers=3, elasticPolicy={"minReplicas": 1, "maxReplicas": 3})


def test_an_elastic_job_shrinks_without_a_failure_or_restart_and_grows_back() -> None:
    cluster = started(elastic())
    reclaim_worker_1(cluster)
    plan = cluster.step(at(6))
    assert plan.deletes == []  # the survivors keep training
    status = cluster.job["status"]
    assert not status.get("restartCount")
    assert status["replicaStatuses"]["Worker"].get("active") == 2 and not status["replicaStatuses"]["Worker"].get("failed")
    assert not any(c["type"] in ("Restarting", "Failed") and c["status"] == "True" for c in status["conditions"])
    (said,) = [e for e in plan.problems if e.reason == "ElasticShrink"]
    assert said.type == "Normal" and "mnist-worker-1" in said.message and "node node-b was reclaimed" in said.message
    # Gone from the node: its index is asked for again and waits for room (Pending).
    cluster.pods.pop("mnist-worker-1")
    plan = cluster.step(at(40))
    assert [o["metadata"]["name"] for o in plan.creates] == ["mnist-worker-1"]
    assert not cluster.job["status"].get("restartCount") and plan.problems == []


def test_an_elastic_worker_failed_by_a_node_shutdown_is_replaced_without_a_restart() -> None:
    cluster = started(elastic())
    worker = cluster.pods["mnist-worker-1"]
    worker["status"] = {"phase": "Failed", "conditions": [target("TerminationByKubelet")]}
    plan = cluster.step(at(6))
    assert [(d.name, d.cause) for d in plan.deletes] == [
        ("mnist-worker-1", "to be recreated: it was terminated by its kubelet (node shutdown) on node node-b")]
    assert not cluster.job["status"].get("restartCount")
    assert not cluster.job["status"]["replicaStatuses"]["Worker"].get("failed")


def test_a_static_job_restarts_once_and_names_the_reclaim() -> None:
    cluster = started(pytorchjob(master=True, workers=2, restart="OnFailure"))
    reclaim_worker_1(cluster)
    plan = cluster.step(at(6))
    assert sorted(d.name for d in plan.deletes) == ["mnist-master-0", "mnist-worker-0"]
    assert cluster.job["status"]["restartCount"] == 1
    restarting = next(c for c in cluster.job["status"]["conditions"] if c["type"] == "Restarting")
    assert restarting["status"] == "True"
    assert restarting["message"] == (
        "PyTorchJob mnist is restarting because pod mnist-worker-1 was preempted: node node-b was reclaimed.")
    assert not any(c["type"] == "Failed" and c["status"] == "True" for c in cluster.job["status"]["conditions"])
    # The replacements, newer than the reclaim, are not restarted again while worker-1 terminates.
    plan = cluster.step(at(7))
    for name in ("mnist-master-0", "mnist-worker-0"):
        assert name in [o["metadata"]["name"] for o in plan.creates]
    for created in plan.creates:
        cluster.pods.get(created["metadata"]["name"], {}).setdefault("metadata", {})["creationTimestamp"] = "2026-01-01T00:00:07Z"
    plan = cluster.step(at(8))
    assert plan.deletes == [] and cluster.job["status"]["restartCount"] == 1
