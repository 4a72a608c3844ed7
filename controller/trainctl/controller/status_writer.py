"""Writing a job's status: through the ``status`` subresource, batched, retried on conflict.

A status that only moves replica counts within ``status_batch_period`` of the job's last
write is held back and written when the period is over, with whatever else changed
meanwhile (the Job controller's syncJobBatchPeriod): status writes do not grow with pod
churn, while transitions (conditions, Events, counters) are written at once. A conflict
re-reads the job and writes the same status onto the fresh object. A written status goes
into the cache at once, so the next reconcile sees it before the watch delivers it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

from trainctl.controller.caches import Caches
from trainctl.controller.keys import JobKey
from trainctl.controller.reconcile.plan import Plan
from trainctl.kube import restmapper as r
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.workqueue import WorkQueue


@dataclass(frozen=True)
class StatusWrite:
    """What became of a plan's status."""

    persisted: bool  # the API has it (or the plan had none): the plan's Events and counters may follow
    held: float = 0.0  # seconds it waits for the batch period's end (0: not held)
    error: Optional[str] = None


def _without_counts(status: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in status.items() if k != "replicaStatuses"}


class StatusWriter:
    def __init__(self, client: KubeClient, caches: Caches, queue: WorkQueue[JobKey], *, batch_period: float) -> None:
        self.client = client
        self.caches = caches
        self.queue = queue
        self.batch_period = batch_period
        # job -> time.monotonic() of its last status write, for the status batch period
        self._written: dict[JobKey, float] = {}

    def apply(self, key: JobKey, job: dict[str, Any], plan: Plan) -> StatusWrite:
        """Write ``plan.status`` now, or hold it (re-queueing the job for the period's end)."""
        held = self.hold(key, job, plan)
        if held > 0:
            # Nothing rides on this status (no transition, Event or counter): a later
            # reconcile writes it, with whatever else changed by then.
            self.queue.add_after(key, held)
            return StatusWrite(persisted=False, held=held)
        if plan.status is None:
            return StatusWrite(persisted=True)
        try:
            return StatusWrite(persisted=self.write(job, plan.status) is not None)
        except ApiError as exc:
            return StatusWrite(persisted=False, error=f"status: {exc}")

    def hold(self, key: JobKey, job: dict[str, Any], plan: Plan) -> float:
        """Seconds to hold ``plan.status`` back: the rest of the status batch period when the
        new status only moves replica counts (the Job controller's syncJobBatchPeriod, so
        writes do not grow with pod churn); 0 when it must be written now. A transition
        (conditions, start or completion time, restarts), an Event or a counter is never held."""
        written = self._written.get(key)
        period = self.batch_period
        if plan.status is None or written is None or period <= 0 or plan.events or plan.metrics or plan.delete_job:
            return 0.0
        if _without_counts(plan.status) != _without_counts(job.get("status") or {}):
            return 0.0
        return max(0.0, written + period - time.monotonic())

    def write(self, job: dict[str, Any], status: dict[str, Any], attempts: int = 5) -> Optional[dict[str, Any]]:
        """PUT the new status; on a conflict re-read the job and re-apply it. None if the job is gone."""
        resource = r.resource_of(job)
        meta = job["metadata"]
        body = {**job, "status": status}
        for attempt in range(attempts):
            try:
                updated = self.client.replace(resource, body, subresource="status")
            except ApiError as exc:
                if exc.code == 404:
                    return None
                if exc.code != 409 or attempt == attempts - 1:
                    raise
                fresh = self.client.get_or_none(resource, meta.get("namespace"), meta["name"])
                if fresh is None or fresh["metadata"].get("uid") != meta.get("uid"):
                    return None
                body = {**fresh, "status": status}
                continue
            key = JobKey.of(job)
            self._written[key] = time.monotonic()
            # Write-through: the next reconcile must see this status even before the watch
            # delivers it, or it would redo the same transition (events, counters).
            self.caches.write_through(job, updated)
            if attempt > 0:
                # The job changed under us (that was the conflict), and the cache now holds
                # the changed version, so its watch event will look stale: reconcile again.
                self.queue.add(key)
            return updated
        return None

    def forget(self, key: JobKey) -> None:
        self._written.pop(key, None)
