"""The Deployment controller: rolls each apps/v1 Deployment out through its ReplicaSets.

Level-based like the other control-plane loops: each pass hands every Deployment, the
ReplicaSets of its namespace and their pods to :func:`deployment_decision.decide` and applies
the answer (ReplicaSets created, scaled, adopted or deleted, the status written, kube's
``ScalingReplicaSet`` Events). The ReplicaSet controller then creates and deletes the pods;
its status writes wake this loop for the rollout's next step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Optional

from trainctl.cluster.controlplane import deployment_decision as dd
from trainctl.cluster.controlplane.controller_ref import controller_of
from trainctl.cluster.controlplane.periodic import LoopController, PeriodicLoop, utc_now
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import Event, EventRecorder
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.deployment")

Obj = dict[str, Any]
COMPONENT = "deployment-controller"


class DeploymentController(LoopController):
    def __init__(self, client: KubeClient, resync_period: float = 30.0, clock: Callable[[], datetime] = utc_now) -> None:
        self.client = client
        self.clock = clock
        self.deployments = Informer(client, r.DEPLOYMENTS)
        self.replicasets = Informer(client, r.REPLICASETS)
        self.pods = Informer(client, r.PODS, label_selector=dd.HASH_LABEL)
        self.events = EventRecorder(client)
        self.loop = PeriodicLoop("deployment", [self.deployments, self.replicasets, self.pods], self.sync,
                                 resync_period).wake_on_changes()

    def sync(self) -> Optional[float]:
        now = self.clock()
        replicasets_by_namespace: dict[str, list[Obj]] = {}
        for replicaset in self.replicasets.store.list():
            replicasets_by_namespace.setdefault(replicaset["metadata"].get("namespace") or "", []).append(replicaset)
        pods_by_owner: dict[str, list[Obj]] = {}
        for pod in self.pods.store.list():
            pods_by_owner.setdefault(str((controller_of(pod) or {}).get("uid")), []).append(pod)
        sooner: Optional[float] = None
        for deployment in self.deployments.store.list():
            candidates = replicasets_by_namespace.get(deployment["metadata"].get("namespace") or "", [])
            pods = [p for rs in candidates for p in pods_by_owner.get(str(rs["metadata"].get("uid")), [])]
            decision = dd.decide(deployment, candidates, pods, now)
            self._apply(deployment, decision, now)
            if decision.requeue_after is not None:
                sooner = decision.requeue_after if sooner is None else min(sooner, decision.requeue_after)
        return None if sooner is None else max(sooner, 0.5)

    def _apply(self, deployment: Obj, decision: dd.DeploymentDecision, now: datetime) -> None:
        namespace, name = deployment["metadata"].get("namespace"), deployment["metadata"]["name"]
        try:
            for replicaset in decision.create:
                self.client.create(r.REPLICASETS, replicaset)
            for replicaset in decision.update:
                self.client.replace(r.REPLICASETS, replicaset)
            for replicaset_name in decision.delete:
                self.client.delete(r.REPLICASETS, namespace, replicaset_name)
            if decision.status is not None:  # before the annotation patch, while the cached resourceVersion is current
                self.client.replace(r.DEPLOYMENTS, {**deployment, "status": decision.status}, subresource="status")
            if decision.revision is not None:
                self.client.patch(r.DEPLOYMENTS, namespace, name, {"metadata": {"annotations": {dd.REVISION: decision.revision}}})
            for kind, reason, message in decision.events:
                self.events.record(deployment, Event(kind, reason, message), COMPONENT, now)
        except ApiError as exc:  # a conflict or a busy server: the next pass looks again on a fresher cache
            log.info("cannot apply the Deployment's next step", extra={"deployment": f"{namespace}/{name}", "error": str(exc)})
