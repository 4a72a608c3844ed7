"""A chosen worker out: an elastic job scales in by pod-deletion-cost, keeps stable indices and
fills its holes first on a scale out; a static job still loses its highest indices."""

from __future__ import annotations

from typing import Any

import pytest

from trainctl.controller.reconcile.members import chosen_indices, deletion_cost

from tests.support.jobs import pytorchjob
from tests.support.reconcile import Cluster, at

COST = "controller.kubernetes.io/pod-deletion-cost"


def pod(index: int, cost: Any = None, *, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"j-worker-{index}"}
    if cost is not None:
        meta["annotations"] = {COST: cost}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


@pytest.mark.parametrize(("value", "cost"), [(None, 0), ("-100", -100), ("7", 7), (" 3 ", 3), ("cheap", 0), ("1.5", 0)])
def test_deletion_cost_is_an_integer_or_zero(value: Any, cost: int) -> None:
    assert deletion_cost(pod(0, value)) == cost


def test_lowest_cost_goes_first_then_highest_index() -> None:
    pods = {0: pod(0), 1: pod(1, "-100"), 2: pod(2)}
    assert chosen_indices(pods, {}, 2) == {0, 2}
    assert chosen_indices({0: pod(0), 1: pod(1), 2: pod(2)}, {}, 2) == {0, 1}
    assert chosen_indices({0: pod(0, "5"), 1: pod(1, "5"), 2: pod(2, "9")}, {}, 1) == {2}


def test_an_index_without_a_live_pod_goes_before_any_running_worker() -> None:
    services = {0: {}, 1: {}, 2: {}}
    assert chosen_indices({0: pod(0), 2: pod(2, "-100"), 1: pod(1, terminating=True)}, services, 2) == {0, 2}


def test_holes_fill_lowest_first_and_terminating_pods_are_not_members() -> None:
    assert chosen_indices({0: pod(0), 2: pod(2)}, {}, 3) == {0, 1, 2}
    assert chosen_indices({0: pod(0), 2: pod(2)}, {}, 4) == {0, 1, 2, 3}
    assert chosen_indices({0: pod(0), 1: pod(1, terminating=True), 2: pod(2)}, {}, 2) == {0, 2}
    assert chosen_indices({}, {}, 3) == {0, 1, 2}


def elastic_started(workers: int = 3) -> Cluster:
    job = pytorchjob(master=False, workers=workers, elasticPolicy={"minReplicas": 1, "maxReplicas": 4})
    cluster = Cluster(job)
    cluster.step(at(0))
    cluster.step(at(0))
    cluster.set_all("Running")
    cluster.step(at(1))
    return cluster


def scale(cluster: Cluster, replicas: int) -> None:
    cluster.job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = replicas


def workers(cluster: Cluster) -> list[str]:
    return sorted(name for name in cluster.pods if "-worker-" in name)


def test_scale_in_removes_the_annotated_worker_and_its_service_only() -> None:
    cluster = elastic_started()
    cluster.pods["mnist-worker-1"]["metadata"]["annotations"] = {COST: "-100"}
    scale(cluster, 2)
    plan = cluster.step(at(2))
    assert sorted((d.kind, d.name) for d in plan.deletes) == [("Pod", "mnist-worker-1"), ("Service", "mnist-worker-1")]
    assert plan.creates == []
    assert workers(cluster) == ["mnist-worker-0", "mnist-worker-2"]
    # The survivors keep running: the job neither fails nor restarts, and the next pass is quiet.
    plan = cluster.step(at(3))
    assert plan.deletes == [] and plan.creates == []
    status = cluster.job["status"]
    assert not status.get("restartCount")
    assert status["replicaStatuses"]["Worker"].get("active") == 2 and not status["replicaStatuses"]["Worker"].get("failed")
    assert all(cond["type"] not in ("Failed", "Restarting") or cond["status"] != "True" for cond in status["conditions"])


def test_a_later_scale_out_fills_the_hole_first() -> None:
    cluster = elastic_started()
    cluster.pods["mnist-worker-1"]["metadata"]["annotations"] = {COST: "-100"}
    scale(cluster, 2)
    cluster.step(at(2))
    scale(cluster, 3)
    plan = cluster.step(at(3))
    assert sorted((o["kind"], o["metadata"]["name"]) for o in plan.creates) == [("Pod", "mnist-worker-1"), ("Service", "mnist-worker-1")]
    scale(cluster, 4)
    plan = cluster.step(at(4))
    assert sorted(o["metadata"]["name"] for o in plan.creates if o["kind"] == "Pod") == ["mnist-worker-3"]


def test_without_costs_the_highest_index_goes() -> None:
    cluster = elastic_started()
    scale(cluster, 2)
    plan = cluster.step(at(2))
    assert sorted(d.name for d in plan.deletes) == ["mnist-worker-2", "mnist-worker-2"]


def test_a_failed_worker_past_the_hole_is_restarted_under_its_own_name() -> None:
    cluster = elastic_started()
    cluster.pods["mnist-worker-1"]["metadata"]["annotations"] = {COST: "-100"}
    scale(cluster, 2)
    cluster.step(at(2))
    cluster.set_phase("mnist-worker-2", "Failed")
    plan = cluster.step(at(3))
    assert [d.name for d in plan.deletes] == ["mnist-worker-2"]  # to be recreated (restartPolicy OnFailure)
    plan = cluster.step(at(4))
    assert [o["metadata"]["name"] for o in plan.creates] == ["mnist-worker-2"]


def test_a_static_job_ignores_deletion_costs() -> None:
    job = pytorchjob(master=True, workers=3)
    cluster = Cluster(job)
    cluster.step(at(0))
    cluster.step(at(0))
    cluster.set_all("Running")
    cluster.step(at(1))
    cluster.pods["mnist-worker-0"]["metadata"]["annotations"] = {COST: "-100"}
    scale(cluster, 2)
    plan = cluster.step(at(2))
    assert sorted((d.kind, d.name) for d in plan.deletes) == [("Pod", "mnist-worker-2"), ("Service", "mnist-worker-2")]
