"""Inter-pod affinity and anti-affinity with plain dicts: required terms over hostname and a
zone label, namespaces and namespaceSelector, matchLabelKeys, the placed pods' own terms, and
preferred weights in the ranking."""

from trainctl.cluster.scheduler.assigned import AssignedPods
from trainctl.cluster.scheduler.fit import NodeResources, schedule

ALLOC = {"cpu": "8", "memory": "16Gi", "pods": "110"}
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name, zone=None):
    labels = {HOST: name}
    if zone:
        labels[ZONE] = zone
    return NodeResources(name, ALLOC, labels)


def pod(name, labels=None, namespace="default", affinity=None, anti=None, preferred=None, preferred_anti=None):
    spec = {"containers": [{"name": "c"}]}
    blocks = {}
    for kind, required, preferred_terms in (("podAffinity", affinity, preferred), ("podAntiAffinity", anti, preferred_anti)):
        block = {"requiredDuringSchedulingIgnoredDuringExecution": required,
                 "preferredDuringSchedulingIgnoredDuringExecution": preferred_terms}
        if required or preferred_terms:
            blocks[kind] = {k: v for k, v in block.items() if v}
    if blocks:
        spec["affinity"] = blocks
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}", "labels": labels or {}},
            "spec": spec}


def term(key=HOST, **match_labels):
    return {"labelSelector": {"matchLabels": match_labels}, "topologyKey": key}


def place_all(pods, nodes, namespace_labels=None):
    """Schedule ``pods`` one after the other, each seeing the ones before: {pod: node or message}."""
    nodes = list(nodes)
    assigned = AssignedPods.of(nodes, namespace_labels or {})
    where = {}
    for p in pods:
        decision = schedule(p, nodes, assigned=assigned)
        if not decision.fits:
            where[p["metadata"]["name"]] = decision.full_message
            continue
        where[p["metadata"]["name"]] = decision.node_name
        nodes = [n.with_pod(p) if n.name == decision.node_name else n for n in nodes]
        assigned.add(p, decision.node_name)
    return where


def test_required_anti_affinity_on_hostname_puts_each_worker_on_its_own_node():
    workers = [pod(f"w{i}", {"job": "a"}, anti=[term(job="a")]) for i in range(4)]
    where = place_all(workers, [node("n1"), node("n2"), node("n3")])
    assert sorted(where[w] for w in ("w0", "w1", "w2")) == ["n1", "n2", "n3"]
    assert where["w3"] == ("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
                           "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")


def test_anti_affinity_of_placed_pods_keeps_others_away():
    loner = pod("loner", {"app": "db"}, anti=[term(app="web")])
    nodes = [node("n1").with_pod(loner), node("n2")]
    assert schedule(pod("web", {"app": "web"}), nodes).node_name == "n2"
    full = [nodes[0], node("n2").with_pod(pod("loner2", {"app": "db"}, anti=[term(app="web")]))]
    assert schedule(pod("web", {"app": "web"}), full).message == (
        "0/2 nodes are available: 2 node(s) didn't satisfy existing pods anti-affinity rules.")
    assert schedule(pod("other", {"app": "batch"}), full).fits


def test_anti_affinity_over_a_zone_label():
    nodes = [node("a1", "a"), node("a2", "a"), node("b1", "b")]
    where = place_all([pod(f"p{i}", {"app": "x"}, anti=[term(ZONE, app="x")]) for i in range(3)], nodes)
    assert where["p0"] in ("a1", "a2") and where["p1"] == "b1"
    assert where["p2"].startswith("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules.")


def test_a_node_without_the_topology_key_is_no_domain_for_anti_affinity():
    bare = NodeResources("bare", ALLOC, {})
    where = place_all([pod(f"p{i}", {"app": "x"}, anti=[term(ZONE, app="x")]) for i in range(3)], [node("z", "a"), bare])
    assert where == {"p0": "z", "p1": "bare", "p2": "bare"}  # kube-scheduler: no key, nothing to avoid


def test_required_affinity_follows_the_pods_it_names_and_the_first_of_a_group_goes_anywhere():
    nodes = [node("a1", "a"), node("b1", "b"), node("b2", "b")]
    cache = pod("cache", {"app": "cache"})
    placed = [nodes[0], nodes[1].with_pod(cache), nodes[2]]
    web = pod("web", {"app": "web"}, affinity=[term(ZONE, app="cache")])
    assert schedule(web, placed).node_name in ("b1", "b2")
    assert schedule(web, nodes).full_message == (
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    # A group that wants to be together: the first one matches its own term and goes anywhere.
    group = [pod(f"g{i}", {"app": "g"}, affinity=[term(ZONE, app="g")]) for i in range(3)]
    where = place_all(group, nodes)
    zones = {n.name: n.labels.get(ZONE) for n in nodes}
    assert len({zones[where[g]] for g in ("g0", "g1", "g2")}) == 1


def test_required_affinity_needs_the_topology_key_on_the_node():
    cache = pod("cache", {"app": "cache"})
    nodes = [NodeResources("bare", ALLOC, {}), node("a1", "a").with_pod(cache)]
    web = pod("web", {"app": "web"}, affinity=[term(ZONE, app="cache")])
    assert schedule(web, nodes).node_name == "a1"
    only_bare = [NodeResources("bare", ALLOC, {}).with_pod(cache)]
    assert not schedule(web, only_bare).fits


def test_terms_look_in_the_pods_namespace_unless_told_otherwise():
    other_ns = pod("x", {"app": "x"}, namespace="team-b")
    nodes = [node("n1").with_pod(other_ns), node("n2")]
    same_ns_only = pod("p", {"app": "p"}, anti=[term(app="x")])
    assert schedule(same_ns_only, nodes).node_name == "n1"  # the term does not see team-b
    listed = pod("p", {"app": "p"}, anti=[{**term(app="x"), "namespaces": ["team-b"]}])
    assert schedule(listed, nodes).node_name == "n2"
    everywhere = pod("p", {"app": "p"}, anti=[{**term(app="x"), "namespaceSelector": {}}])
    assert schedule(everywhere, nodes).node_name == "n2"


def test_namespace_selector_reads_the_namespaces_labels():
    nodes = [node("n1").with_pod(pod("x", {"app": "x"}, namespace="team-b")), node("n2")]
    selecting = pod("p", {"app": "p"}, anti=[{**term(app="x"), "namespaceSelector": {"matchLabels": {"team": "b"}}}])
    labelled = {"team-b": {"team": "b", "kubernetes.io/metadata.name": "team-b"}}
    assert schedule(selecting, nodes, assigned=AssignedPods.of(nodes, labelled)).node_name == "n2"
    assert schedule(selecting, nodes, assigned=AssignedPods.of(nodes, {})).node_name == "n1"
    by_name = pod("p", {"app": "p"}, anti=[{**term(app="x"), "namespaceSelector": {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-b"]}]}}])
    assert schedule(by_name, nodes, assigned=AssignedPods.of(nodes, {})).node_name == "n2"


def test_match_label_keys_narrow_the_selector_to_the_pods_own_values():
    old = pod("old", {"app": "w", "rev": "1"})
    nodes = [node("n1").with_pod(old), node("n2")]
    same_revision = pod("new", {"app": "w", "rev": "2"}, anti=[{**term(app="w"), "matchLabelKeys": ["rev"]}])
    assert schedule(same_revision, nodes).node_name == "n1"  # rev=1 is another revision: not avoided
    other_revisions = pod("new", {"app": "w", "rev": "2"}, anti=[{**term(app="w"), "mismatchLabelKeys": ["rev"]}])
    assert schedule(other_revisions, nodes).node_name == "n2"


def test_match_expressions_in_the_label_selector():
    nodes = [node("n1").with_pod(pod("x", {"tier": "gpu"})), node("n2").with_pod(pod("y", {"tier": "cpu"}))]
    p = pod("p", anti=[{"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["cpu"]}]},
                        "topologyKey": HOST}])
    assert schedule(p, nodes).node_name == "n2"


def test_preferred_weights_rank_nodes_and_anti_affinity_subtracts():
    nodes = [node("n1").with_pod(pod("cache", {"app": "cache"})), node("n2").with_pod(pod("noisy", {"app": "noisy"})),
             node("n3")]
    near_cache = pod("p", preferred=[{"weight": 50, "podAffinityTerm": term(app="cache")}])
    assert schedule(near_cache, nodes).node_name == "n1"
    both = pod("p", preferred=[{"weight": 10, "podAffinityTerm": term(app="cache")}],
               preferred_anti=[{"weight": 50, "podAffinityTerm": term(app="cache")}])
    assert schedule(both, nodes).node_name != "n1"
    # The placed pods' preferred terms count too: noisy prefers to keep "quiet" pods away.
    nodes[1] = node("n2").with_pod(pod("noisy", {"app": "noisy"},
                                       preferred_anti=[{"weight": 100, "podAffinityTerm": term(app="quiet")}]))
    assert schedule(pod("q", {"app": "quiet"}), nodes[1:2] + nodes[2:]).node_name == "n3"
    # A preference never makes a node infeasible.
    only = [nodes[0]]
    assert schedule(pod("r", preferred_anti=[{"weight": 100, "podAffinityTerm": term(app="cache")}]), only).fits


def test_preferred_node_affinity_still_outranks_inter_pod_preferences():
    nodes = [node("n1").with_pod(pod("cache", {"app": "cache"})), NodeResources("n2", ALLOC, {HOST: "n2", "disk": "ssd"})]
    p = pod("p", preferred=[{"weight": 100, "podAffinityTerm": term(app="cache")}])
    p["spec"]["affinity"]["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}
    assert schedule(p, nodes).node_name == "n2"


def test_resources_are_judged_before_affinity_as_in_kube_scheduler():
    small = NodeResources("small", {"cpu": "1", "memory": "1Gi", "pods": "110"}, {HOST: "small"})
    nodes = [small, node("n2").with_pod(pod("x", {"app": "x"}))]
    p = pod("p", anti=[term(app="x")])
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    assert schedule(p, nodes).message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod anti-affinity rules.")
