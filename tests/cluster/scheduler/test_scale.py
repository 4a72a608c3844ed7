"""The scheduler on a cluster of a thousand (hollow) nodes: machines of their own, and each
pod weighed against a share of the nodes, as kube-scheduler does."""

from __future__ import annotations

from typing import Any

from trainctl.cluster.podutil import HOLLOW_NODE_LABEL
from trainctl.cluster.scheduler import binding
from trainctl.cluster.scheduler.binding import Scheduler, nodes_to_find
from trainctl.cluster.scheduler.views import node_views

Obj = dict[str, Any]


class Recorder:
    """Stands in for the API client and the status writer: records bindings."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        self.unschedulable: list[str] = []

    def create(self, _resource: Any, body: Obj, subresource: str = "") -> None:
        self.bound[body["metadata"]["name"]] = body["target"]["name"]

    def patch(self, meta: Obj, _patch: Obj) -> None:
        self.unschedulable.append(meta["name"])


def node(name: str, hollow: bool = True) -> Obj:
    labels = {"kubernetes.io/hostname": name, **({HOLLOW_NODE_LABEL: "true"} if hollow else {})}
    return {"metadata": {"name": name, "labels": labels}, "spec": {},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


def pod(name: str, owner: str, node_name: str = "", selector: Obj | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": "pytorch", "ports": [{"containerPort": 23456}],
                                 "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = selector
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [{"uid": f"uid-{owner}", "controller": True}]},
            "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


def place(nodes: list[Obj], bound: list[Obj], pending: list[Obj]) -> Recorder:
    recorder = Recorder()
    scheduler = Scheduler(recorder, recorder, port_available=lambda _port, _protocol: True)  # type: ignore[arg-type]
    views = scheduler.new_pass(node_views(nodes, bound + pending, {}))
    for one in pending:
        scheduler.place(one, views)
    return recorder


def test_hollow_nodes_are_machines_of_their_own_no_port_collides() -> None:
    """Every job's pods declare the framework port; on this machine's nodes two jobs cannot
    both hold it, on hollow nodes (separate machines with pod networks) they can."""
    bound = [pod("a-0", "job-a", node_name="hollow-1")]
    recorder = place([node("hollow-1"), node("hollow-2")], bound, [pod("b-0", "job-b"), pod("c-0", "job-c")])
    assert set(recorder.bound) == {"b-0", "c-0"}
    assert not recorder.unschedulable

    real = [node("real-1", hollow=False), node("real-2", hollow=False)]
    recorder = place(real, [pod("a-0", "job-a", node_name="real-1")], [pod("b-0", "job-b")])
    assert recorder.unschedulable == ["b-0"]


def test_only_this_machines_nodes_are_neighbours() -> None:
    pods = [pod("h", "job-a", node_name="hollow-1"), pod("r", "job-b", node_name="real-1"),
            pod("s", "job-c", node_name="real-2")]
    views = {view.name: view for view in node_views([node("hollow-1"), node("real-1", False), node("real-2", False)],
                                                     pods, {})}
    assert views["hollow-1"].neighbours == ()
    assert [p["metadata"]["name"] for p in views["real-1"].neighbours] == ["s"]
    assert [p["metadata"]["name"] for p in views["real-2"].neighbours] == ["r"]


def test_the_share_of_nodes_weighed_follows_kube_scheduler() -> None:
    assert nodes_to_find(3) == 3
    assert nodes_to_find(100) == 100
    assert nodes_to_find(150) == 100
    assert nodes_to_find(1000) == 420  # 50 % - 1000/125 %
    assert nodes_to_find(5000) == 500  # at least 5 %... but at least 100 nodes
    assert nodes_to_find(100_000) == 5000


def test_on_a_thousand_nodes_each_pod_is_weighed_against_a_share_in_turn(monkeypatch: Any) -> None:
    weighed: list[list[str]] = []
    real_schedule = binding.schedule

    def counting(one: Obj, views: Any, probe: Any = None, assigned: Any = None, **options: Any) -> Any:
        weighed.append([view.name for view in views])
        return real_schedule(one, views, probe, assigned, **options)

    monkeypatch.setattr(binding, "schedule", counting)
    nodes = [node(f"hollow-{i:04d}") for i in range(1000)]
    pending = [pod(f"p-{i}", f"job-{i}") for i in range(5)]
    recorder = place(nodes, [], pending)
    assert [len(names) for names in weighed] == [420] * 5
    assert [names[0] for names in weighed] == ["hollow-0000", "hollow-0420", "hollow-0840", "hollow-0260", "hollow-0680"]
    assert len(set(recorder.bound.values())) == 5  # spread, one node each


def test_a_pod_with_inter_pod_terms_or_spreading_is_weighed_against_every_node(monkeypatch: Any) -> None:
    """Topology domains are counted over the whole cluster, as kube-scheduler's PreFilter does:
    a share of the nodes would hide the domains where the pod's neighbours are."""
    weighed: list[int] = []
    real_schedule = binding.schedule

    def counting(one: Obj, views: Any, probe: Any = None, assigned: Any = None, **options: Any) -> Any:
        weighed.append(len(views))
        return real_schedule(one, views, probe, assigned, **options)

    monkeypatch.setattr(binding, "schedule", counting)
    nodes = [node(f"hollow-{i:04d}") for i in range(1000)]
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    anti = pod("anti", "job-a")
    anti["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    spread = pod("spread", "job-b")
    spread["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                    "whenUnsatisfiable": "DoNotSchedule",
                                                    "labelSelector": {"matchLabels": {"app": "x"}}}]
    place(nodes, [], [anti, spread])
    assert weighed == [1000, 1000]


def test_a_pod_that_fits_outside_the_share_is_still_placed() -> None:
    nodes = [node(f"hollow-{i:04d}") for i in range(1000)]
    pinned = pod("pinned", "job-a", selector={"kubernetes.io/hostname": "hollow-0999"})
    nowhere = pod("nowhere", "job-b", selector={"kubernetes.io/hostname": "missing"})
    recorder = place(nodes, [], [pinned, nowhere])
    assert recorder.bound == {"pinned": "hollow-0999"}
    assert recorder.unschedulable == ["nowhere"]


def test_bindings_go_on_in_the_background_and_a_failed_one_is_forgotten() -> None:
    """One binding at a time caps scheduling at the API server's round trip; the pass
    assumes the pod and goes on, and a binding the server refuses is undone."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from trainctl.kube.client import ApiError

    gate = threading.Event()
    failures: list[str] = []

    class Slow(Recorder):
        def create(self, _resource: Any, body: Obj, subresource: str = "") -> None:
            gate.wait(10)
            if body["metadata"]["name"] == "taken":
                raise ApiError(409, "Conflict", "pod taken is already assigned to node hollow-2")
            super().create(_resource, body, subresource)

    api = Slow()
    with ThreadPoolExecutor(4) as binder:
        scheduler = Scheduler(api, api, binder=binder, on_bind_failed=lambda: failures.append("again"))  # type: ignore[arg-type]
        views = scheduler.new_pass(node_views([node("hollow-1"), node("hollow-2")], [], {}))
        for one in (pod("fine", "job-a"), pod("taken", "job-b")):
            scheduler.place(one, views)
        assert set(scheduler.assumed()) == {"uid-fine", "uid-taken"}  # placed while no binding has answered
        assert api.bound == {}
        gate.set()
    assert set(api.bound) == {"fine"}
    assert set(scheduler.assumed()) == {"uid-fine"}  # until the watch shows it bound
    assert failures == ["again"]


def test_what_depends_on_the_pod_alone_or_the_node_alone_is_worked_out_once(monkeypatch: Any) -> None:
    """A pod's requests are summed once, not for each of the 420 nodes it is weighed
    against; a node's free share once per view, not for each pod."""
    from trainctl.cluster.scheduler import fit as rules

    summed: list[str] = []
    real_requests = rules.pod_requests

    def counting(one: Obj) -> Any:
        summed.append(one["metadata"]["name"])
        return real_requests(one)

    monkeypatch.setattr(rules, "pod_requests", counting)
    views = node_views([node(f"hollow-{i:04d}") for i in range(200)], [pod("bound", "job-a", node_name="hollow-0000")], {})
    for name in ("p-0", "p-1"):
        assert rules.schedule(pod(name, "job-b"), views).fits
    assert summed.count("p-0") == summed.count("p-1") == 1
    assert summed.count("bound") == 1
