"""What kube's CronJob controller does next for one batch/v1 CronJob, from it and its Jobs.

A nightly evaluation or a periodic data refresh is a CronJob. This module is kube's rules
with no I/O and no clock (``now`` is passed in): the most recent schedule time due since the
last one (in the CronJob's ``timeZone``), ``startingDeadlineSeconds``, the three
``concurrencyPolicy`` values, ``suspend``, the Job named ``NAME-<minutes since the epoch>``
(so a schedule time is run at most once, whatever a restart or a retry does), the status's
``active``, ``lastScheduleTime`` and ``lastSuccessfulTime``, and the history limits.
Schedules are read as :mod:`trainctl.cluster.cron` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from croniter import croniter

from trainctl.cluster.controlplane.job_decision import finished, owned_by, parse_time, rfc3339
from trainctl.cluster.cron import zone
from trainctl.cluster.podutil import metadata

Obj = dict[str, Any]

SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MAX_MISSED = 100


def job_name(cronjob: Obj, scheduled: datetime) -> str:
    return f"{metadata(cronjob).get('name')}-{int(scheduled.timestamp()) // 60}"


def most_recent_schedule(cronjob: Obj, now: datetime) -> tuple[Optional[datetime], int]:
    """The latest schedule time in (last schedule or creation, now], and how many were due."""
    spec, status = cronjob.get("spec") or {}, cronjob.get("status") or {}
    since = parse_time(status.get("lastScheduleTime")) or parse_time(metadata(cronjob).get("creationTimestamp")) or now
    deadline = spec.get("startingDeadlineSeconds")
    if isinstance(deadline, int):
        since = max(since, now - timedelta(seconds=deadline))
    tz = zone(spec["timeZone"]) if spec.get("timeZone") else timezone.utc
    times = croniter(spec.get("schedule", ""), since.astimezone(tz))
    latest, missed = None, 0
    while True:
        upcoming: datetime = times.get_next(datetime)
        if upcoming > now:
            return latest, missed
        latest, missed = upcoming.astimezone(timezone.utc), missed + 1
        if missed > MAX_MISSED:  # kube stops counting, and warns
            return latest, missed


def next_schedule(cronjob: Obj, now: datetime) -> datetime:
    spec = cronjob.get("spec") or {}
    tz = zone(spec["timeZone"]) if spec.get("timeZone") else timezone.utc
    upcoming: datetime = croniter(spec.get("schedule", ""), now.astimezone(tz)).get_next(datetime)
    return upcoming.astimezone(timezone.utc)


@dataclass
class CronJobDecision:
    create: Optional[Obj] = None  # a Job to create
    delete: list[str] = field(default_factory=list)  # Jobs to delete (Replace, history limits)
    status: Optional[Obj] = None
    events: list[tuple[str, str, str]] = field(default_factory=list)
    requeue_after: Optional[float] = None


def job_for(cronjob: Obj, scheduled: datetime) -> Obj:
    meta, spec = metadata(cronjob), cronjob.get("spec") or {}
    template = spec.get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": meta.get("name"), "uid": meta.get("uid"),
             "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name(cronjob, scheduled), "namespace": meta.get("namespace"),
                         "labels": dict(tmeta.get("labels") or {}),
                         "annotations": {**(tmeta.get("annotations") or {}), SCHEDULED_TIMESTAMP: rfc3339(scheduled)},
                         "ownerReferences": [owner]},
            "spec": dict(template.get("spec") or {})}


def _ref(job: Obj) -> Obj:
    meta = metadata(job)
    return {"kind": "Job", "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
            "apiVersion": "batch/v1"}


def decide(cronjob: Obj, jobs: list[Obj], now: datetime) -> CronJobDecision:
    spec = cronjob.get("spec") or {}
    status: Obj = {**(cronjob.get("status") or {})}
    decision = CronJobDecision()
    uid = str(metadata(cronjob).get("uid"))
    owned = sorted((j for j in jobs if owned_by(j, uid)), key=lambda j: str(metadata(j).get("name")))
    running = [j for j in owned if finished(j) is None and not metadata(j).get("deletionTimestamp")]
    done = [j for j in owned if finished(j) is not None]

    # What finished since the last pass.
    was_active = {ref.get("uid") for ref in status.get("active") or []}
    for job in done:
        if metadata(job).get("uid") in was_active:
            kind = "Complete" if (finished(job) or {}).get("type") == "Complete" else "Failed"
            decision.events.append(("Normal", "SawCompletedJob", f"Saw completed job: {metadata(job).get('name')}, status: {kind}"))
    successes = [parse_time((j.get("status") or {}).get("completionTime")) for j in done
                 if (finished(j) or {}).get("type") == "Complete"]
    latest_success = max((t for t in successes if t is not None), default=None)
    if latest_success is not None:
        status["lastSuccessfulTime"] = rfc3339(max(latest_success, parse_time(status.get("lastSuccessfulTime")) or latest_success))

    # History limits: the oldest finished Jobs beyond them go.
    for kind, limit in (("Complete", spec.get("successfulJobsHistoryLimit", 3)), ("Failed", spec.get("failedJobsHistoryLimit", 1))):
        of_kind = [j for j in done if (finished(j) or {}).get("type") == kind]
        of_kind.sort(key=lambda j: str((j.get("status") or {}).get("completionTime") or metadata(j).get("creationTimestamp")))
        if isinstance(limit, int) and len(of_kind) > limit:
            decision.delete.extend(metadata(j)["name"] for j in of_kind[: len(of_kind) - limit])

    if not spec.get("suspend"):
        scheduled, missed = most_recent_schedule(cronjob, now)
        if missed > MAX_MISSED:
            decision.events.append(("Warning", "TooManyMissedTimes",
                                    "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"))
        if scheduled is not None:
            name = job_name(cronjob, scheduled)
            already = any(metadata(j).get("name") == name for j in owned)
            policy = spec.get("concurrencyPolicy") or "Allow"
            if already:
                status["lastScheduleTime"] = rfc3339(scheduled)
            elif policy == "Forbid" and running:
                decision.events.append(("Normal", "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid"))
            else:
                if policy == "Replace":
                    decision.delete.extend(metadata(job)["name"] for job in running)
                    running = []
                decision.create = job_for(cronjob, scheduled)
                status["lastScheduleTime"] = rfc3339(scheduled)
        decision.requeue_after = max((next_schedule(cronjob, now) - now).total_seconds(), 0.0) + 0.1

    active = [_ref(j) for j in running]
    if active:
        status["active"] = active
    else:
        status.pop("active", None)
    if status != (cronjob.get("status") or {}):
        decision.status = status
    return decision
