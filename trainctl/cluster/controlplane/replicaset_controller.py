"""The ReplicaSet controller: keeps each apps/v1 ReplicaSet's pods at its replica count.

Level-based like the other control-plane loops: each pass hands every ReplicaSet and the pods
of its namespace to :func:`replicaset_decision.decide` and applies the answer (pods adopted or
released, created or deleted, the status written, Events recorded as kube's controller
records them). A pass waits for the cache to show the pods it created or deleted before it
decides for that ReplicaSet again, so a slow watch never doubles a scale-up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Optional

from trainctl.cluster.controlplane import replicaset_decision as rd
from trainctl.cluster.controlplane.controller_ref import controller_of
from trainctl.cluster.controlplane.periodic import LoopController, PeriodicLoop, utc_now
from trainctl.cluster.controlplane.pod_control import apply_pods
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import Event, EventRecorder
from trainctl.kube.expectations import Expectations
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.replicaset")

Obj = dict[str, Any]
COMPONENT = "replicaset-controller"


class ReplicaSetController(LoopController):
    """Runs apps/v1 ReplicaSets; a subclass runs another kind by the same rules (see
    :mod:`.replication_manager`)."""

    resource = r.REPLICASETS
    owner = (rd.API_VERSION, rd.KIND)
    component = COMPONENT
    loop_name = "replicaset"

    def __init__(self, client: KubeClient, resync_period: float = 30.0, clock: Callable[[], datetime] = utc_now) -> None:
        self.client = client
        self.clock = clock
        self.replicasets = Informer(client, self.resource)
        self.pods = Informer(client, r.PODS)
        self.events = EventRecorder(client)
        self.expectations = Expectations(ttl=60.0)
        self.failures: dict[str, Optional[tuple[str, str]]] = {}  # ReplicaSet uid -> why its last pods were refused
        self.loop = PeriodicLoop(self.loop_name, [self.replicasets, self.pods], self.sync, resync_period).wake_on_changes()

    def sync(self) -> Optional[float]:
        now = self.clock()
        pods_by_namespace: dict[str, list[Obj]] = {}
        for pod in self.pods.store.list():
            pods_by_namespace.setdefault(pod["metadata"].get("namespace") or "", []).append(pod)

        def lookup(key: tuple[str, str, str]) -> Optional[Obj]:
            return self.pods.store.get(key[1], key[2])

        replicasets = self.replicasets.store.list()
        # Pods of ReplicaSets with one controller (a Deployment's): kube ranks pods doubled up on a node among them all.
        siblings: dict[str, set[str]] = {}
        for replicaset in replicasets:
            owner = str((controller_of(replicaset) or {}).get("uid") or replicaset["metadata"].get("uid"))
            siblings.setdefault(owner, set()).add(str(replicaset["metadata"].get("uid")))
        sooner: Optional[float] = None
        for replicaset in replicasets:
            uid = replicaset["metadata"].get("uid") or ""
            if not self.expectations.satisfied(uid, lookup):
                continue  # the watch event that satisfies it wakes the loop
            pods = pods_by_namespace.get(replicaset["metadata"].get("namespace") or "", [])
            family = siblings[str((controller_of(replicaset) or {}).get("uid") or uid)]
            related = [p for p in pods if str((controller_of(p) or {}).get("uid")) in family and not p["metadata"].get("deletionTimestamp")]
            decision = rd.decide(self.as_replicaset(replicaset), pods, now, related, failure=self.failures.get(uid),
                                 owner=self.owner)
            self._apply(replicaset, decision, now)
            if decision.requeue_after is not None:
                sooner = decision.requeue_after if sooner is None else min(sooner, decision.requeue_after)
        return None if sooner is None else max(sooner, 0.5)

    def as_replicaset(self, obj: Obj) -> Obj:
        """The object as the ReplicaSet rules read it."""
        return obj

    def _apply(self, replicaset: Obj, decision: rd.ReplicaSetDecision, now: datetime) -> None:
        namespace, name, uid = replicaset["metadata"].get("namespace"), replicaset["metadata"]["name"], replicaset["metadata"].get("uid") or ""

        def record(kind: str, reason: str, message: str) -> None:
            self.events.record(replicaset, Event(kind, reason, message), self.component, now)

        failure = apply_pods(self.client, self.expectations, replicaset, rewrite=decision.rewrite, create=decision.create,
                             delete=decision.delete, record=record)
        try:  # the status, whatever became of the pods (a refusal is part of it)
            if decision.status is not None:
                self.client.replace(self.resource, {**replicaset, "status": decision.status}, subresource="status")
        except ApiError as exc:
            log.info("cannot write the ReplicaSet's status", extra={"replicaset": f"{namespace}/{name}", "error": str(exc)})
        if failure != self.failures.get(uid):
            self.failures[uid] = failure
            self.loop.wake()  # the next pass writes the condition
