"""A pass whose decision waits on the status it writes asks to be reconciled again.

The shell puts its own status write into its cache, so the watch event that follows is not a
change and enqueues nothing; a job whose next step depends on that status (the finished path:
cleanPodPolicy and the TTL; the HPA once the scale selector is stored) must not wait for some
other event that may never come.
"""

from __future__ import annotations

from tests.support.jobs import pytorchjob
from tests.support.reconcile import Cluster, at, conditions

METRICS = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]


def test_the_pass_that_finishes_a_job_comes_back_at_once_and_the_next_deletes_it_by_its_ttl() -> None:
    cluster = Cluster(pytorchjob("done", master=False, workers=1, restart="Never",
                                 runPolicy={"ttlSecondsAfterFinished": 0, "cleanPodPolicy": "All"}))
    cluster.step(at(0))
    cluster.set_phase("done-worker-0", "Running")
    cluster.step(at(1))
    cluster.set_phase("done-worker-0", "Succeeded")
    finishing = cluster.step(at(2))
    assert conditions(finishing.status)[-1] == ("Succeeded", "True", "PyTorchJobSucceeded")
    assert finishing.requeue_after == 0
    after = cluster.step(at(2))
    assert after.delete_job and ("Pod", "done-worker-0") in [(d.kind, d.name) for d in after.deletes]


def test_the_pass_that_writes_the_scale_selector_comes_back_for_the_hpa() -> None:
    job = pytorchjob("el", master=False, workers=2)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 4, "metrics": METRICS}
    cluster = Cluster(job)
    first = cluster.step(at(0))
    assert "selector" in first.status["replicaStatuses"]["Worker"]
    assert first.requeue_after is not None and first.requeue_after <= 1
    assert [o["kind"] for o in cluster.step(at(1)).creates if o["kind"] == "HorizontalPodAutoscaler"] == ["HorizontalPodAutoscaler"]
