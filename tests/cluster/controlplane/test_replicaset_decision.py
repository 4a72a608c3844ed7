"""kube's ReplicaSet rules, pure: pods created and deleted to match replicas, which go first, adoption, status."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from trainctl.cluster.controlplane import replicaset_decision as rd

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def replicaset(replicas: int = 2, min_ready: int = 0) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-abc", "namespace": "default", "uid": "rs-uid", "generation": 3},
            "spec": {"replicas": replicas, "minReadySeconds": min_ready, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web", "tier": "front"}},
                                  "spec": {"containers": [{"name": "web", "image": "python:3.11"}]}}}}


def pod(name: str, *, owner: Optional[str] = "rs-uid", node: str = "node-1", phase: str = "Running",
        ready_for: Optional[float] = 100.0, cost: Optional[int] = None, restarts: int = 0, age: float = 200.0,
        labels: Optional[dict[str, str]] = None) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "labels": labels if labels is not None else {"app": "web", "tier": "front"},
                 "creationTimestamp": stamp(age)}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": owner, "controller": True}]
    if cost is not None:
        meta["annotations"] = {rd.DELETION_COST: str(cost)}
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": stamp(ready_for)}] if ready_for is not None else []
    return {"metadata": meta, "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase, "conditions": conditions, "containerStatuses": [{"restartCount": restarts}]}}


def test_missing_pods_are_created_from_the_template_with_a_controller_reference() -> None:
    decision = rd.decide(replicaset(replicas=3), [pod("web-abc-1")], NOW)
    assert len(decision.create) == 2 and not decision.delete
    created = decision.create[0]
    assert created["metadata"]["generateName"] == "web-abc-"
    assert created["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert created["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
                                                       "uid": "rs-uid", "controller": True, "blockOwnerDeletion": True}]
    assert created["spec"]["containers"][0]["image"] == "python:3.11"


def test_surplus_pods_go_in_kubes_order() -> None:
    pods = [pod("running-ready-old", age=500), pod("running-ready-new", age=50, ready_for=40),
            pod("pending", phase="Pending", ready_for=None), pod("unscheduled", node="", phase="Pending", ready_for=None),
            pod("not-ready", ready_for=None), pod("restarted", restarts=4, ready_for=100)]
    order = [p["metadata"]["name"] for p in rd.deletion_order(pods)]
    assert order[:3] == ["unscheduled", "pending", "not-ready"]
    assert order[3] == "running-ready-new"  # ready for the shortest time
    assert order.index("restarted") < order.index("running-ready-old")  # same readiness: more restarts first
    decision = rd.decide(replicaset(replicas=4), pods, NOW)
    assert decision.delete == ["unscheduled", "pending"]


def test_pod_deletion_cost_outranks_age_and_doubling_up() -> None:
    pods = [pod("cheap", cost=-10, age=1000, node="node-1"), pod("costly", cost=100, age=10, node="node-2"),
            pod("plain-1", node="node-3"), pod("plain-2", node="node-3")]
    decision = rd.decide(replicaset(replicas=2), pods, NOW)
    assert decision.delete[0] == "cheap"
    assert decision.delete[1] in ("plain-1", "plain-2")  # doubled up on node-3, before the lone costly pod
    assert "costly" not in decision.delete


def test_orphans_matching_the_selector_are_adopted_and_pods_of_others_left_alone() -> None:
    orphan = pod("orphan", owner=None)
    others = pod("someone-elses", owner="other-uid")
    stranger = pod("stranger", owner=None, labels={"app": "db"})
    decision = rd.decide(replicaset(replicas=1), [orphan, others, stranger], NOW)
    assert [p["metadata"]["name"] for p in decision.rewrite] == ["orphan"]
    assert decision.rewrite[0]["metadata"]["ownerReferences"][0]["uid"] == "rs-uid"
    assert not decision.create and not decision.delete  # the adopted pod is the one replica


def test_an_owned_pod_relabelled_out_of_the_selector_is_released_and_replaced() -> None:
    moved = pod("moved", labels={"app": "debugging"})
    decision = rd.decide(replicaset(replicas=1), [moved], NOW)
    assert decision.rewrite[0]["metadata"]["ownerReferences"] == []
    assert len(decision.create) == 1


def test_terminating_and_finished_pods_do_not_count() -> None:
    terminating = pod("terminating")
    terminating["metadata"]["deletionTimestamp"] = stamp(1)
    decision = rd.decide(replicaset(replicas=2), [terminating, pod("failed", phase="Failed"), pod("live")], NOW)
    assert len(decision.create) == 1 and decision.status is not None and decision.status["replicas"] == 1


def test_status_counts_ready_available_and_fully_labelled_pods() -> None:
    pods = [pod("a", ready_for=100), pod("b", ready_for=5), pod("c", ready_for=None),
            pod("d", labels={"app": "web"})]
    decision = rd.decide(replicaset(replicas=4, min_ready=10), pods, NOW)
    assert decision.status == {"replicas": 4, "fullyLabeledReplicas": 3, "readyReplicas": 3, "availableReplicas": 2,
                               "observedGeneration": 3}
    assert decision.requeue_after == 5.0  # when b has been ready for minReadySeconds


def test_an_unchanged_status_is_not_written() -> None:
    rs = replicaset(replicas=1)
    rs["status"] = {"replicas": 1, "fullyLabeledReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 3}
    decision = rd.decide(rs, [pod("a")], NOW)
    assert decision.status is None and not decision.create and not decision.delete


def test_doubled_up_counts_the_pods_of_sibling_replicasets() -> None:
    mine = [pod("on-busy-node", node="node-1"), pod("alone", node="node-2")]
    sibling = pod("sibling", owner="other-rs-of-the-deployment", node="node-1")
    decision = rd.decide(replicaset(replicas=1), mine, NOW, related=[*mine, sibling])
    assert decision.delete == ["on-busy-node"]  # node-1 also runs the sibling's pod
    assert rd.decide(replicaset(replicas=1), mine, NOW, related=[*mine, pod("sibling-2", owner="x", node="node-2")]).delete == ["alone"]


def test_pods_the_server_refuses_show_as_the_replicafailure_condition_until_one_is_made() -> None:
    rs = replicaset(replicas=1)
    refused = rd.decide(rs, [], NOW, failure=("FailedCreate", 'pods "web-abc-x" is forbidden: exceeded quota'))
    assert refused.status is not None and refused.status["conditions"] == [
        {"type": "ReplicaFailure", "status": "True", "lastTransitionTime": "2026-01-01T12:00:00Z",
         "reason": "FailedCreate", "message": 'pods "web-abc-x" is forbidden: exceeded quota'}]
    rs["status"] = refused.status
    assert rd.decide(rs, [], NOW, failure=("FailedCreate", "again")).status is None  # unchanged while it lasts
    recovered = rd.decide(rs, [pod("a")], NOW)
    assert recovered.status is not None and "conditions" not in recovered.status
