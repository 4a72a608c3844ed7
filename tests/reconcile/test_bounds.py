"""One job cannot make a reconcile's work unbounded: a replica limit and creates in batches."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from trainctl.controller.reconcile import ReconcileConfig

from tests.support.jobs import msjob, pytorchjob
from tests.support.reconcile import Cluster, conditions

LIMIT_FLAG = "replicas per job (--max-replicas-per-job)"


def _kinds_created(plan):
    counts: dict[str, int] = {}
    for obj in plan.creates:
        counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
    return counts


@pytest.mark.parametrize(
    "job, path",
    [
        (pytorchjob("huge", workers=10**9), "spec.pytorchReplicaSpecs[Worker].replicas"),
        (msjob("huge", workers=10**9), "spec.msReplicaSpecs[Worker].replicas"),
    ],
)
def test_a_job_past_the_replica_limit_fails_at_once_in_bounded_time_and_memory(job, path):
    cluster = Cluster(job)
    tracemalloc.start()
    started = time.perf_counter()
    plan = cluster.step()
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 2.0 and peak < 20 * 2**20  # a handful of dicts, not a billion pods
    assert plan.creates == []
    failed = [c for c in plan.status["conditions"] if c["type"] == "Failed"][0]
    assert failed["status"] == "True" and failed["reason"] == f"{job['kind']}ReplicaLimitExceeded"
    assert failed["message"] == f"{path}: 1000000000 exceeds the controller's limit of 10000 {LIMIT_FLAG}"
    assert plan.status["conditions"][-1]["type"] == "Failed" and plan.status["completionTime"]
    assert "failed" in plan.metrics and [e.reason for e in plan.events if e.type == "Warning"]
    assert cluster.reconcile().empty  # decided once; nothing repeats


def test_the_limit_counts_every_replica_of_the_job():
    config = ReconcileConfig(max_replicas_per_job=100)
    plan = Cluster(pytorchjob("sum", workers=100), config).step()
    failed = plan.status["conditions"][-1]
    assert failed["type"] == "Failed"
    assert failed["message"] == f"spec.pytorchReplicaSpecs: 101 replicas in all exceed the controller's limit of 100 {LIMIT_FLAG}"
    assert plan.creates == []


def test_a_job_at_the_limit_runs():
    plan = Cluster(pytorchjob("edge", workers=99), ReconcileConfig(max_replicas_per_job=100)).step()
    assert ("Failed", "True") not in [(t, s) for t, s, _ in conditions(plan.status)]
    assert _kinds_created(plan)["Pod"] == 100


def test_a_large_job_is_created_in_bounded_batches_and_converges():
    cluster = Cluster(pytorchjob("big", workers=2000))
    passes = []
    for _ in range(10):
        plan = cluster.step()
        created = _kinds_created(plan)
        if not created:
            break
        passes.append(created)
        assert created.get("Pod", 0) <= 500 and created.get("Service", 0) <= 500
        if len(cluster.pods) < 2001:
            assert plan.requeue_after == 0.0  # the rest follow without waiting for an event
    assert len(passes) == 5  # 2001 pods and Services, 500 a pass
    assert len(cluster.pods) == 2001 and len(cluster.services) == 2001
    assert sorted(int(name.rsplit("-", 1)[1]) for name in cluster.pods if "-worker-" in name) == list(range(2000))
    assert cluster.reconcile().requeue_after is None


def test_missing_pods_are_refilled_lowest_index_first_within_the_budget():
    cluster = Cluster(pytorchjob("gaps", workers=30), ReconcileConfig(max_creates_per_pass=4))
    for _ in range(10):
        cluster.step()
    assert len(cluster.pods) == 31
    for index in (3, 7, 11, 20, 29, 5):
        del cluster.pods[f"gaps-worker-{index}"]
    plan = cluster.step()
    assert [o["metadata"]["name"] for o in plan.creates] == [f"gaps-worker-{i}" for i in (3, 5, 7, 11)]
    assert plan.requeue_after == 0.0
    assert [o["metadata"]["name"] for o in cluster.step().creates] == ["gaps-worker-20", "gaps-worker-29"]
