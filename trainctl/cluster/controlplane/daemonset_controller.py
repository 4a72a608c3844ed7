"""The DaemonSet controller: keeps one pod of each apps/v1 DaemonSet on every node it belongs on.

Level-based like the other control-plane loops: each pass hands every DaemonSet, the nodes
and the pods and ControllerRevisions of its namespace to :func:`daemonset_decision.decide` and
applies the answer (its template recorded as a revision, pods adopted or released, created for nodes without one, deleted where they no longer
belong or to roll out a new template, the status written, Events recorded as kube's
controller records them). Node changes wake it, so a node added or relabelled gets its pod.
A pass waits for the cache to show the pods it created or deleted before it decides for
that DaemonSet again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Optional

from trainctl.cluster.controlplane import daemonset_decision as dd
from trainctl.cluster.controlplane.api_resources import CONTROLLER_REVISIONS, DAEMONSETS
from trainctl.cluster.controlplane.history_control import write_revisions
from trainctl.cluster.controlplane.periodic import LoopController, PeriodicLoop, utc_now
from trainctl.cluster.controlplane.pod_control import apply_pods, by_namespace, sync_owners
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import Event, EventRecorder
from trainctl.kube.expectations import Expectations
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.daemonset")

Obj = dict[str, Any]
COMPONENT = "daemonset-controller"


class DaemonSetController(LoopController):
    def __init__(self, client: KubeClient, resync_period: float = 30.0, clock: Callable[[], datetime] = utc_now) -> None:
        self.client = client
        self.clock = clock
        self.daemonsets = Informer(client, DAEMONSETS)
        self.nodes = Informer(client, r.NODES)
        self.pods = Informer(client, r.PODS)
        self.revisions = Informer(client, CONTROLLER_REVISIONS)
        self.events = EventRecorder(client)
        self.expectations = Expectations(ttl=60.0)
        self.loop = PeriodicLoop("daemonset", [self.daemonsets, self.nodes, self.pods, self.revisions], self.sync,
                                 resync_period).wake_on_changes()

    def sync(self) -> Optional[float]:
        now = self.clock()
        nodes = self.nodes.store.list()
        pods_by_namespace = by_namespace(self.pods.store.list())
        revisions_by_namespace = by_namespace(self.revisions.store.list())

        def step(daemonset: Obj) -> Optional[float]:
            namespace = daemonset["metadata"].get("namespace") or ""
            decision = dd.decide(daemonset, nodes, pods_by_namespace.get(namespace, []), now,
                                 revisions_by_namespace.get(namespace, []))
            self._apply(daemonset, decision, now)
            return decision.requeue_after

        return sync_owners(self.daemonsets.store.list(), self.expectations, self.pods.store, step)

    def _apply(self, daemonset: Obj, decision: dd.DaemonSetDecision, now: datetime) -> None:
        namespace, name = daemonset["metadata"].get("namespace"), daemonset["metadata"]["name"]

        def record(kind: str, reason: str, message: str) -> None:
            self.events.record(daemonset, Event(kind, reason, message), COMPONENT, now)

        if not write_revisions(self.client, name, namespace or "", decision.revisions):
            return
        apply_pods(self.client, self.expectations, daemonset, rewrite=decision.rewrite, create=decision.create,
                   delete=decision.delete, record=record)
        try:
            if decision.status is not None:
                self.client.replace(DAEMONSETS, {**daemonset, "status": decision.status}, subresource="status")
        except ApiError as exc:
            log.info("cannot write the DaemonSet's status", extra={"daemonset": f"{namespace}/{name}", "error": str(exc)})
