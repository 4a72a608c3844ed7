"""The nodes as a scheduling pass sees them, kept current from the watch events.

A pass needs every node with the live pods bound to it (:class:`~.fit.NodeResources`).
Rebuilt from every pod on each pass, that cost grew with the cluster: with 1,000 nodes and
10,000 pods it was most of the scheduler's CPU, since a burst of pod events makes a pass.
So, as kube-scheduler's cache, the pods are filed by node as their events arrive, and a
node's view is built again only when the node or one of its pods changed. Pods the
scheduler *assumed* on a node (bound, the watch not yet showing it) are counted on top for
the pass, and the pods of this machine's nodes, which share its ports, are each other's
``neighbours`` (hollow nodes are machines of their own and have none).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Optional

from trainctl.cluster.podutil import is_terminal
from trainctl.cluster.scheduler.fit import NodeResources

Obj = dict[str, Any]


class NodeViews:
    """Nodes and the pods bound to them, from informer events (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards everything below
        self._nodes: dict[str, Obj] = {}
        self._order: Optional[list[str]] = None  # node names, sorted; None: to sort again
        self._pods: dict[str, Obj] = {}  # uid -> every pod with a spec
        self._unbound: dict[str, Obj] = {}  # uid -> pods without a node
        self._bound: dict[str, dict[str, Obj]] = {}  # node name -> uid -> its live pods
        self._node_of: dict[str, str] = {}  # uid -> the node it is counted on
        self._views: dict[str, NodeResources] = {}  # built views of nodes unchanged since

    # --- events -------------------------------------------------------------------------
    def on_node(self, event: str, new: Optional[Obj], old: Optional[Obj]) -> None:
        with self._lock:
            if new is not None and event != "DELETED" and _older(new, self._nodes.get(new["metadata"]["name"])):
                return  # the node was read afresh (:meth:`refresh`) past this event
            if old is not None:
                name = old["metadata"]["name"]
                self._nodes.pop(name, None)
                self._views.pop(name, None)
            if new is not None and event != "DELETED":
                name = new["metadata"]["name"]
                self._nodes[name] = new
                self._views.pop(name, None)
            if new is None or old is None or new["metadata"]["name"] != old["metadata"]["name"]:
                self._order = None

    def refresh(self, node: Obj) -> None:
        """File ``node`` as read straight from the API server, unless the watch already
        brought a newer version."""
        self.on_node("MODIFIED", node, None)

    def node_version(self, name: str) -> Optional[str]:
        """The resourceVersion of the node ``name`` as filed, None if there is none."""
        with self._lock:
            node = self._nodes.get(name)
            return None if node is None else str(node["metadata"].get("resourceVersion") or "")

    def on_pod(self, event: str, new: Optional[Obj], old: Optional[Obj]) -> None:
        with self._lock:
            if old is not None:
                self._forget((old.get("metadata") or {}).get("uid"))
            if new is not None and event != "DELETED":
                self._file(new)

    def _forget(self, uid: Optional[str]) -> None:
        if not uid:
            return
        self._pods.pop(uid, None)
        self._unbound.pop(uid, None)
        node = self._node_of.pop(uid, None)
        if node is not None:
            pods = self._bound[node]
            del pods[uid]
            if not pods:
                del self._bound[node]
            self._views.pop(node, None)

    def _file(self, pod: Obj) -> None:
        uid = (pod.get("metadata") or {}).get("uid")
        spec = pod.get("spec")
        if not uid or not isinstance(spec, dict):
            return
        self._forget(uid)
        self._pods[uid] = pod
        node = spec.get("nodeName")
        if not node:
            self._unbound[uid] = pod
        elif not is_terminal(pod):
            self._bound.setdefault(node, {})[uid] = pod
            self._node_of[uid] = node
            self._views.pop(node, None)

    # --- what a pass reads ----------------------------------------------------------------
    def pods(self) -> tuple[dict[str, Obj], list[Obj]]:
        """Every pod by uid (a copy), and the pods bound to no node."""
        with self._lock:
            return dict(self._pods), list(self._unbound.values())

    def views(self, assumed: Mapping[str, str]) -> list[NodeResources]:
        """Every node, sorted by name, with the live pods bound to it or ``assumed`` on it
        (pod uid -> node)."""
        with self._lock:
            extra: dict[str, list[Obj]] = {}
            for uid, node in assumed.items():
                pod = self._pods.get(uid)
                if pod is not None and uid not in self._node_of and not is_terminal(pod):
                    extra.setdefault(node, []).append(pod)
            if self._order is None:
                self._order = sorted(self._nodes)
            views = []
            for name in self._order:
                view = self._views.get(name)
                if view is None:
                    view = self._views[name] = NodeResources.from_node(self._nodes[name], self._bound.get(name, {}).values())
                if name in extra:
                    view = replace(view, bound=view.bound + tuple(extra[name]))
                views.append(view)
            on_machine = {view.name: view.bound for view in views if not view.own_machine}
        # The nodes of this machine share its ports; a hollow node is a machine of its own.
        return [view if view.own_machine else
                replace(view, neighbours=tuple(p for other, bound in on_machine.items() if other != view.name for p in bound))
                for view in views]


def _older(node: Obj, filed: Optional[Obj]) -> bool:
    if filed is None:
        return False
    new_rv, filed_rv = node["metadata"].get("resourceVersion") or "", filed["metadata"].get("resourceVersion") or ""
    return new_rv.isdigit() and filed_rv.isdigit() and int(new_rv) < int(filed_rv)


def node_views(nodes: Iterable[Obj], pods: Iterable[Obj], assumed: Mapping[str, str]) -> list[NodeResources]:
    """Every node, sorted by name, with the live pods bound (or assumed) to it."""
    views = NodeViews()
    for node in nodes:
        views.on_node("ADDED", node, None)
    for pod in pods:
        views.on_pod("ADDED", pod, None)
    return views.views(assumed)
