"""The fit and score rules: resources, fake devices, ports across owners, scheduler names,
node affinity, taints and tolerations, cordon, over one node and several."""

from trainctl.cluster.scheduler.fit import fit, owner_key, pod_requests, wants_this_scheduler

NODE = {"cpu": "2", "memory": "4Gi", "pods": "110", "nvidia.com/gpu": "2"}


def pod(name, owner=None, ports=(), requests=None, limits=None, init=None, phase=None):
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": owner,
                                    "uid": f"uid-{owner}", "controller": True}]
    container = {"name": "c", "ports": [{"containerPort": p} for p in ports],
                 "resources": {k: v for k, v in (("requests", requests), ("limits", limits)) if v}}
    spec = {"containers": [container]}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": init}}]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase} if phase else {}}


def test_fits_and_allocates_free_devices():
    decision = fit(pod("a", limits={"nvidia.com/gpu": "1"}), NODE, [], {"nvidia.com/gpu": {0}})
    assert decision.fits
    assert decision.devices == {"nvidia.com/gpu": [1]}


def test_too_many_gpus_stays_pending_with_scheduler_message():
    decision = fit(pod("a", limits={"nvidia.com/gpu": "3"}), NODE, [])
    assert not decision.fits
    assert decision.message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def test_cpu_and_memory_add_up_over_bound_pods():
    bound = [pod("a", requests={"cpu": "1500m", "memory": "1Gi"})]
    decision = fit(pod("b", requests={"cpu": "1", "memory": "3Gi"}), NODE, bound)
    assert decision.message == "0/1 nodes are available: 1 Insufficient cpu."
    finished = [pod("a", requests={"cpu": "1500m"}, phase="Succeeded")]
    assert fit(pod("b", requests={"cpu": "1"}), NODE, finished).fits


def test_unknown_extended_resource_does_not_fit():
    decision = fit(pod("a", limits={"huawei.com/Ascend910": "1"}), NODE, [])
    assert decision.message == "0/1 nodes are available: 1 Insufficient huawei.com/Ascend910."


def test_port_held_by_another_owner_blocks_with_the_holder_named():
    bound = [pod("other-master-0", owner="other", ports=[23456])]
    decision = fit(pod("mine-master-0", owner="mine", ports=[23456]), NODE, bound)
    assert not decision.fits
    assert decision.message == "0/1 nodes are available: port 23456 is in use by pod default/other-master-0."


def test_same_owner_shares_ports_and_finished_pods_free_them():
    assert fit(pod("job-worker-1", owner="job", ports=[23456]), NODE, [pod("job-master-0", owner="job", ports=[23456])]).fits
    assert fit(pod("b", owner="y", ports=[23456]), NODE, [pod("a", owner="x", ports=[23456], phase="Failed")]).fits


def test_pods_without_owner_are_their_own_owner():
    assert owner_key(pod("a")) == "uid-a"
    assert not fit(pod("b", ports=[8080]), NODE, [pod("a", ports=[8080])]).fits


def test_effective_request_takes_the_larger_of_init_and_containers():
    requests = pod_requests(pod("a", requests={"cpu": "500m"}, init={"cpu": "1"}))
    assert requests["cpu"] == 1


def test_pod_overhead_counts_as_requested():
    heavy = pod("a", requests={"cpu": "1500m"})
    heavy["spec"]["overhead"] = {"cpu": "250m", "memory": "120Mi"}
    assert pod_requests(heavy)["cpu"] == 1.75
    assert fit(heavy, NODE, [pod("b", requests={"cpu": "250m"})]).fits
    assert fit(heavy, NODE, [pod("b", requests={"cpu": "500m"})]).message == "0/1 nodes are available: 1 Insufficient cpu."


def test_scheduler_name():
    p = pod("a")
    assert wants_this_scheduler(p)
    p["spec"]["schedulerName"] = "volcano"
    assert not wants_this_scheduler(p)


def test_a_port_taken_on_the_machine_blocks_the_first_pod_of_an_owner_only():
    busy = {23456}

    def available(port, protocol):
        return port not in busy

    decision = fit(pod("x-master-0", owner="x", ports=[23456]), NODE, [], port_available=available)
    assert decision.message == "0/1 nodes are available: port 23456 is in use on this machine (not by a pod of this cluster)."
    # Once the job's master holds it, its workers share it without probing.
    assert fit(pod("x-worker-0", owner="x", ports=[23456]), NODE, [pod("x-master-0", owner="x", ports=[23456])],
               port_available=available).fits


def test_port_probe_sees_a_listening_socket():
    import socket

    from trainctl.cluster.scheduler.fit import port_free_on_machine

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert not port_free_on_machine(port, "TCP")
    assert port_free_on_machine(port, "TCP")


def test_several_nodes_first_fit_and_kube_scheduler_counts_why_none_fits():
    from trainctl.cluster.scheduler.fit import NodeResources, schedule

    small = NodeResources("small", {"cpu": "1", "memory": "1Gi", "pods": "110"}, {"zone": "a"})
    gpu = NodeResources("gpu", NODE, {"zone": "b"}, allocated_devices={"nvidia.com/gpu": {0}})
    decision = schedule(pod("a", limits={"nvidia.com/gpu": "1"}), [small, gpu])
    assert (decision.fits, decision.node_name, decision.devices) == (True, "gpu", {"nvidia.com/gpu": [1]})

    wants_zone_a = pod("b", requests={"cpu": "2"})
    wants_zone_a["spec"]["nodeSelector"] = {"zone": "a"}
    decision = schedule(wants_zone_a, [small, gpu, gpu.with_pod(pod("c"))])
    assert decision.message == ("0/3 nodes are available: 1 Insufficient cpu, "
                                "2 node(s) didn't match Pod's node affinity/selector.")


def _node(name, labels=None, taints=(), unschedulable=False, allocatable=None):
    from trainctl.cluster.scheduler.fit import NodeResources

    return NodeResources(name, allocatable or {"cpu": "2", "memory": "4Gi", "pods": "110"}, labels or {},
                         taints=tuple(taints), unschedulable=unschedulable)


UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}


def test_untolerated_taints_and_insufficient_cpu_in_kube_scheduler_words():
    from trainctl.cluster.scheduler.fit import schedule

    nodes = [_node("a", taints=[UNREACHABLE]), _node("b"), _node("c")]
    busy = [nodes[0], nodes[1].with_pod(pod("x", requests={"cpu": "2"})), nodes[2].with_pod(pod("y", requests={"cpu": "2"}))]
    decision = schedule(pod("p", requests={"cpu": "1"}), busy)
    assert decision.message == ("0/3 nodes are available: 1 node(s) had untolerated taint "
                                "{node.kubernetes.io/unreachable: }, 2 Insufficient cpu.")
    tolerant = pod("t", requests={"cpu": "1"})
    tolerant["spec"]["tolerations"] = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]
    assert schedule(tolerant, busy).node_name == "a"


def test_toleration_operators_and_effects():
    from trainctl.cluster.scheduler.fit import tolerates

    taint = {"key": "gpu", "value": "v100", "effect": "NoSchedule"}
    assert tolerates({"key": "gpu", "value": "v100"}, taint)
    assert tolerates({"key": "gpu", "operator": "Equal", "value": "v100", "effect": "NoSchedule"}, taint)
    assert not tolerates({"key": "gpu", "value": "a100"}, taint)
    assert not tolerates({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, taint)
    assert tolerates({"operator": "Exists"}, taint)


def test_required_node_affinity_operators_and_match_fields():
    from trainctl.cluster.scheduler.fit import schedule

    nodes = [_node("a", {"zone": "x", "gen": "3"}), _node("b", {"zone": "y", "gen": "5"}), _node("c")]

    def placed(*terms):
        p = pod("p")
        p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": list(terms)}}}
        decision = schedule(p, nodes)
        return decision.node_name if decision.fits else decision.message

    def expr(key, operator, *values):
        return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}

    assert placed(expr("zone", "In", "y")) == "b"
    assert placed(expr("zone", "NotIn", "x", "y")) == "c"
    assert placed(expr("gen", "Gt", "4")) == "b"
    assert placed(expr("gen", "Lt", "4")) == "a"
    assert placed(expr("zone", "DoesNotExist")) == "c"
    assert placed({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}) == "c"
    assert placed(expr("zone", "In", "z"), expr("gen", "Exists")) in ("a", "b")  # terms are ORed
    assert placed(expr("zone", "In", "z")) == "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."


def test_preferences_rank_nodes_and_pods_spread_by_free_resources():
    from trainctl.cluster.scheduler.fit import schedule

    nodes = [_node("a", {"zone": "x"}), _node("b", {"zone": "y"}, taints=[{"key": "k", "effect": "PreferNoSchedule"}]),
             _node("c", {"zone": "y"})]
    p = pod("p")
    p["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["y"]}]}}]}}
    assert schedule(p, nodes).node_name == "c"  # preferred zone, and no PreferNoSchedule taint
    loaded = [nodes[0].with_pod(pod("x", requests={"cpu": "1"})), nodes[2]]
    assert schedule(pod("q", requests={"cpu": "500m"}), loaded).node_name == "c"


def test_cordoned_nodes_take_only_pods_that_tolerate_it():
    from trainctl.cluster.scheduler.fit import schedule

    cordoned = [_node("a", unschedulable=True)]
    assert schedule(pod("p"), cordoned).message == "0/1 nodes are available: 1 node(s) were unschedulable."
    tolerant = pod("t")
    tolerant["spec"]["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                        "effect": "NoSchedule"}]
    assert schedule(tolerant, cordoned).fits


def test_other_schedulers_pods_are_left_alone():
    for name, ours in (("default-scheduler", True), ("trainctl-scheduler", True), ("volcano", False),
                       ("scheduler-plugins-scheduler", False)):
        p = pod("p")
        p["spec"]["schedulerName"] = name
        assert wants_this_scheduler(p) is ours


def test_a_port_held_on_one_node_is_held_on_every_node_of_the_machine():
    from trainctl.cluster.scheduler.fit import schedule

    holder = pod("holder", owner="job-a", ports=[29500])
    nodes = [_node("a").with_pod(holder), _node("b").with_neighbour(holder)]
    decision = schedule(pod("p", owner="job-b", ports=[29500]), nodes)
    assert decision.message == "0/2 nodes are available: port 29500 is in use by pod default/holder."
    assert schedule(pod("q", owner="job-a", ports=[29500]), nodes).fits  # the same job shares it
