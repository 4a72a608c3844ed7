"""The check before a binding that the node the pass saw is at least as new as the pod."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from trainctl.cluster.scheduler.freshness import NodeFreshness
from trainctl.cluster.scheduler.views import NodeViews

Obj = dict[str, Any]


def node(rv: int, unschedulable: bool = False) -> Obj:
    return {"metadata": {"name": "node-a", "resourceVersion": str(rv)}, "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": "2"}}}


def pod(rv: int) -> Obj:
    return {"metadata": {"name": f"p{rv}", "namespace": "default", "uid": f"u{rv}", "resourceVersion": str(rv)},
            "spec": {}}


class Nodes:
    """The API server's node-a, counting reads."""

    def __init__(self, current: Obj) -> None:
        self.current, self.reads = current, 0

    def get(self, _resource: Any, _namespace: Any, _name: str) -> Obj:
        self.reads += 1
        return self.current


def freshness(seen: Obj, api: Obj, nodes_watched: int, pods_watched: int) -> tuple[NodeFreshness, NodeViews, Nodes]:
    views = NodeViews()
    views.on_node("ADDED", seen, None)
    client = Nodes(api)
    check = NodeFreshness(client, views, SimpleNamespace(resource_version=str(pods_watched)),  # type: ignore[arg-type]
                          SimpleNamespace(resource_version=str(nodes_watched)))  # type: ignore[arg-type]
    return check, views, client


def test_a_node_watch_past_the_pod_needs_no_read():
    check, _, client = freshness(node(5), node(5), nodes_watched=20, pods_watched=20)
    assert check.confirm(pod(10), "node-a", "5")
    assert client.reads == 0


def test_a_lagging_node_watch_reads_the_node_once_for_every_pod_seen_before_the_read():
    check, _, client = freshness(node(5), node(5), nodes_watched=8, pods_watched=30)
    assert check.confirm(pod(10), "node-a", "5")
    assert check.confirm(pod(20), "node-a", "5") and check.confirm(pod(30), "node-a", "5")
    assert client.reads == 1
    assert check.confirm(pod(31), "node-a", "5")  # created after the read: read again
    assert client.reads == 2


def test_a_node_changed_before_the_pod_is_not_bound_to_and_the_views_learn_it():
    check, views, _ = freshness(node(5), node(9, unschedulable=True), nodes_watched=8, pods_watched=10)
    assert not check.confirm(pod(10), "node-a", "5")
    assert views.node_version("node-a") == "9"
    assert views.views({})[0].unschedulable
    views.on_node("MODIFIED", node(9, unschedulable=True), node(5))  # the watch catches up: nothing older returns
    views.on_node("MODIFIED", node(7), node(5))
    assert views.node_version("node-a") == "9"


def test_a_change_the_watch_brought_since_the_pass_places_the_pod_again():
    check, views, client = freshness(node(5), node(9), nodes_watched=20, pods_watched=20)
    views.on_node("MODIFIED", node(9, unschedulable=True), node(5))
    assert not check.confirm(pod(10), "node-a", "5")
    assert client.reads == 0
