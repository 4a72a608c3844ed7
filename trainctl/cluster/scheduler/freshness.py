"""Whether the node a pass placed a pod on is at least as new as the pod.

The scheduler sees pods through the Pods watch and nodes through the Nodes watch, and the
two streams arrive apart: a pod created just after its node was cordoned (or tainted, or
relabelled) can reach a pass before the change to the node does. A pod created after a
cordon was written must never land on the cordoned node, so before a binding the node the
pass saw is checked against the pod's resourceVersion:

- the Nodes watch has reached the pod's version and still holds the node the pass saw:
  that node is current for the pod, bind;
- the views hold a different version of the node by now: place the pod again;
- otherwise the node is read from the API server. A read made after the scheduler had seen
  the pods up to some version vouches for the node for all of them, so a burst of pods
  placed on one node costs one read, not one per pod. The fresh node goes into the views,
  and if it is not the one the pass saw, the pod is placed again.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from trainctl.cluster.scheduler.views import NodeViews
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.informer import Informer
from trainctl.kube.restmapper import NODES

Obj = dict[str, Any]


def _number(rv: object) -> Optional[int]:
    return int(rv) if isinstance(rv, str) and rv.isdigit() else None


class NodeFreshness:
    """Checks, before each binding, that the pass saw the node as it was when the pod came."""

    def __init__(self, client: KubeClient, views: NodeViews, pods: Informer, nodes: Informer) -> None:
        self._client = client
        self._views = views
        self._pods = pods
        self._nodes = nodes
        self._lock = threading.Lock()  # guards _vouched
        self._vouched: dict[str, tuple[int, str]] = {}  # node -> (pods seen before the read, the node's version read)

    def confirm(self, pod: Obj, node_name: str, seen_version: str) -> bool:
        """Whether ``node_name`` at ``seen_version`` (what the pass saw) is the node as it was
        when ``pod`` was last written; False: place the pod again."""
        pod_rv = _number((pod.get("metadata") or {}).get("resourceVersion"))
        watched = _number(self._nodes.resource_version)  # read before the views: its events are filed
        if self._views.node_version(node_name) != seen_version:
            return False  # the watch brought a change to the node since the pass
        if pod_rv is not None:
            if watched is not None and watched >= pod_rv:
                return True
            with self._lock:
                vouched = self._vouched.get(node_name)
            if vouched is not None and pod_rv <= vouched[0] and vouched[1] == seen_version:
                return True
        return self._read(node_name) == seen_version

    def _read(self, node_name: str) -> Optional[str]:
        """Read the node afresh, file it in the views, and return its version (None: gone)."""
        pods_seen = _number(self._pods.resource_version)  # every pod up to here was created before the read
        try:
            node = self._client.get(NODES, None, node_name)
        except ApiError as exc:
            if exc.code == 404:
                return None  # deleted: the watch will say so
            raise
        version = str(node["metadata"].get("resourceVersion") or "")
        node.setdefault("kind", NODES.kind)
        node.setdefault("apiVersion", NODES.api_version)
        self._views.refresh(node)
        if pods_seen is not None:
            with self._lock:
                self._vouched[node_name] = (pods_seen, version)
        return version
