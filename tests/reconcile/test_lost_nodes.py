"""Lost nodes: pods on a node not Ready past the grace are force-deleted and replaced."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from trainctl.controller.reconcile import ReconcileConfig, nodes
from trainctl.controller.reconcile.children import rfc3339
from trainctl.controller.reconcile.plan import delete_events

from tests.support.jobs import msjob, pytorchjob
from tests.support.reconcile import Cluster, at, conditions, node


def running(cluster: Cluster, placement: dict[str, str]) -> None:
    for name, pod in cluster.pods.items():
        pod["spec"]["nodeName"] = placement.get(name, "node-a")
        pod["status"] = {"phase": "Running"}


def started(job: dict[str, Any], config: Optional[ReconcileConfig] = None) -> Cluster:
    cluster = Cluster(job, config)
    cluster.step(at(0))
    cluster.step(at(0))
    running(cluster, {"mnist-worker-1": "node-b"})
    cluster.nodes = {"node-a": node("node-a"), "node-b": node("node-b")}
    cluster.step(at(1))
    return cluster


def elastic(grace: Optional[str] = None) -> dict[str, Any]:
    job = pytorchjob(master=False, workers=3, elasticPolicy={"minReplicas": 1, "maxReplicas": 3})
    if grace is not None:
        job["metadata"]["annotations"] = {"trainctl.io/node-lost-grace": grace}
    return job


def node_b_down(job: dict[str, Any], config: Optional[ReconcileConfig] = None) -> Cluster:
    """A started job whose node-b went Unknown at t=0."""
    cluster = started(job, config)
    cluster.nodes["node-b"] = node("node-b", "Unknown", since=0)
    return cluster


def force_deletes(plan: Any) -> list[str]:
    return [d.name for d in plan.deletes if d.force]


def test_grace_not_expired_does_nothing_but_requeues_at_expiry() -> None:
    cluster = started(pytorchjob())
    cluster.nodes["node-b"] = node("node-b", "Unknown", since=10)
    plan = cluster.reconcile(at(25))
    assert plan.deletes == [] and plan.creates == []
    assert plan.requeue_after == pytest.approx(15.0)


def test_elastic_job_replaces_only_the_lost_pod_and_counts_it_once() -> None:
    cluster = started(elastic())
    cluster.nodes["node-b"] = node("node-b", "Unknown", since=10)
    plan = cluster.step(at(41))
    assert force_deletes(plan) == ["mnist-worker-1"]
    assert [d.name for d in plan.deletes] == ["mnist-worker-1"]  # the survivors keep training
    (lost,) = plan.deletes
    assert lost.uid  # conditional on the lost pod's uid
    message = delete_events(lost).success.message
    assert "mnist-worker-1" in message and "node-b" in message and "Ready=Unknown" in message
    assert cluster.job["status"]["restartCount"] == 1
    assert ("Restarting", "True", "PyTorchJobRestarting") in conditions(cluster.job["status"])
    assert "restarted" in plan.metrics
    # The next pass creates the replacement under the same name and counts nothing again.
    plan = cluster.step(at(42))
    assert [p["metadata"]["name"] for p in plan.creates] == ["mnist-worker-1"]
    assert plan.deletes == []
    assert cluster.job["status"]["restartCount"] == 1
    # The replacement is Pending (not placed yet): not judged, not counted.
    assert cluster.step(at(60)).deletes == []
    assert cluster.job["status"]["restartCount"] == 1


def test_static_job_restarts_every_pod_once() -> None:
    cluster = started(pytorchjob(restart="OnFailure"))
    cluster.nodes["node-b"] = node("node-b", "False", since=0)
    plan = cluster.step(at(31))
    assert force_deletes(plan) == ["mnist-worker-1"]
    survivors = sorted(d.name for d in plan.deletes if not d.force)
    assert survivors == ["mnist-master-0", "mnist-worker-0"]
    assert all("mnist-worker-1 was lost with node node-b" in (d.cause or "") for d in plan.deletes if not d.force)
    assert cluster.job["status"]["restartCount"] == 1
    plan = cluster.step(at(32))
    assert sorted(p["metadata"]["name"] for p in plan.creates if p["kind"] == "Pod") == [
        "mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert cluster.job["status"]["restartCount"] == 1


def test_static_job_restart_deletes_a_failed_survivor_once() -> None:
    cluster = started(pytorchjob(restart="OnFailure"))
    cluster.set_phase("mnist-worker-0", "Failed")
    cluster.pods["mnist-worker-0"]["spec"]["nodeName"] = "node-a"
    cluster.nodes["node-b"] = node("node-b", "Unknown", since=0)
    plan = cluster.step(at(31))
    names = [d.name for d in plan.deletes if d.kind == "Pod"]
    assert sorted(names) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert cluster.job["status"]["restartCount"] == 1


def test_terminating_pod_on_a_lost_node_is_force_deleted() -> None:
    cluster = started(elastic())
    cluster.pods["mnist-worker-1"]["metadata"]["deletionTimestamp"] = rfc3339(at(5))
    cluster.nodes["node-b"] = node("node-b", "Unknown", since=1)
    plan = cluster.reconcile(at(40))
    assert force_deletes(plan) == ["mnist-worker-1"]


def test_unreachable_taint_counts_from_its_time_added() -> None:
    taint = {"key": nodes.TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": rfc3339(at(20))}
    cluster = started(elastic())
    cluster.nodes["node-b"] = node("node-b", "True", taints=[taint])
    assert cluster.reconcile(at(49)).deletes == []
    assert force_deletes(cluster.reconcile(at(50))) == ["mnist-worker-1"]


def test_node_ready_again_before_the_grace_does_nothing() -> None:
    cluster = started(elastic())
    cluster.nodes["node-b"] = node("node-b", "Unknown", since=10)
    assert cluster.step(at(20)).deletes == []
    cluster.nodes["node-b"] = node("node-b", "True", since=25)
    plan = cluster.step(at(100))
    assert plan.deletes == [] and plan.requeue_after is None
    assert "restartCount" not in cluster.job["status"]


def test_never_annotation_leaves_eviction_to_kubernetes() -> None:
    plan = node_b_down(elastic("never")).reconcile(at(1000))
    assert plan.deletes == [] and plan.requeue_after is None


def test_annotation_and_flag_set_the_grace() -> None:
    cluster = node_b_down(elastic("1m"))
    assert cluster.reconcile(at(59)).deletes == []
    assert force_deletes(cluster.reconcile(at(60))) == ["mnist-worker-1"]
    assert node_b_down(elastic(), ReconcileConfig(node_lost_grace_seconds=None)).reconcile(at(1000)).deletes == []
    short = node_b_down(elastic(), ReconcileConfig(node_lost_grace_seconds=5))
    assert force_deletes(short.reconcile(at(5))) == ["mnist-worker-1"]


def test_invalid_annotation_warns_and_uses_the_default() -> None:
    plan = node_b_down(elastic("soon")).reconcile(at(30))
    assert force_deletes(plan) == ["mnist-worker-1"]
    assert any(e.reason == "InvalidNodeLostGrace" and e.type == "Warning" for e in plan.problems)
    assert not any(e.reason == "InvalidNodeLostGrace" for e in plan.events)  # stated every pass, recorded once


def test_a_pod_placed_on_a_down_node_waits_the_grace_from_its_creation() -> None:
    cluster = node_b_down(elastic())
    cluster.pods["mnist-worker-1"]["metadata"]["creationTimestamp"] = rfc3339(at(100))
    plan = cluster.reconcile(at(110))
    assert plan.deletes == [] and plan.requeue_after == pytest.approx(20.0)
    assert force_deletes(cluster.reconcile(at(130))) == ["mnist-worker-1"]


def test_a_lost_rendezvous_store_pod_is_force_deleted_without_a_restart() -> None:
    cluster = started(elastic())
    assert "mnist-rdzv" in cluster.pods
    cluster.pods["mnist-rdzv"]["spec"]["nodeName"] = "node-c"
    cluster.nodes["node-c"] = node("node-c", "Unknown", since=0)
    plan = cluster.step(at(30))
    assert force_deletes(plan) == ["mnist-rdzv"] and len(plan.deletes) == 1
    assert "restartCount" not in cluster.job["status"]
    assert [p["metadata"]["name"] for p in cluster.step(at(31)).creates] == ["mnist-rdzv"]


def test_a_finished_job_replaces_nothing() -> None:
    job = elastic()
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "None"}
    cluster = node_b_down(job)
    cluster.job["status"]["conditions"].append(
        {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded", "message": "done"})
    plan = cluster.reconcile(at(100))
    assert force_deletes(plan) == [] and plan.requeue_after is None
    assert not [d for d in plan.deletes if "worker" in d.name]  # only the rendezvous store goes, as always


def test_finished_pod_on_a_lost_node_follows_the_usual_rules() -> None:
    cluster = node_b_down(elastic())
    cluster.pods["mnist-worker-1"]["status"] = {"phase": "Succeeded"}
    assert force_deletes(cluster.reconcile(at(100))) == []


def test_a_pod_that_succeeded_before_its_node_died_counts_even_while_it_is_being_deleted() -> None:
    """Kubernetes' taint eviction deletes it too; its work was done, nothing was lost: the
    elastic job succeeds (any Worker's success is the job's), no replacement, no restart."""
    cluster = node_b_down(elastic())
    cluster.pods["mnist-worker-1"]["status"] = {"phase": "Succeeded"}
    cluster.pods["mnist-worker-1"]["metadata"]["deletionTimestamp"] = rfc3339(at(60))
    plan = cluster.step(at(100))
    assert force_deletes(plan) == [] and "mnist-worker-1" in cluster.pods
    assert ("Succeeded", "True", "PyTorchJobSucceeded") in conditions(cluster.job["status"])
    assert "restartCount" not in cluster.job["status"]


def test_a_static_job_is_not_restarted_for_a_succeeded_pod_whose_node_died() -> None:
    cluster = node_b_down(pytorchjob(restart="OnFailure"))
    cluster.pods["mnist-worker-1"]["status"] = {"phase": "Succeeded"}
    cluster.pods["mnist-worker-1"]["metadata"]["deletionTimestamp"] = rfc3339(at(60))
    plan = cluster.step(at(100))
    assert plan.deletes == [] and "restartCount" not in cluster.job["status"]
    assert cluster.job["status"]["replicaStatuses"]["Worker"]["succeeded"] == 1


def test_a_lost_pod_and_another_restart_of_the_same_type_both_count() -> None:
    cluster = node_b_down(elastic())
    cluster.set_phase("mnist-worker-0", "Failed")
    cluster.job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "OnFailure"
    cluster.pods["mnist-worker-0"]["spec"]["nodeName"] = "node-a"
    plan = cluster.step(at(30))
    assert sorted(d.name for d in plan.deletes if d.kind == "Pod") == ["mnist-worker-0", "mnist-worker-1"]
    assert cluster.job["status"]["restartCount"] == 2


@pytest.mark.parametrize("restart", ["Never", "ExitCode", "OnFailure"])
def test_losing_a_node_does_not_fail_the_job_whatever_the_restart_policy(restart: str) -> None:
    for spec in (elastic(), pytorchjob()):
        spec["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = restart
        cluster = node_b_down(spec)
        cluster.step(at(30))
        cluster.step(at(31))
        assert not any(t == "Failed" and s == "True" for t, s, _ in conditions(cluster.job["status"])), restart
        assert "mnist-worker-1" in cluster.pods


@pytest.mark.parametrize("job", [elastic(), pytorchjob(restart="OnFailure")], ids=["elastic", "static"])
def test_the_restart_says_the_pod_was_lost_with_its_node_not_that_it_failed(job: dict[str, Any]) -> None:
    cluster = node_b_down(job)
    plan = cluster.step(at(30))
    (event,) = [e for e in plan.events if e.reason == "PyTorchJobRestarting"]
    (condition,) = [cond for cond in cluster.job["status"]["conditions"] if cond["type"] == "Restarting"]
    for message in (event.message, condition["message"]):
        assert "mnist-worker-1" in message and "lost with node node-b" in message, message
        assert "failed" not in message, message


def test_an_msjob_restart_says_the_pod_was_lost_with_its_node() -> None:
    cluster = Cluster(msjob(restart="OnFailure"))
    cluster.step(at(0))
    cluster.step(at(0))
    running(cluster, {"ms-worker-1": "node-b"})
    cluster.nodes = {"node-a": node("node-a"), "node-b": node("node-b", "Unknown", since=0)}
    cluster.step(at(1))
    plan = cluster.step(at(30))
    (event,) = [e for e in plan.events if e.reason == "MSJobRestarting"]
    assert "ms-worker-1" in event.message and "lost with node node-b" in event.message, event.message
    assert "failed" not in event.message, event.message
