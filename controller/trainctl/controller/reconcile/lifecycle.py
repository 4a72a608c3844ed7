"""The job's life cycle around its replicas: start and resume, suspend, finish, clean-up, TTL.

A suspended job keeps no pod, Service, PodGroup or rendezvous store (spec §5.9); resumed, it
starts afresh. A finished job (Succeeded or Failed, also through backoffLimit or its
deadline) has its pods cleaned up per ``runPolicy.cleanPodPolicy``, its PodGroup and store
deleted, a completion time, and is itself deleted ``ttlSecondsAfterFinished`` later
(spec §5.8, §5.10).
"""

from __future__ import annotations

from trainctl.api import constants as c
from trainctl.controller.reconcile import gang, rendezvous
from trainctl.controller.reconcile.children import parse_time, rfc3339
from trainctl.controller.reconcile.conditions import FALSE, TRUE
from trainctl.controller.reconcile.state import Pass


def start(p: Pass) -> None:
    """An active job has a start time; a resumed one starts again."""
    fw = p.framework
    if p.book.is_true(c.CONDITION_SUSPENDED):
        p.book.set(c.CONDITION_SUSPENDED, FALSE, fw.reason("Resumed"), f"{fw.kind} {p.name} is resumed.", "Normal")
        p.status["startTime"] = rfc3339(p.now)
    if not p.status.get("startTime"):
        p.status["startTime"] = rfc3339(p.now)


def fail(p: Pass, reason: str, message: str) -> None:
    """End an active job that ran into a limit: complete, clean up, Failed, then the TTL."""
    complete(p)
    clean_up(p)
    p.book.set(c.CONDITION_FAILED, TRUE, reason, message, "Normal")
    ttl(p)


def complete(p: Pass) -> None:
    if not p.status.get("completionTime"):
        p.status["completionTime"] = rfc3339(p.now)


def finished(p: Pass) -> None:
    """Clean up per cleanPodPolicy, drop the PodGroup and the store, then the TTL."""
    clean_up(p)
    if p.book.is_true(c.CONDITION_SUCCEEDED):
        statuses = {}
        for rtype, counts in (p.status.get("replicaStatuses") or {}).items():
            counts = dict(counts)
            moved = (counts.pop("active", 0) or 0) + (counts.get("succeeded", 0) or 0)
            if moved:
                counts["succeeded"] = moved
            statuses[rtype] = counts
        if statuses:
            p.status["replicaStatuses"] = statuses
    complete(p)
    ttl(p)


def suspend(p: Pass) -> None:
    """Delete every pod, Service, the PodGroup and the store; mark the job Suspended."""
    fw = p.framework
    for pod in p.pods.replicas():
        p.delete(pod, with_service=False)
    for service in p.services.replicas():
        p.delete(service, kind="Service", with_service=False)
    rendezvous.delete_store(p)
    gang.delete(p)
    statuses = {}
    for rtype, counts in (p.status.get("replicaStatuses") or {}).items():
        statuses[rtype] = {k: v for k, v in counts.items() if k != "active"}
    if statuses:
        p.status["replicaStatuses"] = statuses
    message = f"{fw.kind} {p.name} is suspended."
    if p.book.is_true(c.CONDITION_RUNNING):
        p.book.set(c.CONDITION_RUNNING, FALSE, fw.reason("Suspended"), message, None)
    if not p.book.is_true(c.CONDITION_SUSPENDED):
        p.book.set(c.CONDITION_SUSPENDED, TRUE, fw.reason("Suspended"), message, "Normal")


def clean_up(p: Pass) -> None:
    """cleanPodPolicy: None keeps every pod, Running deletes Running and Pending ones, else all."""
    policy = p.run_policy.clean_pod_policy
    rendezvous.delete_store(p)
    gang.delete(p)
    if policy == "None":
        return
    for pod in p.pods.replicas():
        phase = (pod.get("status") or {}).get("phase")
        if policy == "Running" and phase not in ("Running", "Pending"):
            continue
        p.delete(pod, as_observed=policy == "Running")


def ttl(p: Pass) -> None:
    """Delete the finished job once ``ttlSecondsAfterFinished`` has passed; until then, come back."""
    seconds = p.run_policy.ttl_seconds_after_finished
    completed = parse_time(p.status.get("completionTime"))
    if seconds is None or completed is None:
        return
    left = (completed - p.now).total_seconds() + seconds
    if left <= 0:
        p.plan.delete_job = True
        p.plan.metrics.append("deleted")
    else:
        p.requeue.append(left)
