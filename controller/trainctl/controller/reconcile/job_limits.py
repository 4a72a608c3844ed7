"""The limits a job runs under: the controller's replica limit, backoffLimit and the deadline.

A job asking for more replicas than the controller takes on fails before any per-replica
work. A running job fails once its restarts reach ``runPolicy.backoffLimit`` or once it has
been active for ``runPolicy.activeDeadlineSeconds`` (spec §5.6, §5.7); until then a pass
comes back when the deadline falls.
"""

from __future__ import annotations

from typing import Optional

from trainctl.controller.frameworks.base import ReplicaCounts
from trainctl.controller.reconcile import oom
from trainctl.controller.reconcile.children import parse_time
from trainctl.controller.reconcile.state import Pass


def replica_limit_exceeded(p: Pass) -> Optional[str]:
    """Why the job asks for more replicas than the controller takes on, if it does."""
    limit = p.config.max_replicas_per_job
    flag = f"the controller's limit of {limit} replicas per job (--max-replicas-per-job)"
    kind = p.framework.job_kind
    for rtype in p.types:
        replicas = p.specs[rtype].replicas or 0
        if replicas > limit:
            return f"{kind.replica_path(rtype)}.replicas: {replicas} exceeds {flag}"
    total = sum(p.specs[rtype].replicas or 0 for rtype in p.types)
    if total > limit:
        return f"spec.{kind.replica_specs_field}: {total} replicas in all exceed {flag}"
    return None


def limit_failure(p: Pass, counts: dict[str, ReplicaCounts]) -> Optional[str]:
    """The failure message when backoffLimit or activeDeadlineSeconds is exceeded."""
    limit = p.run_policy.backoff_limit
    if limit is not None and past_backoff_limit(p, limit, counts):
        return f"Job {p.name} has failed because it has reached the specified backoff limit"
    deadline = p.run_policy.active_deadline_seconds
    started = parse_time(p.status.get("startTime"))
    if deadline is not None and started is not None and (p.now - started).total_seconds() >= deadline:
        return f"Job {p.name} has failed because it was active longer than specified deadline"
    return None


def past_backoff_limit(p: Pass, limit: int, counts: dict[str, ReplicaCounts]) -> bool:
    """Restarts so far, the kubelet's and the controller's own (#2045), against the limit.
    OOM kills that a relaunch with more memory handles do not count: neither the relaunch
    (it is in restartCount all the same) nor the kubelet's in-place restarts of the
    OOMKilled pod with the old limit, before or while the relaunch deletes it."""
    own = max(0, (p.status.get("restartCount") or 0) - oom.relaunches(p.oom.memory))
    kubelet = 0
    for rtype in p.types:
        if p.specs[rtype].restart_policy == "Never":
            continue
        for pod in p.pods.of_type(rtype):  # a duplicate's restarts count too
            status = pod.get("status") or {}
            if status.get("phase") != "Running":
                continue
            if p.oom.handles(pod):
                continue
            for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
                kubelet += cs.get("restartCount") or 0
    used = kubelet + own
    if used > 0 if limit == 0 else used >= limit:
        return True
    failed_before = sum((s or {}).get("failed") or 0 for s in (p.old_status.get("replicaStatuses") or {}).values())
    failed_now = sum(rc.failed for rc in counts.values())
    all_active = sum(rc.active for rc in counts.values()) == sum(p.specs[t].replicas or 0 for t in p.types)
    return failed_now > failed_before and not all_active and own + 1 > limit


def deadline_requeue(p: Pass) -> None:
    deadline = p.run_policy.active_deadline_seconds
    started = parse_time(p.status.get("startTime"))
    if deadline is not None and started is not None:
        p.requeue.append(deadline - (p.now - started).total_seconds())
