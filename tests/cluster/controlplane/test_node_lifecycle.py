"""The node lifecycle decision, with plain dicts and times: Lease-based health, conditions,
taints, pods marked not ready, NoExecute eviction, recovery and zone disruption."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from trainctl.cluster.controlplane import node_lifecycle as nl
from trainctl.cluster.controlplane import taints
from trainctl.cluster.controlplane.units import format_time

Obj = dict[str, Any]
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
BOOT = format_time(T0 - timedelta(minutes=10))
DEFAULT_TOLERATIONS = [
    {"key": taints.NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": taints.UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def node(name: str = "n1", ready: Optional[str] = "True", heartbeat: str = BOOT, node_taints: Optional[list[Obj]] = None) -> Obj:
    conditions = [{"type": kind, "status": "False", "reason": "KubeletHasSufficient", "message": "",
                   "lastHeartbeatTime": heartbeat, "lastTransitionTime": BOOT}
                  for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready, "reason": "KubeletReady" if ready == "True" else "KubeletNotReady",
                           "message": "", "lastHeartbeatTime": heartbeat, "lastTransitionTime": BOOT})
    else:
        conditions = []
    spec: Obj = {"taints": node_taints} if node_taints else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": BOOT,
                                                             "resourceVersion": "1"},
            "spec": spec, "status": {"conditions": conditions}}


def lease(name: str, renewed: datetime) -> Obj:
    return {"metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}


def pod(name: str, on: str = "n1", tolerations: Optional[list[Obj]] = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "5"},
            "spec": {"nodeName": on, "tolerations": tolerations or []},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": BOOT},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": BOOT}]}}


def judge(nodes: list[Obj], leases: list[Obj], pods: list[Obj], state: nl.State, when: datetime,
          config: nl.NodeLifecycleConfig = nl.NodeLifecycleConfig()) -> nl.Plan:
    """One pass on a cluster that also has a healthy node, so that losing the others is not
    a full disruption (which stops evictions; see the disruption tests)."""
    return nl.reconcile([*nodes, node("peer")], [*leases, lease("peer", when)], pods, state, when, config)


def applied(nodes: list[Obj], plan: nl.Plan) -> list[Obj]:
    """The nodes as the API holds them once the plan's writes went through."""
    by_name = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}
    for written in plan.node_statuses:
        by_name[written["metadata"]["name"]]["status"] = written["status"]
    for written in plan.node_taints:
        by_name[written["metadata"]["name"]].setdefault("spec", {})["taints"] = written["spec"]["taints"]
    return list(by_name.values())


def taint_keys(n: Obj) -> set[tuple[str, str]]:
    return {(x["key"], x["effect"]) for x in (n.get("spec") or {}).get("taints") or ()}


def ready_of(obj: Obj) -> Obj:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")


def lost_node_after_grace() -> tuple[list[Obj], list[Obj], nl.Plan]:
    """n1 renewed its Lease at T0 and then went silent; the controller looks at T0 and T0+41s."""
    nodes, leases = [node()], [lease("n1", T0)]
    pods = [pod("plain"), pod("tolerating", tolerations=DEFAULT_TOLERATIONS)]
    first = judge(nodes, leases, pods, nl.State(), at(0))
    assert first.node_statuses == () and first.node_taints == () and first.evictions == ()
    quiet = judge(nodes, leases, pods, first.state, at(39))
    assert quiet.node_statuses == () and quiet.node_taints == ()
    return nodes, pods, judge(nodes, leases, pods, quiet.state, at(41))


def test_healthy_node_is_left_alone() -> None:
    nodes, leases, pods = [node()], [lease("n1", T0)], [pod("p")]
    state = nl.State()
    for second in (0, 10, 20, 30, 40, 50):  # the Lease is renewed every 10 s
        leases = [lease("n1", at(second))]
        plan = judge(nodes, leases, pods, state, at(second))
        events = () if second else plan.events  # the first pass registers the nodes (below)
        assert (plan.node_statuses, plan.node_taints, plan.pod_statuses, plan.evictions, plan.events) == ((), (), (), (), events)
        state = plan.state


def test_each_node_is_registered_once_as_kubes_controller_says() -> None:
    first = judge([node()], [lease("n1", T0)], [], nl.State(), T0)
    assert sorted((obj["metadata"]["name"], e.type, e.reason, e.message) for obj, e in first.events) == [
        ("n1", "Normal", "RegisteredNode", "Node n1 event: Registered Node n1 in Controller"),
        ("peer", "Normal", "RegisteredNode", "Node peer event: Registered Node peer in Controller")]
    later = judge([node(), node("n2")], [lease("n1", T0), lease("n2", T0)], [], first.state, at(5))
    assert [(obj["metadata"]["name"], e.reason) for obj, e in later.events] == [("n2", "RegisteredNode")]


def test_lease_not_renewed_makes_the_node_unknown_and_unreachable() -> None:
    _, _, plan = lost_node_after_grace()
    (written,) = plan.node_statuses
    for kind in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
        entry = next(c for c in written["status"]["conditions"] if c["type"] == kind)
        assert (entry["status"], entry["reason"], entry["message"]) == ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
        assert entry["lastTransitionTime"] == format_time(at(41))
        assert entry["lastHeartbeatTime"] == BOOT  # the kubelet's last word is kept
    assert written["metadata"]["resourceVersion"] == "1"  # conditional on what was decided on
    (tainted,) = plan.node_taints
    assert taint_keys(tainted) == {(taints.UNREACHABLE, "NoExecute"), (taints.UNREACHABLE, "NoSchedule")}
    no_execute = next(x for x in tainted["spec"]["taints"] if x["effect"] == "NoExecute")
    assert no_execute["timeAdded"] == format_time(at(41))
    assert ("Normal", "NodeNotReady", "Node n1 status is now: NodeNotReady") in [(e.type, e.reason, e.message) for _, e in plan.events]


def test_grace_period_is_settable() -> None:
    nodes, leases = [node()], [lease("n1", T0)]
    short = nl.NodeLifecycleConfig(node_monitor_grace_period=10)
    first = judge(nodes, leases, [], nl.State(), at(0), short)
    assert judge(nodes, leases, [], first.state, at(9), short).node_statuses == ()
    assert len(judge(nodes, leases, [], first.state, at(11), short).node_statuses) == 1


def test_the_next_pass_is_asked_for_when_a_ready_nodes_grace_runs_out() -> None:
    nodes, leases = [node()], [lease("n1", T0)]
    short = nl.NodeLifecycleConfig(node_monitor_grace_period=10)
    first = nl.reconcile(nodes, leases, [], nl.State(), at(0), short)
    assert first.next_verdict_in == 10
    later = nl.reconcile(nodes, leases, [], first.state, at(7), short)
    assert later.next_verdict_in == 3
    expired = nl.reconcile(nodes, leases, [], later.state, at(11), short)
    assert len(expired.node_statuses) == 1
    assert expired.next_verdict_in is None  # judged Unknown now: nothing more to wait for
    assert nl.reconcile(applied(nodes, expired), leases, [], expired.state, at(12), short).next_verdict_in is None


def test_pods_on_an_unknown_node_are_marked_not_ready() -> None:
    _, _, plan = lost_node_after_grace()
    by_name = {p["metadata"]["name"]: p for p in plan.pod_statuses}
    for name in ("plain", "tolerating"):
        ready = ready_of(by_name[name])
        assert (ready["status"], ready["lastTransitionTime"]) == ("False", format_time(at(41)))
        assert by_name[name]["metadata"]["resourceVersion"] == "5"
    assert sum(1 for _, e in plan.events if (e.type, e.reason, e.message) == ("Warning", "NodeNotReady", "Node is not ready")) == 2


def test_untolerating_pods_are_evicted_at_once_tolerating_ones_wait() -> None:
    _, _, plan = lost_node_after_grace()
    assert [p["metadata"]["name"] for p in plan.evictions] == ["plain"]
    evicted = next(p for p in plan.pod_statuses if p["metadata"]["name"] == "plain")
    target = next(c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"], target["message"]) == ("True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
    assert ("Normal", "TaintManagerEviction", "Marking for deletion Pod default/plain") in [(e.type, e.reason, e.message) for _, e in plan.events]
    assert plan.next_eviction_in == 300


def test_tolerating_pod_is_evicted_when_its_toleration_expires() -> None:
    nodes, pods, plan = lost_node_after_grace()
    nodes = applied(nodes, plan)
    terminating = copy.deepcopy(pods[0])
    terminating["metadata"]["deletionTimestamp"] = format_time(at(71))
    pods = [terminating, pods[1]]
    leases = [lease("n1", T0)]
    state = plan.state
    for second in (46, 200, 340):
        step = judge(nodes, leases, pods, state, at(second))
        assert step.evictions == () and step.node_statuses == () and step.node_taints == ()
        assert step.next_eviction_in == 41 + 300 - second
        state = step.state
    due = judge(nodes, leases, pods, state, at(341))
    assert [p["metadata"]["name"] for p in due.evictions] == ["tolerating"]


def test_toleration_without_seconds_stays_for_ever_and_exists_without_key_matches_all() -> None:
    nodes, leases = [node()], [lease("n1", T0)]
    forever = pod("forever", tolerations=[{"key": taints.UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}])
    everything = pod("everything", tolerations=[{"operator": "Exists"}])
    first = judge(nodes, leases, [forever, everything], nl.State(), at(0))
    plan = judge(nodes, leases, [forever, everything], first.state, at(41))
    assert plan.evictions == () and plan.next_eviction_in is None
    much_later = judge(applied(nodes, plan), leases, [forever, everything], plan.state, at(10_000))
    assert much_later.evictions == ()


def test_zero_toleration_seconds_evicts_at_once() -> None:
    nodes, leases = [node()], [lease("n1", T0)]
    brief = pod("brief", tolerations=[{"key": taints.UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}])
    first = judge(nodes, leases, [brief], nl.State(), at(0))
    assert [p["metadata"]["name"] for p in judge(nodes, leases, [brief], first.state, at(41)).evictions] == ["brief"]


def test_renewed_lease_keeps_taints_until_the_kubelet_reports_ready() -> None:
    nodes, pods, plan = lost_node_after_grace()
    nodes = applied(nodes, plan)
    pods = [pods[1]]  # the plain pod is gone
    # The node comes back (thawed): its Lease moves again, but Ready is still Unknown.
    back = judge(nodes, [lease("n1", at(60))], pods, plan.state, at(60))
    assert back.node_statuses == () and back.node_taints == () and back.evictions == ()
    # Its kubelet writes Ready=True: the taints come off and the pending eviction is dropped.
    ready = copy.deepcopy(nodes[0])
    for entry in ready["status"]["conditions"]:
        entry.update(status="True" if entry["type"] == "Ready" else "False", lastHeartbeatTime=format_time(at(62)))
    healed = judge([ready], [lease("n1", at(62))], pods, back.state, at(62))
    (untainted,) = healed.node_taints
    assert untainted["spec"]["taints"] == []
    assert healed.state.evictions == {} and healed.next_eviction_in is None
    assert healed.node_statuses == () and healed.pod_statuses == ()
    # ... and long after the toleration would have expired, nothing is evicted.
    assert judge(applied([ready], healed), [lease("n1", at(400))], pods, healed.state, at(400)).evictions == ()


def test_kubelet_reporting_not_ready_taints_not_ready_without_touching_pods() -> None:
    nodes, leases, pods = [node(ready="False", heartbeat=format_time(T0))], [lease("n1", T0)], [pod("p", tolerations=DEFAULT_TOLERATIONS)]
    plan = judge(nodes, leases, pods, nl.State(), at(0))
    assert plan.node_statuses == () and plan.pod_statuses == ()
    (tainted,) = plan.node_taints
    assert taint_keys(tainted) == {(taints.NOT_READY, "NoExecute"), (taints.NOT_READY, "NoSchedule")}
    assert plan.next_eviction_in == 300


def test_unreachable_taint_is_swapped_for_not_ready() -> None:
    unreachable = [{"key": taints.UNREACHABLE, "effect": "NoExecute", "timeAdded": BOOT}, {"key": taints.UNREACHABLE, "effect": "NoSchedule"},
                   {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    nodes = [node(ready="False", heartbeat=format_time(T0), node_taints=unreachable)]
    (tainted,) = judge(nodes, [lease("n1", T0)], [], nl.State(), at(0)).node_taints
    assert taint_keys(tainted) == {(taints.NOT_READY, "NoExecute"), (taints.NOT_READY, "NoSchedule"), ("dedicated", "NoSchedule")}


def test_pressure_and_unschedulable_taint_no_schedule() -> None:
    n = node()
    next(c for c in n["status"]["conditions"] if c["type"] == "MemoryPressure")["status"] = "True"
    n["spec"]["unschedulable"] = True
    (tainted,) = judge([n], [lease("n1", T0)], [], nl.State(), at(0)).node_taints
    assert taint_keys(tainted) == {(taints.MEMORY_PRESSURE, "NoSchedule"), (taints.UNSCHEDULABLE, "NoSchedule")}


def test_node_that_never_posted_status_gets_the_startup_grace_period() -> None:
    fresh = node(ready=None)
    fresh["metadata"]["creationTimestamp"] = format_time(T0)
    assert judge([fresh], [], [], nl.State(), at(59)).node_statuses == ()
    plan = judge([fresh], [], [], nl.State(), at(61))
    (written,) = plan.node_statuses
    assert {(c["type"], c["status"], c["reason"], c["message"]) for c in written["status"]["conditions"]} == {
        (kind, "Unknown", "NodeStatusNeverUpdated", "Kubelet never posted node status.")
        for kind in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")}
    assert not any(e.reason == "NodeNotReady" for _, e in plan.events)  # it never was Ready


def test_pod_ready_again_after_the_node_went_unknown_is_left_to_the_kubelet() -> None:
    nodes, _, plan = lost_node_after_grace()
    nodes = applied(nodes, plan)
    later_ready = pod("later", tolerations=DEFAULT_TOLERATIONS)
    ready_of(later_ready)["lastTransitionTime"] = format_time(at(50))
    step = judge(nodes, [lease("n1", T0)], [later_ready], plan.state, at(55))
    assert step.pod_statuses == ()


def test_pods_on_other_nodes_are_untouched() -> None:
    nodes = [node("n1"), node("n2")]
    first = judge(nodes, [lease("n1", T0), lease("n2", T0)], [], nl.State(), at(0))
    pods = [pod("elsewhere", on="n2")]
    plan = judge(nodes, [lease("n1", T0), lease("n2", at(40))], pods, first.state, at(41))
    assert [n["metadata"]["name"] for n in plan.node_statuses] == ["n1"]
    assert plan.pod_statuses == () and plan.evictions == ()


def test_toleration_matching() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoExecute"}
    assert taints.tolerates({"key": "k", "value": "v"}, taint)
    assert taints.tolerates({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint)
    assert not taints.tolerates({"key": "k", "value": "w"}, taint)
    assert not taints.tolerates({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, taint)
    assert not taints.tolerates({"key": "other", "operator": "Exists"}, taint)
    assert taints.toleration_seconds([{"tolerationSeconds": 30}, {"tolerationSeconds": 10}, {}]) == 10
    assert taints.toleration_seconds([{"tolerationSeconds": -5}, {"tolerationSeconds": 10}]) == 0
    assert taints.toleration_seconds([{}]) is None


# --- zone disruption ---------------------------------------------------------------------------


def silent_for(names: list[str], *, healthy: list[str], when: float, pods: list[Obj] = ()) -> nl.Plan:
    """Nodes ``names`` renewed their Leases at T0 only, ``healthy`` ones renew all along."""
    nodes = [node(n) for n in names + healthy]
    first = nl.reconcile(nodes, [lease(n, T0) for n in names + healthy], list(pods), nl.State(), at(0))
    return nl.reconcile(nodes, [lease(n, T0) for n in names] + [lease(n, at(when)) for n in healthy], list(pods), first.state, at(when))


def test_lost_single_node_is_unknown_but_not_evicted() -> None:
    plan = silent_for(["n1"], healthy=[], when=41, pods=[pod("p")])
    assert len(plan.node_statuses) == 1 and plan.state.all_fully_disrupted
    (tainted,) = plan.node_taints
    assert taint_keys(tainted) == {(taints.UNREACHABLE, "NoSchedule")}
    assert plan.evictions == () and [ready_of(p)["status"] for p in plan.pod_statuses] == ["False"]


def test_every_node_down_lifts_eviction_taints() -> None:
    unreachable = [{"key": taints.UNREACHABLE, "effect": "NoExecute", "timeAdded": BOOT}, {"key": taints.UNREACHABLE, "effect": "NoSchedule"}]
    down = node(ready="Unknown", node_taints=unreachable)
    plan = nl.reconcile([down], [lease("n1", T0)], [pod("p")], nl.State(), at(0))
    (untainted,) = plan.node_taints
    assert taint_keys(untainted) == {(taints.UNREACHABLE, "NoSchedule")}
    assert plan.evictions == ()


def test_tainting_is_rate_limited_per_zone() -> None:
    plan = silent_for(["n1", "n2"], healthy=["n3"], when=41)
    assert [n["metadata"]["name"] for n in plan.node_statuses] == ["n1", "n2"]
    no_execute = {n["metadata"]["name"] for n in plan.node_taints if (taints.UNREACHABLE, "NoExecute") in taint_keys(n)}
    assert no_execute == {"n1"}  # one node per 10 s at the default --node-eviction-rate 0.1
    nodes = applied([node("n1"), node("n2"), node("n3")], plan)
    leases = [lease("n1", T0), lease("n2", T0)]
    early = nl.reconcile(nodes, leases + [lease("n3", at(45))], [], plan.state, at(45))
    assert all((taints.UNREACHABLE, "NoExecute") not in taint_keys(n) for n in early.node_taints)
    later = nl.reconcile(nodes, leases + [lease("n3", at(52))], [], early.state, at(52))
    assert [n["metadata"]["name"] for n in later.node_taints if (taints.UNREACHABLE, "NoExecute") in taint_keys(n)] == ["n2"]


def test_partial_disruption_of_a_small_cluster_stops_tainting() -> None:
    plan = silent_for(["n1", "n2", "n3"], healthy=["n4", "n5"], when=41, pods=[pod("p")])
    assert len(plan.node_statuses) == 3
    assert all((taints.UNREACHABLE, "NoExecute") not in taint_keys(n) for n in plan.node_taints)
    assert plan.evictions == ()


def test_zones_are_judged_apart() -> None:
    def in_zone(name: str, zone: str) -> Obj:
        n = node(name)
        n["metadata"]["labels"] = {"topology.kubernetes.io/zone": zone}
        return n

    nodes = [in_zone("a1", "a"), in_zone("b1", "b")]
    first = nl.reconcile(nodes, [lease("a1", T0), lease("b1", T0)], [], nl.State(), at(0))
    plan = nl.reconcile(nodes, [lease("a1", T0), lease("b1", at(41))], [], first.state, at(41))
    (tainted,) = plan.node_taints  # zone a is fully down, zone b is not: a1 is tainted at the normal rate
    assert tainted["metadata"]["name"] == "a1" and (taints.UNREACHABLE, "NoExecute") in taint_keys(tainted)
