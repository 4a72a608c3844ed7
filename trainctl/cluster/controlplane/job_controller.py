"""The Job controller: runs batch/v1 Jobs' pods and writes their status, as kube-controller-manager does.

Level-based like the other control-plane loops: each pass hands every Job and the pods it
owns to :func:`job_decision.decide` and applies the answer (pods created or deleted, the
status written, Events recorded, a finished Job deleted once its TTL has passed). A pass asks
for the next one as soon as a back-off, a deadline or a TTL falls due.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from trainctl.cluster.controlplane import job_decision as jd
from trainctl.cluster.controlplane.api_resources import JOBS
from trainctl.cluster.controlplane.periodic import LoopController, PeriodicLoop
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import EventRecorder
from trainctl.kube.expectations import Expectations
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.job")

Obj = dict[str, Any]
COMPONENT = "job-controller"


@dataclass(frozen=True)
class JobEvent:
    type: str
    reason: str
    message: str


class JobController(LoopController):
    def __init__(self, client: KubeClient, resync_period: float = 30.0, backoff_base: float = jd.DEFAULT_BACKOFF) -> None:
        self.client = client
        self.backoff_base = backoff_base
        self.jobs = Informer(client, JOBS)
        self.pods = Informer(client, r.PODS, label_selector=jd.CONTROLLER_UID_LABEL)
        self.events = EventRecorder(client)
        # The pods a pass created or deleted, until the cache shows them: a pass on a stale
        # cache would create them again.
        self.expectations = Expectations(ttl=60.0)
        self.loop = PeriodicLoop("job", [self.jobs, self.pods], self.sync, resync_period).wake_on_changes()

    def sync(self) -> Optional[float]:
        now = datetime.now(timezone.utc)
        pods_by_uid: dict[str, list[Obj]] = {}
        for pod in self.pods.store.list():
            uid = ((pod.get("metadata") or {}).get("labels") or {}).get(jd.CONTROLLER_UID_LABEL)
            if uid:
                pods_by_uid.setdefault(uid, []).append(pod)
        sooner: Optional[float] = None
        def lookup(key: tuple[str, str, str]) -> Optional[Obj]:
            return self.pods.store.get(key[1], key[2])

        for job in self.jobs.store.list():
            if job["metadata"].get("deletionTimestamp"):
                continue
            uid = job["metadata"].get("uid") or ""
            if not self.expectations.satisfied(uid, lookup):
                continue  # the watch event that satisfies it wakes the loop
            decision = jd.decide(job, pods_by_uid.get(job["metadata"].get("uid") or "", []), now, backoff_base=self.backoff_base)
            self._apply(job, decision, now)
            if decision.requeue_after is not None:
                sooner = decision.requeue_after if sooner is None else min(sooner, decision.requeue_after)
        return None if sooner is None else max(sooner, 0.5)

    def _record(self, job: Obj, kind: str, reason: str, message: str, now: datetime) -> None:
        self.events.record(job, JobEvent(kind, reason, message), COMPONENT, now)

    def _apply(self, job: Obj, decision: jd.JobDecision, now: datetime) -> None:
        namespace, name = job["metadata"].get("namespace"), job["metadata"]["name"]
        try:
            if decision.delete_job:
                self.client.delete(JOBS, namespace, name,
                                   uid=job["metadata"].get("uid"), propagation="Foreground")
                return
            uid = job["metadata"].get("uid") or ""
            for pod in decision.create:
                created = self.client.create(r.PODS, pod).object
                if created is not None:
                    self.expectations.expect_creates(uid, uid, [("Pod", namespace, created["metadata"]["name"])])
                    self._record(job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}", now)
            for pod_name in decision.delete:
                self.expectations.expect_deletes(uid, [(("Pod", namespace, pod_name), None)])
                if self.client.delete(r.PODS, namespace, pod_name):
                    self._record(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod_name}", now)
            if decision.status is not None:
                self.client.replace(JOBS, {**job, "status": decision.status}, subresource="status")
            for kind, reason, message in decision.events:
                self._record(job, kind, reason, message, now)
        except ApiError as exc:  # a conflict, a refused pod or a busy server: the next pass looks again
            log.info("cannot apply the Job's next step", extra={"job": f"{namespace}/{name}", "error": str(exc)})
            if exc.code == 422 or exc.code == 403:
                self._record(job, "Warning", "FailedCreate", f"Error creating: {exc}", now)
