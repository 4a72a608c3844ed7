"""Preemption's decision without a server: the fewest lower-priority victims per node, the node
chosen among candidates (budgets, then victims' priorities, then their number), who is not
eligible, and the ``preemption:`` message when nothing helps."""

from decimal import Decimal
from typing import Any, Optional

from trainctl.cluster.scheduler.fit import NodeResources, schedule
from trainctl.cluster.scheduler.preemption import (
    NEVER,
    TERMINATING,
    Candidate,
    NodeCase,
    Preemption,
    post_filter,
)

Obj = dict[str, Any]
ALLOC = {"cpu": "4", "memory": "8Gi", "pods": "110"}


def pod(name: str, cpu: int = 1, priority: int = 0, labels: Optional[dict[str, str]] = None,
        started: str = "2026-01-01T00:00:00Z", **spec: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {}},
            "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
                     **spec},
            "status": {"startTime": started}}


def cpu_node(name: str, bound: list[Obj], capacity: int = 4) -> NodeCase:
    """A node that only counts CPU: what the victim search needs to be shown."""
    def problems(staying: list[Obj]) -> list[str]:
        used = sum(Decimal(p["spec"]["containers"][0]["resources"]["requests"]["cpu"]) for p in staying)
        return ["Insufficient cpu"] if used + incoming > capacity else []
    incoming = Decimal(2)
    return NodeCase(name, bound, False, problems)


def names(candidate: Optional[Candidate]) -> tuple[str, list[str]]:
    assert candidate is not None
    return candidate.node, [v["metadata"]["name"] for v in candidate.victims]


def budget(selector: dict[str, str], allowed: int) -> Obj:
    return {"metadata": {"name": "pdb", "namespace": "default"}, "spec": {"selector": {"matchLabels": selector}},
            "status": {"disruptionsAllowed": allowed}}


def test_the_fewest_lowest_priority_pods_are_victims():
    """Four 1-CPU pods fill the node; a 2-CPU pod needs two gone: the least important two,
    the others are reprieved, most important first."""
    urgent = pod("urgent", cpu=2, priority=100)
    bound = [pod("p3", priority=3), pod("p1", priority=1), pod("p2", priority=2), pod("p0", priority=0)]
    assert names(post_filter(urgent, [cpu_node("n1", bound)]).candidate) == ("n1", ["p1", "p0"])


def test_pods_of_equal_or_higher_priority_are_never_victims():
    urgent = pod("urgent", cpu=2, priority=5)
    bound = [pod("same", priority=5), pod("higher", priority=9), pod("low-a", priority=1), pod("low-b", priority=1)]
    assert names(post_filter(urgent, [cpu_node("n1", bound)]).candidate) == ("n1", ["low-a", "low-b"])
    crowded = [pod("same", cpu=2, priority=5), pod("higher", priority=9), pod("low", priority=1)]
    outcome = post_filter(urgent, [cpu_node("n1", crowded)])
    assert outcome == Preemption(None, "preemption: 0/1 nodes are available: 1 Insufficient cpu.")


def test_a_node_whose_victims_a_budget_protects_is_the_last_choice():
    urgent = pod("urgent", cpu=2, priority=100)
    protected = cpu_node("n1", [pod("a", cpu=2, labels={"app": "guarded"}), pod("b", cpu=2, labels={"app": "guarded"})])
    free = cpu_node("n2", [pod("c", cpu=2, priority=50), pod("d", cpu=2, priority=50)])
    guarded = [budget({"app": "guarded"}, 0)]
    outcome = post_filter(urgent, [protected, free], guarded)
    assert outcome.candidate is not None and outcome.candidate.pdb_violations == 0
    assert names(outcome.candidate)[0] == "n2"
    # With the budget allowing a disruption, the lower victim priority wins.
    assert names(post_filter(urgent, [protected, free], [budget({"app": "guarded"}, 1)]).candidate)[0] == "n1"
    # Only budget-violating candidates left: still preempted, the violation counted.
    alone = post_filter(urgent, [protected], guarded).candidate
    assert alone is not None and alone.pdb_violations == 1


def test_among_candidates_the_lowest_highest_victim_priority_then_the_fewest_victims():
    urgent = pod("urgent", cpu=2, priority=100)
    higher = cpu_node("n1", [pod("a", cpu=2, priority=10), pod("b", cpu=2, priority=10)])
    lower = cpu_node("n2", [pod("c", cpu=2, priority=1), pod("d", cpu=2, priority=1)])
    assert names(post_filter(urgent, [higher, lower]).candidate) == ("n2", ["d"])  # c, reprieved first, fits beside
    many = cpu_node("n3", [pod("e"), pod("f"), pod("g", cpu=2, priority=1)])
    one = cpu_node("n4", [pod("h", cpu=2), pod("i", cpu=2, priority=1)])
    assert names(post_filter(urgent, [many, one]).candidate) == ("n4", ["h"])


def test_terminating_lower_pods_are_no_victims():
    urgent = pod("urgent", cpu=2, priority=100)
    going = {**pod("going", cpu=2), "metadata": {**pod("going")["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    outcome = post_filter(urgent, [cpu_node("n1", [going, pod("staying", cpu=2)])])
    assert names(outcome.candidate) == ("n1", [])  # the room is coming: nominate, take nothing more


def test_a_nominated_pod_keeps_its_room_from_pods_of_no_higher_priority():
    """Its victims gone, the node is free; the pod nominated there is counted on it, so a pod
    of the same priority neither binds there nor preempts beside it; a higher one may."""
    first = pod("first", cpu=4, priority=100)
    nodes = [NodeResources("n1", ALLOC), NodeResources("n2", ALLOC).with_pod(pod("low", cpu=4))]
    waiting = {"n1": [first]}
    assert schedule(first, nodes, nominated=waiting).node_name == "n1"
    second = schedule(pod("second", cpu=4, priority=100), nodes, nominated=waiting)
    assert not second.fits and names(second.candidate) == ("n2", ["low"])
    assert schedule(pod("above", cpu=4, priority=200), nodes, nominated=waiting).node_name == "n1"


def test_who_may_not_preempt():
    never = pod("never", cpu=2, priority=100, preemptionPolicy="Never")
    assert post_filter(never, [cpu_node("n1", [pod("low", cpu=4)])]) == Preemption(None, NEVER)
    waiting = {**pod("waiting", cpu=2, priority=100), "status": {"nominatedNodeName": "n1"}}
    going = {**pod("going", cpu=2), "metadata": {**pod("going")["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert post_filter(waiting, [cpu_node("n1", [going, pod("low", cpu=2)])]) == Preemption(None, TERMINATING)


def test_schedule_weighs_preemption_with_the_filter_rules():
    """Through the scheduler's own rules: a cordoned node is not helped by evictions, a node
    with only pods of equal priority has no victims, the full node gives up its low pod."""
    low, equal = pod("low", cpu=4), pod("equal", cpu=4, priority=100)
    nodes = [NodeResources("n1", ALLOC).with_pod(low), NodeResources("n2", ALLOC).with_pod(equal),
             NodeResources("n3", ALLOC, unschedulable=True)]
    decision = schedule(pod("urgent", cpu=2, priority=100), nodes)
    assert names(decision.candidate) == ("n1", ["low"]) and decision.preemption == ""
    nodes[0] = NodeResources("n1", {**ALLOC, "cpu": "1"}).with_pod(pod("low", cpu=1))
    assert schedule(pod("urgent", cpu=2, priority=100), nodes).preemption == (
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling.")
