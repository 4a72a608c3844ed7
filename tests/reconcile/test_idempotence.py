"""Same inputs, same plan; a plan applied and reconciled again leaves nothing to do."""

from __future__ import annotations

import copy

import pytest

from trainctl.api import kinds
from trainctl.controller.reconcile import ReconcileConfig

from tests.support.jobs import msjob, pytorchjob
from tests.support.reconcile import Cluster, at

METRICS = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]


def elastic_with_hpa():
    job = pytorchjob("el", master=False, workers=3)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 4, "metrics": METRICS}
    return job


JOBS = {
    "static": (pytorchjob("mnist", workers=3), ReconcileConfig()),
    "elastic": (elastic_with_hpa(), ReconcileConfig()),
    "msjob": (msjob("ms", ps=2, workers=3), ReconcileConfig()),
    "scheduler-plugins": (pytorchjob("mnist", workers=2), ReconcileConfig(gang_scheduler="coscheduler")),
}


@pytest.mark.parametrize("name", JOBS)
def test_same_inputs_same_plan_and_inputs_untouched(name):
    job, config = JOBS[name]
    cluster = Cluster(job, config)
    cluster.step()
    cluster.set_all("Running")
    job_before, observed = copy.deepcopy(cluster.job), cluster.observed()
    observed_before = copy.deepcopy(observed)
    first = cluster.reconcile(at(5))
    second = cluster.reconcile(at(5))
    assert first == second
    assert cluster.job == job_before and observed == observed_before


@pytest.mark.parametrize("name", JOBS)
def test_applied_plan_converges_to_an_empty_plan(name):
    job, config = JOBS[name]
    cluster = Cluster(job, config)
    for _ in range(3):  # MSJob needs its Scheduler Service before the pods
        cluster.step()
    assert cluster.reconcile(at(1)).empty
    cluster.set_all("Running")
    cluster.step(at(2))
    plan = cluster.reconcile(at(3))
    assert plan.empty and plan.requeue_after is None


def test_applying_the_same_plan_twice_is_harmless():
    cluster = Cluster(pytorchjob("mnist", workers=2))
    plan = cluster.reconcile()
    cluster.apply(plan)
    state = (copy.deepcopy(cluster.pods), copy.deepcopy(cluster.services), copy.deepcopy(cluster.job))
    cluster.apply(plan)  # creates of existing names are no-ops, the status is the same
    assert (cluster.pods, cluster.services, cluster.job) == state
    assert cluster.reconcile(at(1)).empty


def test_order_is_deterministic_whatever_the_map_order():
    job = pytorchjob("mnist", workers=2)
    specs = job["spec"]["pytorchReplicaSpecs"]
    job["spec"]["pytorchReplicaSpecs"] = {"Worker": specs["Worker"], "Master": specs["Master"]}
    names = [o["metadata"]["name"] for o in Cluster(job).reconcile().creates if o["kind"] == "Pod"]
    assert names == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    ms = msjob("ms", ps=1, workers=1)
    ms_specs = ms["spec"]["msReplicaSpecs"]
    ms["spec"]["msReplicaSpecs"] = {k: ms_specs[k] for k in ("Worker", "PS", "Scheduler")}
    cluster = Cluster(ms)
    cluster.step()
    names = [o["metadata"]["name"] for o in cluster.reconcile().creates]
    assert names == ["ms-scheduler-0", "ms-ps-0", "ms-worker-0"]


def test_plans_share_no_mutable_state_with_the_job():
    job = pytorchjob("mnist", workers=2)
    cluster = Cluster(job)
    plan = cluster.reconcile()
    pods = [o for o in plan.creates if o["kind"] == "Pod"]
    pods[1]["spec"]["containers"][0]["env"].append({"name": "X", "value": "1"})
    pods[1]["metadata"]["labels"]["x"] = "y"
    assert "x" not in pods[2]["metadata"]["labels"]
    assert [e["name"] for e in pods[2]["spec"]["containers"][0]["env"]].count("X") == 0
    assert "env" not in job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("name", ["static", "msjob"])
def test_a_reconcile_parses_the_job_once(name, monkeypatch):
    job, config = JOBS[name]
    cluster = Cluster(job, config)
    model = kinds.BY_KIND[job["kind"]].model
    calls = []
    original = model.model_validate.__func__

    def counting(cls, obj, *args, **kwargs):
        calls.append(obj)
        return original(cls, obj, *args, **kwargs)

    monkeypatch.setattr(model, "model_validate", classmethod(counting))
    plan = cluster.reconcile()
    assert plan.creates and len(calls) == 1
