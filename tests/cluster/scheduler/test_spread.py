"""topologySpreadConstraints with plain dicts: maxSkew with DoNotSchedule and ScheduleAnyway,
minDomains, the nodeAffinityPolicy and nodeTaintsPolicy defaults and their other values, the
missing-label case, and which pods count."""

from trainctl.cluster.scheduler.fit import NodeResources, schedule

from tests.cluster.scheduler.test_interpod import place_all

ALLOC = {"cpu": "8", "memory": "16Gi", "pods": "110"}
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name, zone=None, taints=()):
    labels = {HOST: name}
    if zone:
        labels[ZONE] = zone
    return NodeResources(name, ALLOC, labels, taints=tuple(taints))


def pod(name, labels=None, namespace="default", **spec):
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {"app": "x"}},
            "spec": {"containers": [{"name": "c"}], **spec}}


def spread(key=HOST, skew=1, when="DoNotSchedule", selector=None, **more):
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": selector or {"app": "x"}}, **more}


def spreading(name, *constraints, **spec):
    return pod(name, topologySpreadConstraints=list(constraints), **spec)


def counts(where):
    found = {}
    for placed in where.values():
        found[placed] = found.get(placed, 0) + 1
    return found


def test_max_skew_one_over_hostnames_fills_nodes_evenly():
    where = place_all([spreading(f"p{i}", spread()) for i in range(6)], [node("n1"), node("n2"), node("n3")])
    assert counts(where) == {"n1": 2, "n2": 2, "n3": 2}


def test_a_node_that_would_raise_the_skew_is_filtered_with_kube_schedulers_words():
    nodes = [node("n1").with_pod(pod("a")).with_pod(pod("b")), node("n2")]
    # nodeAffinityPolicy Ignore: n2 counts as a domain although the pod may not go there.
    pinned = spreading("p", spread(nodeAffinityPolicy="Ignore"), nodeSelector={HOST: "n1"})
    decision = schedule(pinned, nodes)
    assert decision.full_message == (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't match pod topology spread constraints. preemption: 0/2 nodes are available: "
        "1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.")
    assert schedule(spreading("q", spread(skew=3, nodeAffinityPolicy="Ignore"), nodeSelector={HOST: "n1"}),
                    nodes).node_name == "n1"
    # The default (Honor) counts only the nodes the pod may go to: n1 alone, no skew.
    assert schedule(spreading("r", spread(), nodeSelector={HOST: "n1"}), nodes).node_name == "n1"


def test_a_node_without_the_topology_key_does_not_fit():
    nodes = [NodeResources("bare", ALLOC, {HOST: "bare"}), node("n2", "a")]
    assert schedule(spreading("p", spread(ZONE)), nodes).node_name == "n2"
    decision = schedule(spreading("p", spread(ZONE)), nodes[:1])
    assert decision.full_message == (
        "0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label). "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


def test_zones_spread_pods_across_their_nodes():
    nodes = [node("a1", "a"), node("a2", "a"), node("b1", "b")]
    where = place_all([spreading(f"p{i}", spread(ZONE)) for i in range(4)], nodes)
    zone = {"a1": "a", "a2": "a", "b1": "b"}
    assert sorted(zone[n] for n in where.values()) == ["a", "a", "b", "b"]


def test_min_domains_counts_missing_domains_as_empty():
    nodes = [node("a1", "a"), node("b1", "b")]
    where = place_all([spreading(f"p{i}", spread(ZONE, minDomains=3)) for i in range(3)], nodes)
    assert counts({k: v for k, v in where.items() if k != "p2"}) == {"a1": 1, "b1": 1}
    assert where["p2"].startswith("0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints.")
    # Without minDomains the two zones take turns.
    assert counts(place_all([spreading(f"p{i}", spread(ZONE)) for i in range(4)], nodes)) == {"a1": 2, "b1": 2}


def test_node_affinity_policy_honor_leaves_excluded_domains_out_of_the_minimum():
    nodes = [node("a1", "a").with_pod(pod("x")), node("b1", "b"), node("c1", "c")]
    only_ab = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}]}}}
    # b1 takes one (b: 1, a: 1); the next may go to a or b: zone c (empty) is not counted.
    where = place_all([spreading(f"p{i}", spread(ZONE), affinity=only_ab) for i in range(2)], nodes)
    assert where["p0"] == "b1" and where["p1"] in ("a1", "b1")
    ignoring = [spreading(f"p{i}", spread(ZONE, nodeAffinityPolicy="Ignore"), affinity=only_ab) for i in range(2)]
    where = place_all(ignoring, nodes)
    assert where["p0"] == "b1" and where["p1"].startswith("0/3 nodes are available: 1 node(s) didn't match Pod's node "
                                                          "affinity/selector, 2 node(s) didn't match pod topology")


def test_node_taints_policy_ignores_taints_unless_honoured():
    tainted = node("t1", "t", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    nodes = [node("a1", "a").with_pod(pod("x")), tainted]
    # Default Ignore: the tainted zone counts, with 0 pods, so zone a may not take another.
    assert schedule(spreading("p", spread(ZONE)), nodes).message == (
        "0/2 nodes are available: 1 node(s) didn't match pod topology spread constraints, "
        "1 node(s) had untolerated taint {dedicated: x}.")
    assert schedule(spreading("p", spread(ZONE, nodeTaintsPolicy="Honor")), nodes).node_name == "a1"


def test_schedule_anyway_prefers_the_emptier_domain_but_never_refuses():
    nodes = [node("a1", "a").with_pod(pod("x")).with_pod(pod("y")), node("b1", "b")]
    assert schedule(spreading("p", spread(ZONE, when="ScheduleAnyway")), nodes).node_name == "b1"
    pinned = spreading("q", spread(ZONE, when="ScheduleAnyway"), nodeSelector={ZONE: "a"})
    assert schedule(pinned, nodes).node_name == "a1"
    # It outranks the free-resources spreading: b1 is busier but its zone has no matching pod.
    busy_b = [node("a1", "a").with_pod(pod("x")), node("b1", "b").with_pod(
        {**pod("big", {"app": "other"}), "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "6"}}}]}})]
    assert schedule(spreading("r", spread(ZONE, when="ScheduleAnyway")), busy_b).node_name == "b1"


def test_which_pods_count_same_namespace_matching_not_terminating():
    terminating = pod("t")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    nodes = [node("n1").with_pod(pod("o", namespace="other")).with_pod(terminating).with_pod(pod("z", {"app": "z"})),
             node("n2").with_pod(pod("m"))]
    assert schedule(spreading("p", spread()), nodes).node_name == "n1"
    # A pod its own selector does not match adds nothing to its domain's count.
    outsider = pod("q", {"app": "q"}, topologySpreadConstraints=[spread(nodeAffinityPolicy="Ignore")])
    two = [node("n1").with_pod(pod("a")), node("n2")]
    assert schedule({**outsider, "spec": {**outsider["spec"], "nodeSelector": {HOST: "n1"}}}, two).node_name == "n1"
    insider = pod("i", {"app": "x"}, nodeSelector={HOST: "n1"}, topologySpreadConstraints=[spread(nodeAffinityPolicy="Ignore")])
    assert not schedule(insider, two).fits


def test_match_label_keys_count_only_pods_with_the_same_values():
    nodes = [node("n1").with_pod(pod("old", {"app": "x", "rev": "1"})), node("n2")]
    per_revision = pod("new", {"app": "x", "rev": "2"}, nodeSelector={HOST: "n1"},
                       topologySpreadConstraints=[spread(matchLabelKeys=["rev"], nodeAffinityPolicy="Ignore")])
    assert schedule(per_revision, nodes).node_name == "n1"
    all_revisions = pod("new", {"app": "x", "rev": "2"}, nodeSelector={HOST: "n1"},
                        topologySpreadConstraints=[spread(nodeAffinityPolicy="Ignore")])
    assert not schedule(all_revisions, nodes).fits
