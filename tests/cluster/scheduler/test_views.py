"""The scheduler's node views kept from watch events: after any sequence of binds, status
changes, deletes, re-created names and node changes they are what a rebuild from every pod
would give, and a node nothing touched is not built again."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Optional

from trainctl.cluster.podutil import HOLLOW_NODE_LABEL, is_terminal
from trainctl.cluster.scheduler.fit import NodeResources
from trainctl.cluster.scheduler.views import NodeViews

Obj = dict[str, Any]


def node(name: str, hollow: bool = True, **spec: Any) -> Obj:
    labels = {"kubernetes.io/hostname": name, **({HOLLOW_NODE_LABEL: "true"} if hollow else {})}
    return {"metadata": {"name": name, "labels": labels}, "spec": dict(spec),
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


def pod(name: str, uid: str, node_name: str = "", phase: str = "Pending") -> Obj:
    spec: Obj = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "default", "uid": uid}, "spec": spec, "status": {"phase": phase}}


def rebuilt(nodes: list[Obj], pods: list[Obj], assumed: dict[str, str]) -> list[NodeResources]:
    """Every node's view built from every pod, as each pass did before."""
    by_node: dict[str, list[Obj]] = {}
    for one in pods:
        name = one["spec"].get("nodeName") or assumed.get(one["metadata"]["uid"])
        if name and not is_terminal(one):
            by_node.setdefault(name, []).append(one)
    views = [NodeResources.from_node(n, by_node.get(n["metadata"]["name"], ()))
             for n in sorted(nodes, key=lambda n: n["metadata"]["name"])]
    shared = [v.name for v in views if not v.own_machine]
    return [v if v.own_machine else
            replace(v, neighbours=tuple(p for other in shared if other != v.name for p in by_node.get(other, ())))
            for v in views]


def shape(views: list[NodeResources]) -> list[tuple[Any, ...]]:
    def uids(pods: tuple[Obj, ...]) -> list[str]:
        return sorted(p["metadata"]["uid"] for p in pods)

    return [(v.name, uids(v.bound), dict(v.labels), v.taints, v.unschedulable, v.own_machine, uids(v.neighbours),
             v.requested) for v in views]


class Cluster:
    """What the informers hold, and the same changes handed to a NodeViews as events."""

    def __init__(self) -> None:
        self.nodes: dict[str, Obj] = {}
        self.pods: dict[str, Obj] = {}  # by name, as the informer's store keys them
        self.views = NodeViews()

    @staticmethod
    def _put(store: dict[str, Obj], handler: Callable[[str, Optional[Obj], Optional[Obj]], Any], obj: Obj) -> None:
        old = store.get(obj["metadata"]["name"])
        store[obj["metadata"]["name"]] = obj
        handler("MODIFIED" if old else "ADDED", obj, old)

    def put_node(self, obj: Obj) -> None:
        self._put(self.nodes, self.views.on_node, obj)

    def delete_node(self, name: str) -> None:
        self.views.on_node("DELETED", None, self.nodes.pop(name))

    def put_pod(self, obj: Obj) -> None:
        self._put(self.pods, self.views.on_pod, obj)

    def delete_pod(self, name: str) -> None:
        self.views.on_pod("DELETED", None, self.pods.pop(name))

    def check(self, assumed: Optional[dict[str, str]] = None) -> list[NodeResources]:
        kept = self.views.views(assumed or {})
        assert shape(kept) == shape(rebuilt(list(self.nodes.values()), list(self.pods.values()), assumed or {}))
        return kept


def test_binds_deletes_and_node_changes_keep_the_views_right() -> None:
    cluster = Cluster()
    for name in ("n1", "n2", "n3"):
        cluster.put_node(node(name))
    cluster.put_pod(pod("a", "ua"))
    cluster.put_pod(pod("b", "ub"))
    by_uid, unbound = cluster.views.pods()
    assert set(by_uid) == {"ua", "ub"} and {p["metadata"]["uid"] for p in unbound} == {"ua", "ub"}

    views = {v.name: v for v in cluster.check(assumed={"ua": "n1"})}  # assumed, not yet bound
    assert [p["metadata"]["uid"] for p in views["n1"].bound] == ["ua"]

    cluster.put_pod(pod("a", "ua", "n1", "Pending"))  # the binding arrives: counted once
    views = {v.name: v for v in cluster.check(assumed={"ua": "n1"})}
    assert [p["metadata"]["uid"] for p in views["n1"].bound] == ["ua"]
    assert {p["metadata"]["uid"] for p in cluster.views.pods()[1]} == {"ub"}

    cluster.put_pod(pod("b", "ub", "n2", "Running"))
    cluster.put_pod(pod("a", "ua", "n1", "Succeeded"))  # terminal: no longer holds n1
    views = {v.name: v for v in cluster.check()}
    assert views["n1"].bound == () and len(views["n2"].bound) == 1

    cluster.delete_pod("b")
    cluster.put_pod(pod("a", "ua2", "n3", "Running"))  # the name re-created with a new uid, elsewhere
    views = {v.name: v for v in cluster.check()}
    assert views["n2"].bound == () and [p["metadata"]["uid"] for p in views["n3"].bound] == ["ua2"]
    assert set(cluster.views.pods()[0]) == {"ua2"}

    cluster.put_node(node("n3", unschedulable=True, taints=[{"key": "k", "effect": "NoSchedule"}]))
    cluster.delete_node("n2")
    cluster.put_node(node("n0"))
    views = {v.name: v for v in cluster.check()}
    assert list(views) == ["n0", "n1", "n3"]
    assert views["n3"].unschedulable and views["n3"].taints and len(views["n3"].bound) == 1


def test_only_the_nodes_that_changed_are_built_again() -> None:
    cluster = Cluster()
    for name in ("n1", "n2"):
        cluster.put_node(node(name))
    cluster.put_pod(pod("a", "ua", "n1", "Running"))
    first = {v.name: v for v in cluster.views.views({})}
    cluster.put_pod(pod("b", "ub", "n2", "Running"))
    second = {v.name: v for v in cluster.views.views({})}
    assert second["n1"] is first["n1"]
    assert second["n2"] is not first["n2"] and len(second["n2"].bound) == 1


def test_this_machines_nodes_see_each_others_pods_as_neighbours() -> None:
    cluster = Cluster()
    cluster.put_node(node("real-1", hollow=False))
    cluster.put_node(node("real-2", hollow=False))
    cluster.put_node(node("hollow-1"))
    cluster.put_pod(pod("r", "ur", "real-1", "Running"))
    cluster.put_pod(pod("h", "uh", "hollow-1", "Running"))
    cluster.put_pod(pod("p", "up"))
    views = {v.name: v for v in cluster.check(assumed={"up": "real-2"})}
    assert [p["metadata"]["uid"] for p in views["real-1"].neighbours] == ["up"]
    assert [p["metadata"]["uid"] for p in views["real-2"].neighbours] == ["ur"]
    assert views["hollow-1"].neighbours == ()


def test_any_sequence_of_events_matches_a_rebuild() -> None:
    rng = random.Random(23)
    cluster = Cluster()
    names = [f"n{i}" for i in range(6)]
    serial = 0
    for step in range(1500):
        roll = rng.random()
        if roll < 0.1:
            name = rng.choice(names)
            if name in cluster.nodes and rng.random() < 0.3:
                cluster.delete_node(name)
            else:
                cluster.put_node(node(name, hollow=rng.random() < 0.7, unschedulable=rng.random() < 0.2))
        elif roll < 0.3 and cluster.pods:
            cluster.delete_pod(rng.choice(sorted(cluster.pods)))
        else:
            name = f"p{rng.randrange(40)}"
            current = cluster.pods.get(name)
            if current is None or rng.random() < 0.1:  # new, or re-created under the same name
                serial += 1
                cluster.put_pod(pod(name, f"u{serial}"))
            else:
                uid = current["metadata"]["uid"]
                bound = current["spec"].get("nodeName") or rng.choice(names)
                cluster.put_pod(pod(name, uid, bound, rng.choice(["Pending", "Running", "Running", "Succeeded", "Failed"])))
        if step % 10 == 0:
            pending = [p["metadata"]["uid"] for p in cluster.pods.values() if not p["spec"].get("nodeName")]
            assumed = {uid: rng.choice(names) for uid in pending if rng.random() < 0.5}
            cluster.check(assumed)
