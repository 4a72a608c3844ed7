"""A started job whose scaled count leaves its bounds keeps its size with a Warning, never fails.

The CRD's rules refuse such a count at the API; these are the jobs that got one anyway (an
older CRD, an elasticPolicy narrowed under the job).
"""

from __future__ import annotations

import pytest

from tests.support.jobs import pytorchjob
from tests.support.reconcile import Cluster, at, conditions

WORKER = "spec.pytorchReplicaSpecs[Worker].replicas"


def elastic_job(workers: int = 2, low: int = 1, high: int = 3) -> dict:
    job = pytorchjob("el", master=False, workers=workers, restart="OnFailure")
    job["spec"]["elasticPolicy"] = {"minReplicas": low, "maxReplicas": high, "rdzvHost": "etcd-host"}
    return job


def running(job: dict) -> Cluster:
    cluster = Cluster(job)
    cluster.step()
    cluster.set_all("Running")
    cluster.step(at(1))
    return cluster


def workers(cluster: Cluster) -> list[str]:
    return sorted(name for name in cluster.pods if "-worker-" in name)


def scale(cluster: Cluster, replicas: int) -> None:
    cluster.job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = replicas


def warnings(plan) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in plan.events if e.type == "Warning"]


@pytest.mark.parametrize(("replicas", "problem"), [
    (5, "Invalid value: 5: must be between minReplicas (1) and maxReplicas (3), not 5"),
    (0, "must be at least 1"),
])
def test_a_count_outside_the_elastic_range_keeps_the_running_size(replicas, problem):
    cluster = running(elastic_job(workers=2))
    scale(cluster, replicas)
    plan = cluster.step(at(2))
    assert plan.creates == [] and plan.deletes == []
    assert "Failed" not in [c[0] for c in conditions(cluster.job["status"])]
    assert warnings(plan) == [("InvalidReplicas", f"{WORKER}: {problem}; the job keeps 2 Worker replicas")]
    assert workers(cluster) == ["el-worker-0", "el-worker-1"]
    # Later passes keep the size too, and the job goes on to succeed.
    cluster.set_all("Succeeded")
    done = cluster.step(at(3))
    assert conditions(done.status)[-1][:2] == ("Succeeded", "True")


def test_a_job_without_elastic_policy_scaled_to_zero_keeps_its_workers():
    cluster = running(pytorchjob("plain", workers=2, restart="OnFailure"))
    scale(cluster, 0)
    plan = cluster.step(at(2))
    assert plan.deletes == [] and plan.creates == []
    assert [reason for reason, _ in warnings(plan)] == ["InvalidReplicas"]
    assert cluster.job["status"]["replicaStatuses"]["Worker"]["active"] == 2


def test_a_narrowed_range_brings_the_size_within_it():
    cluster = running(elastic_job(workers=3, high=4))
    cluster.job["spec"]["elasticPolicy"]["maxReplicas"] = 2
    plan = cluster.step(at(2))
    assert sorted((d.kind, d.name) for d in plan.deletes) == [("Pod", "el-worker-2"), ("Service", "el-worker-2")]
    assert warnings(plan) == [("InvalidReplicas", f"{WORKER}: Invalid value: 3: must be between minReplicas (1) and maxReplicas (2), "
                                                  "not 3; the job keeps 2 Worker replicas")]


def test_the_size_counts_an_index_whose_pod_is_being_replaced():
    """The Service of a replica outlives its pod between restarts, so the index still counts."""
    cluster = running(elastic_job(workers=3))
    del cluster.pods["el-worker-2"]
    scale(cluster, 7)
    plan = cluster.step(at(2))
    assert [o["metadata"]["name"] for o in plan.creates] == ["el-worker-2"]
    assert "the job keeps 3 Worker replicas" in warnings(plan)[0][1]


def test_with_nothing_observed_the_asked_count_is_brought_within_the_bounds():
    cluster = running(elastic_job(workers=2))
    cluster.pods.clear()
    cluster.services.clear()
    scale(cluster, 5)
    plan = cluster.step(at(2))
    assert sorted(o["metadata"]["name"] for o in plan.creates if o["kind"] == "Pod") == [
        "el-worker-0", "el-worker-1", "el-worker-2"]


def test_a_valid_count_again_scales_as_asked_without_a_warning():
    cluster = running(elastic_job(workers=2))
    scale(cluster, 5)
    cluster.step(at(2))
    scale(cluster, 3)
    plan = cluster.step(at(3))
    assert [o["metadata"]["name"] for o in plan.creates if o["kind"] == "Pod"] == ["el-worker-2"]
    assert warnings(plan) == []


def test_a_job_that_never_started_still_fails_validation():
    job = elastic_job(workers=5)
    plan = Cluster(job).step()
    assert conditions(plan.status) == [("Failed", "True", "PyTorchJobFailedValidation")]
    assert plan.creates == []


def test_any_other_problem_still_fails_a_running_job():
    cluster = running(elastic_job(workers=2))
    scale(cluster, 5)
    cluster.job["spec"]["elasticPolicy"]["rdzvBackend"] = "zookeeper"
    plan = cluster.step(at(2))
    assert conditions(plan.status)[-1] == ("Failed", "True", "PyTorchJobFailedValidation")
