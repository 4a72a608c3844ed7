"""The node lifecycle controller: the loop around :mod:`.node_lifecycle`'s decision.

Informers keep Nodes, node Leases (``kube-node-lease``) and bound pods cached; every node
monitor period (5 s, kube's ``--node-monitor-period``), when a scheduled eviction falls
due, at a Lease renewal of a node that is not Ready or carries taints, and just after a
node's grace period runs out without a sign of life (so a dead node is judged a grace period
after its last renewal, not up to two monitor periods later), one pass decides and applies: node status writes (conditional on the resourceVersion
decided on, so a kubelet's concurrent write wins and the next pass looks again), taint
changes, pod status writes, graceful deletes, Events.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from trainctl.cluster.controlplane import node_lifecycle
from trainctl.cluster.controlplane.periodic import PeriodicLoop
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import EventRecorder
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.nodes")

NODE_COMPONENT = "node-controller"
EVICTION_COMPONENT = "taint-eviction-controller"
VERDICT_MARGIN = 0.05  # seconds


class NodeLifecycleController:
    def __init__(
        self,
        client: KubeClient,
        *,
        config: node_lifecycle.NodeLifecycleConfig = node_lifecycle.NodeLifecycleConfig(),
        monitor_period: float = 5.0,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.client = client
        self.config = config
        self.clock = clock
        self.events = EventRecorder(client)
        self.state = node_lifecycle.State()
        self.nodes = Informer(client, r.NODES)
        self.leases = Informer(client, r.LEASES, namespace=node_lifecycle.LEASE_NAMESPACE)
        self.pods = Informer(client, r.PODS, field_selector="spec.nodeName!=")
        self.loop = PeriodicLoop("node-lifecycle", [self.nodes, self.leases, self.pods], self.sync, monitor_period)
        # A renewal is a sign of life timed by this controller's clock when it arrives, so the
        # next pass judges it to the moment without a pass per renewal: a thousand nodes renew
        # a hundred times a second, and a pass reads every node and pod.
        self._renewals_lock = threading.Lock()
        self._renewals_seen: dict[str, datetime] = {}
        self.leases.add_handler(self._on_lease)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def _on_lease(self, event_type: str, new: Optional[dict[str, Any]], _old: Optional[dict[str, Any]]) -> None:
        if new is None or event_type == "DELETED":
            return
        name = new["metadata"]["name"]
        with self._renewals_lock:
            self._renewals_seen[name] = self.clock()
        # A pass at once only where a renewal may change something: a node not Ready, or tainted.
        node = self.nodes.store.get("", name)
        ready = node_lifecycle.condition(node, "Ready") if node else None
        if node is None or (ready or {}).get("status") != "True" or (node.get("spec") or {}).get("taints"):
            self.loop.wake()

    def sync(self) -> Optional[float]:
        """One pass over every node; returns how soon the next pass is needed."""
        now = self.clock()
        with self._renewals_lock:
            seen = dict(self._renewals_seen)
        plan = node_lifecycle.reconcile(
            self.nodes.store.list(), self.leases.store.list(), self.pods.store.list(), self.state, now, self.config,
            renewals_seen=seen,
        )
        self.state = plan.state
        self.apply(plan, now)
        due = [t for t in (plan.next_eviction_in, plan.next_verdict_in) if t is not None]
        # the verdict is "grace exceeded", so look a moment after the grace runs out
        return min(due) + VERDICT_MARGIN if due else None

    def apply(self, plan: node_lifecycle.Plan, now: datetime) -> None:
        versions: dict[str, str] = {}  # node name -> resourceVersion after our status write
        for node in plan.node_statuses:
            written = self._write("node status", node, self.client.replace, r.NODES, node, subresource="status")
            if written:
                versions[node["metadata"]["name"]] = written["metadata"]["resourceVersion"]
        for node in plan.node_taints:
            name = node["metadata"]["name"]
            # Conditional, as kube's taint updates are: a concurrent change wins and is looked at again.
            patch = {"metadata": {"resourceVersion": versions.get(name, node["metadata"].get("resourceVersion"))},
                     "spec": {"taints": node["spec"]["taints"]}}
            self._write("node taints", node, self.client.patch, r.NODES, None, name, patch)
        for pod in plan.pod_statuses:
            self._write("pod status", pod, self.client.replace, r.PODS, pod, subresource="status")
        for pod in plan.evictions:
            meta = pod["metadata"]
            self._write("eviction", pod, self.client.delete, r.PODS, meta.get("namespace"), meta["name"], uid=meta.get("uid"))
        for obj, event in plan.events:
            component = EVICTION_COMPONENT if event.reason == "TaintManagerEviction" else NODE_COMPONENT
            self.events.record(obj, event, component, now)
        if plan.node_statuses or plan.node_taints or plan.evictions:
            log.info("node lifecycle", extra={
                "unknown": ",".join(n["metadata"]["name"] for n in plan.node_statuses),
                "tainted": ",".join(n["metadata"]["name"] for n in plan.node_taints),
                "evicted": ",".join(f"{p['metadata'].get('namespace')}/{p['metadata']['name']}" for p in plan.evictions),
            })

    @staticmethod
    def _write(what: str, obj: dict[str, Any], call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call``'s answer; a failed write is logged (None) and the next pass decides again."""
        try:
            return call(*args, **kwargs)
        except ApiError as exc:
            log.warning("write failed, next pass retries", extra={"write": what, "object": obj["metadata"]["name"], "error": str(exc)})
            return None
