"""kube's DaemonSet rules, pure: which nodes get a pod, how it is bound, tolerations, rolling updates, status."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from trainctl.cluster.controlplane import daemonset_decision as dd

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
UID = "ds-uid"


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def daemonset(pod_spec: Optional[Obj] = None, strategy: Optional[Obj] = None, image: str = "agent:1") -> Obj:
    spec = {"containers": [{"name": "agent", "image": image}], **(pod_spec or {})}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "default", "uid": UID, "generation": 2},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "updateStrategy": strategy or {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                     "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec}}}


def node(name: str, labels: Optional[dict[str, str]] = None, taints: Optional[list[Obj]] = None) -> Obj:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or []}}


def pod(name: str, node_name: str, revision: str, *, ready: bool = True, age: float = 100.0) -> Obj:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": stamp(50)}] if ready else []
    return {"metadata": {"name": name, "namespace": "default", "creationTimestamp": stamp(age),
                         "labels": {"app": "agent", dd.REVISION_LABEL: revision},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": UID,
                                              "controller": True}]},
            "spec": {"nodeName": node_name}, "status": {"phase": "Running", "conditions": conditions}}


def test_every_node_gets_one_pod_bound_by_node_affinity_with_kubes_tolerations() -> None:
    ds = daemonset()
    decision = dd.decide(ds, [node("a"), node("b")], [], NOW)
    assert [dd.node_of(p) for p in decision.create] == ["a", "b"]
    created = decision.create[0]
    assert "nodeName" not in created["spec"]
    assert created["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}
    assert created["metadata"]["labels"] == {"app": "agent", dd.REVISION_LABEL: dd.revision(ds)}
    assert created["metadata"]["ownerReferences"][0]["uid"] == UID
    tolerated = {(t["key"], t["effect"]) for t in created["spec"]["tolerations"]}
    assert tolerated == {("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
                         ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
                         ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")}
    assert decision.status is not None and decision.status["desiredNumberScheduled"] == 2
    assert decision.status["currentNumberScheduled"] == 0 and decision.status["numberUnavailable"] == 2


def test_node_selector_affinity_and_taints_pick_the_nodes() -> None:
    gpu = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    nodes = [node("a", {"disk": "ssd"}), node("b", {"disk": "ssd"}, [gpu]), node("c"),
             node("d", {"disk": "ssd"}, [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])]
    picked = dd.decide(daemonset({"nodeSelector": {"disk": "ssd"}}), nodes, [], NOW)
    assert [dd.node_of(p) for p in picked.create] == ["a", "d"]  # cordoned d still runs its daemon, as kube's
    tolerant = daemonset({"tolerations": [{"key": "gpu", "operator": "Exists"}], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}})
    assert [dd.node_of(p) for p in dd.decide(tolerant, nodes, [], NOW).create] == ["a", "b", "d"]


def test_a_running_pod_stays_through_no_schedule_but_not_no_execute() -> None:
    ds = daemonset()
    hash_ = dd.revision(ds)
    pods = [pod("agent-a", "a", hash_), pod("agent-b", "b", hash_)]
    nodes = [node("a", taints=[{"key": "maintenance", "effect": "NoSchedule"}]),
             node("b", taints=[{"key": "maintenance", "effect": "NoExecute"}])]
    assert dd.decide(ds, nodes, pods, NOW).delete == ["agent-b"]
    assert dd.decide(ds, nodes, [], NOW).create == []


def test_pods_on_nodes_gone_or_no_longer_eligible_and_doubles_are_deleted() -> None:
    ds = daemonset({"nodeSelector": {"role": "edge"}})
    hash_ = dd.revision(ds)
    pods = [pod("agent-a", "a", hash_, age=300), pod("agent-a2", "a", hash_, age=10), pod("agent-b", "b", hash_),
            pod("agent-gone", "gone", hash_)]
    decision = dd.decide(ds, [node("a", {"role": "edge"}), node("b")], pods, NOW)
    assert sorted(decision.delete) == ["agent-a2", "agent-b", "agent-gone"] and decision.create == []
    assert decision.status is not None and decision.status["numberMisscheduled"] == 2
    assert (decision.status["desiredNumberScheduled"], decision.status["currentNumberScheduled"],
            decision.status["numberReady"], decision.status["numberAvailable"]) == (1, 1, 1, 1)


def test_rolling_update_replaces_one_node_at_a_time() -> None:
    ds = daemonset(image="agent:2")
    nodes = [node("a"), node("b"), node("c")]
    old = [pod(f"agent-{n}", n, "old") for n in "abc"]
    first = dd.decide(ds, nodes, old, NOW)
    assert len(first.delete) == 1 and first.create == []
    # the replacement of a is not ready yet: nothing more goes down
    pods = [pod("agent-a-new", "a", dd.revision(ds), ready=False), *old[1:]]
    assert dd.decide(ds, nodes, pods, NOW).delete == []
    # an old pod that is not ready is replaced at once (it costs no availability), and it uses the budget
    pods = [pod("agent-a-new", "a", dd.revision(ds)), old[1], pod("agent-c", "c", "old", ready=False)]
    assert dd.decide(ds, nodes, pods, NOW).delete == ["agent-c"]
    pods = [pod("agent-a-new", "a", dd.revision(ds)), old[1], pod("agent-c-new", "c", dd.revision(ds))]
    assert dd.decide(ds, nodes, pods, NOW).delete == ["agent-b"]


def test_on_delete_leaves_old_pods_until_someone_deletes_them() -> None:
    ds = daemonset(strategy={"type": "OnDelete"}, image="agent:2")
    decision = dd.decide(ds, [node("a")], [pod("agent-a", "a", "old")], NOW)
    assert decision.delete == [] and decision.create == []
    assert decision.status is not None and "updatedNumberScheduled" not in decision.status
    assert [p["spec"]["containers"][0]["image"] for p in dd.decide(ds, [node("a")], [], NOW).create] == ["agent:2"]


def test_host_network_pods_tolerate_network_unavailable() -> None:
    tolerations = dd.daemon_tolerations({"hostNetwork": True})
    assert {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"} in tolerations


def test_each_template_is_recorded_as_a_controller_revision_and_undo_renumbers_it() -> None:
    first = daemonset()
    [recorded] = dd.decide(first, [node("a")], [], NOW).revisions.create
    assert (recorded["revision"], recorded["metadata"]["name"]) == (1, f"agent-{dd.revision(first)}")
    assert recorded["metadata"]["labels"]["app"] == "agent"  # the selector finds it (kubectl rollout history ds)
    stored = {**recorded, "metadata": {**recorded["metadata"], "uid": "rev-1"}}
    second = daemonset(image="agent:2")
    [newer] = dd.decide(second, [node("a")], [pod("agent-a", "a", dd.revision(first))], NOW, [stored]).revisions.create
    assert newer["revision"] == 2
    back = dd.decide(first, [node("a")], [], NOW, [stored, {**newer, "metadata": {**newer["metadata"], "uid": "rev-2"}}])
    assert back.revisions.create == []
    [renumbered] = back.revisions.rewrite
    assert (renumbered["metadata"]["name"], renumbered["revision"]) == (stored["metadata"]["name"], 3)
