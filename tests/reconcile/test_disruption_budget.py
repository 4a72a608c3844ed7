"""The PodDisruptionBudget an elastic job keeps: minAvailable = minReplicas over its Workers,
owned by the job, while it runs; none for a static job or on a cluster that serves none."""

from __future__ import annotations

import copy
from typing import Any, Optional

from trainctl.controller.reconcile import reconcile
from trainctl.controller.reconcile.plan import Observed, Plan

from tests.support.jobs import pytorchjob
from tests.support.reconcile import at


def elastic(minimum: int = 2) -> dict[str, Any]:
    job = pytorchjob(master=False, workers=3, elasticPolicy={"minReplicas": minimum, "maxReplicas": 4})
    job["status"] = {"startTime": "2026-01-01T00:00:00Z", "conditions": [
        {"type": "Created", "status": "True", "reason": "PyTorchJobCreated"}]}
    return job


def budgets(plan: Plan) -> list[dict[str, Any]]:
    return [o for o in plan.creates if o["kind"] == "PodDisruptionBudget"]


def observe(pdb: Optional[dict[str, Any]] = None, served: bool = True) -> Observed:
    return Observed(pdb=pdb, disruption_budgets=served)


def test_an_elastic_job_gets_a_budget_of_its_minimum_over_its_workers() -> None:
    job = elastic(minimum=2)
    (pdb,) = budgets(reconcile(job, observe(), at(1)))
    assert pdb["apiVersion"] == "policy/v1" and pdb["metadata"]["name"] == "mnist"
    assert pdb["spec"] == {"minAvailable": 2, "selector": {"matchLabels": {
        "training.kubeflow.org/operator-name": "pytorchjob-controller", "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "worker"}}}
    (owner,) = pdb["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("PyTorchJob", "mnist", True)


def test_a_changed_minimum_updates_the_budget_and_an_unchanged_one_is_left() -> None:
    job = elastic(minimum=2)
    (pdb,) = budgets(reconcile(job, observe(), at(1)))
    stored = {**copy.deepcopy(pdb), "status": {"currentHealthy": 3}}
    stored["metadata"]["resourceVersion"] = "5"
    plan = reconcile(job, observe(stored), at(2))
    assert budgets(plan) == [] and [u for u in plan.updates if u["kind"] == "PodDisruptionBudget"] == []
    job["spec"]["elasticPolicy"]["minReplicas"] = 1
    (updated,) = [u for u in reconcile(job, observe(stored), at(3)).updates if u["kind"] == "PodDisruptionBudget"]
    assert updated["spec"]["minAvailable"] == 1 and updated["metadata"]["resourceVersion"] == "5"


def test_a_finished_or_suspended_job_drops_its_budget() -> None:
    job = elastic()
    (pdb,) = budgets(reconcile(job, observe(), at(1)))
    stored = {**pdb, "metadata": {**pdb["metadata"], "uid": "pdb-uid"}}
    suspended = copy.deepcopy(job)
    suspended["spec"]["runPolicy"] = {"suspend": True}
    finished = copy.deepcopy(job)
    finished["status"]["conditions"].append({"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"})
    for gone in (suspended, finished):
        deletes = [d for d in reconcile(gone, observe(stored), at(2)).deletes if d.kind == "PodDisruptionBudget"]
        assert [(d.name, d.uid, d.api_version) for d in deletes] == [("mnist", "pdb-uid", "policy/v1")]


def test_no_budget_for_a_static_job_or_where_the_cluster_serves_none() -> None:
    assert budgets(reconcile(pytorchjob(master=True, workers=2), observe(), at(1))) == []
    assert budgets(reconcile(elastic(), observe(served=False), at(1))) == []
