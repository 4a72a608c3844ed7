"""The StatefulSet controller: keeps each apps/v1 StatefulSet's ordered, stably named pods.

Level-based like the other control-plane loops: each pass hands every StatefulSet, the pods
and the ControllerRevisions of its namespace to :func:`statefulset_decision.decide` and
applies the answer (revisions recorded, renumbered or pruned; pods adopted or released,
created or deleted with kube's Events; the status written). A pass waits for the cache to
show the pods it created or deleted before it decides for that StatefulSet again, so an
ordered set never makes the same pod twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Optional

from trainctl.cluster.controlplane import statefulset_decision as sd
from trainctl.cluster.controlplane.api_resources import CONTROLLER_REVISIONS, STATEFULSETS
from trainctl.cluster.controlplane.history_control import write_revisions
from trainctl.cluster.controlplane.periodic import LoopController, PeriodicLoop, utc_now
from trainctl.cluster.controlplane.pod_control import apply_pods, by_namespace, sync_owners
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import Event, EventRecorder
from trainctl.kube.expectations import Expectations
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.statefulset")

Obj = dict[str, Any]
COMPONENT = "statefulset-controller"


class StatefulSetController(LoopController):
    def __init__(self, client: KubeClient, resync_period: float = 30.0, clock: Callable[[], datetime] = utc_now) -> None:
        self.client = client
        self.clock = clock
        self.statefulsets = Informer(client, STATEFULSETS)
        self.pods = Informer(client, r.PODS)
        self.revisions = Informer(client, CONTROLLER_REVISIONS)
        self.events = EventRecorder(client)
        self.expectations = Expectations(ttl=60.0)
        self.loop = PeriodicLoop("statefulset", [self.statefulsets, self.pods, self.revisions], self.sync,
                                 resync_period).wake_on_changes()

    def sync(self) -> Optional[float]:
        now = self.clock()
        pods_by_namespace = by_namespace(self.pods.store.list())
        revisions_by_namespace = by_namespace(self.revisions.store.list())

        def step(statefulset: Obj) -> Optional[float]:
            namespace = statefulset["metadata"].get("namespace") or ""
            decision = sd.decide(statefulset, pods_by_namespace.get(namespace, []),
                                 revisions_by_namespace.get(namespace, []), now)
            self._apply(statefulset, decision, now)
            return decision.requeue_after

        return sync_owners(self.statefulsets.store.list(), self.expectations, self.pods.store, step)

    def _apply(self, statefulset: Obj, decision: sd.StatefulSetDecision, now: datetime) -> None:
        namespace, name = statefulset["metadata"].get("namespace") or "", statefulset["metadata"]["name"]

        def record(kind: str, reason: str, message: str) -> None:
            self.events.record(statefulset, Event(kind, reason, message), COMPONENT, now)

        if not write_revisions(self.client, name, namespace, decision.revisions):
            return
        apply_pods(self.client, self.expectations, statefulset, rewrite=decision.rewrite, create=decision.create,
                   delete=decision.delete, record=record)
        try:
            if decision.status is not None:
                self.client.replace(STATEFULSETS, {**statefulset, "status": decision.status}, subresource="status")
        except ApiError as exc:
            log.info("cannot write the StatefulSet's status", extra={"statefulset": f"{namespace}/{name}", "error": str(exc)})
