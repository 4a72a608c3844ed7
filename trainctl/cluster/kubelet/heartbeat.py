"""The node's heartbeat: register the Node, renew its Lease, post its Ready condition.

Kept apart from the pods so that a node's liveness never waits on pod work: the Lease is
renewed every ``interval`` seconds (the real kubelet's ``nodeLeaseDurationSeconds`` / 4),
and the Node's status is written every five minutes (the real kubelet's
``nodeStatusReportFrequency``), when the kubelet stops, and at once after a beat came late
(the node was frozen or cut off: the lifecycle controller may have marked it Unknown, and
it must say Ready again promptly). A change of the Node's Ready condition is an Event
(``NodeReady``, ``NodeNotReady``), as the real kubelet records it, and so is each pressure
condition a new Node first gets.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Optional

from trainctl.cluster.kubelet import node as nodes
from trainctl.cluster.kubelet.kubelet_events import NORMAL, KubeletEvents
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import LEASES, NAMESPACES, NODES
from trainctl.kube.timestamps import now_rfc3339

log = logging.getLogger(__name__)

Obj = dict[str, Any]
STATUS_EVERY_BEATS = 30  # node status every 5 minutes at the default 10 s interval


class NodeHeartbeat:
    """One Node and its Lease, kept alive by a thread of its own."""

    def __init__(self, client: KubeClient, node_name: str, allocatable: dict[str, Any], interval: float,
                 events: Optional[KubeletEvents] = None, labels: Optional[dict[str, str]] = None) -> None:
        self._client = client
        self._events = events
        self._labels = dict(labels or {})
        self.node_name = node_name
        self._allocatable = allocatable
        self._interval = interval
        self._ready_since = now_rfc3339()
        self._node: Obj = {}
        self._beats = 0
        self._failed = False  # the last beat did not reach the API server
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.kubelet_port = 0  # where the API server reaches this kubelet (exec, attach, port-forward)

    @property
    def labels(self) -> dict[str, str]:
        return dict(self._node.get("metadata", {}).get("labels") or {})

    def register(self, beat: bool = True) -> None:
        """Create the Node (or find it), say it is Ready, renew its Lease; then keep beating
        (unless ``beat`` is false: the caller then calls :meth:`beat` itself)."""
        node = self._client.get_or_none(NODES, None, self.node_name)
        if node is None:
            created = self._client.create(NODES, nodes.node_object(self.node_name, self._labels)).object
            node = created or self._client.get(NODES, None, self.node_name)
        labels = (node.get("metadata") or {}).get("labels") or {}
        if any(labels.get(key) != value for key, value in self._labels.items()):
            node = self._client.patch(NODES, None, self.node_name, {"metadata": {"labels": self._labels}})
        self._node = node
        self.write_status(ready=True, message="kubelet is posting ready status")
        self._renew_lease()
        if not beat:
            return
        self._thread = threading.Thread(target=self._loop, name="kubelet-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and say the node is no longer ready."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            self.write_status(ready=False, message="kubelet stopped")
        except (ApiError, OSError) as exc:
            log.debug("node status on stop: %s", exc)

    def write_status(self, *, ready: bool, message: str) -> None:
        status = nodes.node_status(self.node_name, self._allocatable, ready, message, self._ready_since,
                                   self.kubelet_port)
        before = self._conditions() if self._events is not None else None  # a GET only to tell what changed
        try:
            self._client.patch(NODES, None, self.node_name, {"status": status}, subresource="status")
        except ApiError as exc:
            if exc.code not in (404, 405):
                raise
            self._client.patch(NODES, None, self.node_name, {"status": status})
        if self._events is not None and before is not None:
            self._record_changes(before, status["conditions"])

    def _conditions(self) -> Optional[dict[str, str]]:
        """The Node's condition statuses by type as stored now (None: unknown)."""
        try:
            node = self._client.get_or_none(NODES, None, self.node_name) or {}
        except ApiError:
            return None
        return {c.get("type", ""): c.get("status", "") for c in (node.get("status") or {}).get("conditions") or []}

    def _record_changes(self, before: dict[str, str], conditions: list[Obj]) -> None:
        assert self._events is not None
        for condition in conditions:
            kind, status = condition["type"], condition["status"]
            if kind == "Ready" and before.get(kind) != status:
                event = "NodeReady" if status == "True" else "NodeNotReady"
                self._events.node(NORMAL, event, f"Node {self.node_name} status is now: {event}")
            elif kind != "Ready" and kind not in before:  # KubeletHasSufficientMemory -> NodeHasSufficientMemory
                event = condition["reason"].replace("Kubelet", "Node", 1)
                self._events.node(NORMAL, event, f"Node {self.node_name} status is now: {event}")

    def _renew_lease(self) -> None:
        try:
            self._client.patch(LEASES, nodes.LEASE_NAMESPACE, self.node_name,
                               {"spec": {"renewTime": nodes.micro_time(), "holderIdentity": self.node_name}})
        except ApiError as exc:
            if exc.code != 404:
                raise
            try:
                self._client.create(LEASES, nodes.lease_object(self._node))
            except ApiError as missing:  # the namespace is the API server's; a node may not make it
                if missing.code != 404:
                    raise
                self._client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": nodes.LEASE_NAMESPACE}})
                self._client.create(LEASES, nodes.lease_object(self._node))

    def beat(self, late: bool = False) -> None:
        """One heartbeat: renew the Lease, and post the status every few beats or when late."""
        try:
            self._renew_lease()
            self._beats += 1
            # After beats that did not reach the API server (a partition), the node
            # lifecycle controller has said Unknown: say Ready at once.
            if late or self._failed or self._beats % STATUS_EVERY_BEATS == 0:
                self.write_status(ready=True, message="kubelet is posting ready status")
            self._failed = False
        except Exception as exc:  # API errors, or urllib3's while the API server restarts
            self._failed = True
            log.debug("heartbeat: %s", exc)

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stopped.wait(self._interval):
            late = time.monotonic() - last > 2 * self._interval  # monotonic time runs on while SIGSTOPped
            last = time.monotonic()
            self.beat(late)
