"""The resource Metrics API (``metrics.k8s.io/v1beta1``): NodeMetrics and PodMetrics.

In a real cluster metrics-server scrapes every kubelet and serves this group through the
aggregation layer. Here the API server is the only hub: each kubelet publishes its node's
usage, and the usage of the pods it runs, in one request to a private subresource that
discovery does not list::

    PUT /apis/metrics.k8s.io/v1beta1/nodes/NAME/usage
    {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeUsage", "metadata": {"name": NAME},
     "intervalSeconds": 15, "node": <NodeMetrics>, "pods": [<PodMetrics>, ...]}

The set replaces what that node published before. Clients read the group as they read
metrics-server (GET and LIST, label and field selectors); nothing else is allowed.

Metrics are ephemeral, as metrics-server's are: they live in memory only (never in SQLite),
an entry expires once its publisher has not refreshed it for ``EXPIRY_INTERVALS`` of its
publishing interval, and an entry whose Node or Pod is gone (or was replaced by another of
the same name) is not served. A PodMetrics carries its pod's current labels, so label
selectors choose by the pod's labels, as with metrics-server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeGuard, cast

from trainctl.cluster.apiserver.apimachinery import errors, selectors
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType
from trainctl.cluster.apiserver.storage.store import Store, clone
from trainctl.kube.timestamps import now_rfc3339

Obj = dict[str, Any]

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
PUBLISH_SUBRESOURCE = "usage"
PUBLISH_KIND = "NodeUsage"
EXPIRY_INTERVALS = 3
DEFAULT_INTERVAL_SECONDS = 15.0
_READ_VERBS = ("get", "list")


def resource_types() -> list[ResourceType]:
    """What discovery lists for the group: read-only nodes and pods."""
    return [
        ResourceType(GROUP, VERSION, "nodes", "NodeMetrics", "", namespaced=False, verbs=_READ_VERBS),
        ResourceType(GROUP, VERSION, "pods", "PodMetrics", "", verbs=_READ_VERBS),
    ]


@dataclass(frozen=True)
class _Entry:
    obj: Obj  # the metrics object as published (labels are added when read)
    uid: str  # the Node's or Pod's uid when published: a new object of the same name is another
    publisher: str  # the node that published it
    expires_at: float


def _is_metrics(doc: Any, kind: str, *, namespaced: bool) -> TypeGuard[Obj]:
    if not isinstance(doc, dict) or doc.get("kind", kind) != kind:
        return False
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return False
    if namespaced and not isinstance(meta.get("namespace"), str):
        return False
    return all(isinstance(c, dict) and isinstance(c.get("usage"), dict) for c in doc.get("containers") or []) \
        and isinstance(doc.get("usage", {}), dict)


class MetricsApi:
    """The published metrics of every node and pod, in memory; reads check the store."""

    def __init__(self, store: Store, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._clock = clock
        self._nodes: dict[str, _Entry] = {}
        self._pods: dict[tuple[str, str], _Entry] = {}

    # --- writes -----------------------------------------------------------------------------

    def publish(self, node: str, report: Any) -> Obj:
        """Replace what ``node`` published with ``report`` (a ``NodeUsage``); returns a Status."""
        if not isinstance(report, dict) or report.get("kind", PUBLISH_KIND) != PUBLISH_KIND:
            raise errors.bad_request(f"the body of the request was in an unknown format - expected a {PUBLISH_KIND} object")
        if (report.get("metadata") or {}).get("name", node) != node:
            raise errors.bad_request("the name of the object does not match the name on the URL")
        interval = report.get("intervalSeconds", DEFAULT_INTERVAL_SECONDS)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise errors.bad_request("intervalSeconds must be a positive number")
        node_metrics, pods = report.get("node"), report.get("pods") or []
        if not _is_metrics(node_metrics, "NodeMetrics", namespaced=False) or node_metrics["metadata"]["name"] != node:
            raise errors.bad_request(f"node must be the NodeMetrics of {node}")
        if not isinstance(pods, list) or not all(_is_metrics(p, "PodMetrics", namespaced=True) for p in pods):
            raise errors.bad_request("pods must be a list of PodMetrics, each with a name, a namespace and containers")
        node_obj = self._store.read("/nodes", "", node)
        if node_obj is None:
            raise errors.not_found("nodes", "", node)
        expires_at = self._clock() + EXPIRY_INTERVALS * float(interval)
        self._nodes[node] = _Entry(self._normalized(node_metrics, "NodeMetrics"), node_obj["metadata"]["uid"],
                                   node, expires_at)
        for key in [k for k, e in self._pods.items() if e.publisher == node]:
            del self._pods[key]
        for pod_metrics in pods:
            meta = pod_metrics["metadata"]
            pod = self._store.read("/pods", meta["namespace"], meta["name"])
            if pod is None:
                continue  # deleted since the kubelet sampled it
            self._pods[(meta["namespace"], meta["name"])] = _Entry(
                self._normalized(pod_metrics, "PodMetrics"), pod["metadata"]["uid"], node, expires_at)
        self._expire()
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200}

    @staticmethod
    def _normalized(doc: Obj, kind: str) -> Obj:
        obj = clone(doc)
        obj["kind"], obj["apiVersion"] = kind, API_VERSION
        meta = obj["metadata"]
        meta.pop("labels", None)
        meta.setdefault("creationTimestamp", now_rfc3339())
        obj.setdefault("timestamp", meta["creationTimestamp"])
        return cast("dict[str, Any]", obj)

    def _expire(self) -> None:
        now = self._clock()
        self._nodes = {k: e for k, e in self._nodes.items() if e.expires_at > now}
        self._pods = {k: e for k, e in self._pods.items() if e.expires_at > now}

    # --- reads ------------------------------------------------------------------------------

    def _served(self, entry: _Entry, resource: str, namespace: str, name: str) -> Obj | None:
        """The entry as clients see it, or None if its Node or Pod is gone or was replaced."""
        current = self._store.read(resource, namespace, name)
        if current is None or current["metadata"].get("uid") != entry.uid:
            return None
        obj = clone(entry.obj)
        labels = current["metadata"].get("labels")
        if labels:
            obj["metadata"]["labels"] = dict(labels)
        return cast("dict[str, Any] | None", obj)

    def _node(self, name: str) -> Obj | None:
        entry = self._nodes.get(name)
        return self._served(entry, "/nodes", "", name) if entry else None

    def _pod(self, namespace: str, name: str) -> Obj | None:
        entry = self._pods.get((namespace, name))
        return self._served(entry, "/pods", namespace, name) if entry else None

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        self._expire()
        found = self._pod(namespace or "", name) if rtype.namespaced else self._node(name)
        if found is None:  # worded as metrics-server words it
            raise errors.not_found(rtype.kind.lower(), GROUP, f"{namespace}/{name}" if rtype.namespaced else name)
        return found

    def list(self, rtype: ResourceType, namespace: str | None, query: Any) -> Obj:
        """A NodeMetricsList or PodMetricsList; ``namespace`` None lists every namespace."""
        self._expire()
        matches = selectors.combine(
            selectors.parse_label_selector(query.get("labelSelector")),
            # metrics-server selects on metadata.name and metadata.namespace only.
            selectors.parse_field_selector(query.get("fieldSelector"), rtype.plural, True))
        found: Iterable[Obj | None]
        if rtype.namespaced:
            keys = sorted(k for k in self._pods if namespace is None or k[0] == namespace)
            found = (self._pod(ns, name) for ns, name in keys)
        else:
            found = (self._node(name) for name in sorted(self._nodes))
        items = [obj for obj in found if obj is not None and matches(obj)]
        return {"kind": f"{rtype.kind}List", "apiVersion": API_VERSION, "metadata": {}, "items": items}
