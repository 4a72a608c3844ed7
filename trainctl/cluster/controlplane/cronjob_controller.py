"""The CronJob controller: starts a CronJob's Jobs on schedule and keeps its status and history.

Level-based like the other control-plane loops: each pass hands every CronJob and the Jobs it
owns to :func:`cronjob_decision.decide`, applies the answer, and sleeps until the next
schedule time of any CronJob (or a change wakes it). A Job's name carries its schedule time,
so a pass that runs twice for one time creates it once (the second create is AlreadyExists).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Optional

from trainctl.cluster.controlplane import cronjob_decision as cd
from trainctl.cluster.controlplane.api_resources import CRONJOBS, JOBS
from trainctl.cluster.controlplane.job_controller import JobEvent
from trainctl.cluster.controlplane.periodic import LoopController, PeriodicLoop, utc_now
from trainctl.cluster.cron import schedule_problem
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import EventRecorder
from trainctl.kube.informer import Informer

log = logging.getLogger("trainctl.controlplane.cronjob")

Obj = dict[str, Any]
COMPONENT = "cronjob-controller"


class CronJobController(LoopController):
    def __init__(self, client: KubeClient, resync_period: float = 60.0, clock: Callable[[], datetime] = utc_now) -> None:
        self.client = client
        self.clock = clock
        self.cronjobs = Informer(client, CRONJOBS)
        self.jobs = Informer(client, JOBS)
        self.events = EventRecorder(client)
        self.loop = PeriodicLoop("cronjob", [self.cronjobs, self.jobs], self.sync, resync_period).wake_on_changes()

    def sync(self) -> Optional[float]:
        now = self.clock()
        jobs = self.jobs.store.list()
        sooner: Optional[float] = None
        for cronjob in self.cronjobs.store.list():
            if cronjob["metadata"].get("deletionTimestamp"):
                continue
            if schedule_problem((cronjob.get("spec") or {}).get("schedule"), (cronjob.get("spec") or {}).get("timeZone")):
                continue  # refused on create; one stored before this server validated it waits for a fix
            decision = cd.decide(cronjob, jobs, now)
            self._apply(cronjob, decision, now)
            if decision.requeue_after is not None:
                sooner = decision.requeue_after if sooner is None else min(sooner, decision.requeue_after)
        return sooner

    def _apply(self, cronjob: Obj, decision: cd.CronJobDecision, now: datetime) -> None:
        namespace, name = cronjob["metadata"].get("namespace"), cronjob["metadata"]["name"]

        def record(kind: str, reason: str, message: str) -> None:
            self.events.record(cronjob, JobEvent(kind, reason, message), COMPONENT, now)

        try:
            for job_name in decision.delete:
                if self.client.delete(JOBS, namespace, job_name, propagation="Background"):
                    record("Normal", "SuccessfulDelete", f"Deleted job {job_name}")
            if decision.create is not None:
                created = self.client.create(JOBS, decision.create)
                if not created.existed:
                    record("Normal", "SuccessfulCreate", f"Created job {decision.create['metadata']['name']}")
            if decision.status is not None:
                self.client.replace(CRONJOBS, {**cronjob, "status": decision.status}, subresource="status")
            for kind, reason, message in decision.events:
                record(kind, reason, message)
        except ApiError as exc:  # a conflict, a refused Job or a busy server: the next pass looks again
            log.info("cannot apply the CronJob's next step", extra={"cronjob": f"{namespace}/{name}", "error": str(exc)})
            if exc.code in (403, 422):
                record("Warning", "FailedCreate", f"Error creating job: {exc}")
