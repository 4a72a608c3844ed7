"""The job's conditions once its replicas are reconciled: restarts, success and failure.

What the replica step did (the restarts, the types restarted, the pods lost with their
node, a hung job's restart, non-retryable exits) and what the pods show (``ReplicaCounts``) become the job's
status: ``restartCount``, the Restarting conditions, then the kind's own rules
(``Framework.evaluate``) for Running, Succeeded and Failed, the replica statuses and the
completion time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from trainctl.api import constants as c
from trainctl.controller.frameworks.base import ConditionChange, JobFacts, ReplicaCounts
from trainctl.controller.reconcile import job_limits, lifecycle, lost, relaunch, replicas
from trainctl.controller.reconcile.state import Pass


def conclude(
    p: Pass, counts: dict[str, ReplicaCounts], restarts: int, restarted: list[str], lost_pods: lost.LostByType,
    permanent: list[ConditionChange], hung: Optional[ConditionChange] = None,
    disrupted: Optional[dict[str, ConditionChange]] = None,
) -> None:
    """``disrupted``: by replica type, the Restarting condition of a static job restarted
    because a pod was evicted or preempted (``disrupted``)."""
    why = disrupted or {}
    relaunch.record(p)
    if restarts:
        p.status["restartCount"] = (p.status.get("restartCount") or 0) + restarts
    for rtype in restarted:
        p.book.apply(why.get(rtype) or lost.restarting(p, rtype, lost_pods))
    for change in permanent:
        p.book.apply(change)
    facts = JobFacts(
        name=p.name,
        namespace=p.namespace,
        job=p.job,
        counts=counts,
        restarted=frozenset(restarted),
        lead_completed=replicas.lead_completed(p),
        true_conditions=p.book.true_types(),
    )
    for change in p.framework.evaluate(facts):
        if change.type == c.CONDITION_FAILED and p.oom.at_max:
            change = replace(change, message=p.oom.with_cause(change.message))
        p.book.apply(change)
    if not p.done():
        for rtype in lost_pods:  # a lost pod is counted neither up nor failed: say it restarts
            p.book.apply(lost.restarting(p, rtype, lost_pods))
        if hung is not None:  # its pods are still Running: only the condition tells
            p.book.apply(hung)
        for change in why.values():  # nor is a disrupted one
            p.book.apply(change)
    replicas.set_replica_statuses(p, counts)
    if p.done():
        lifecycle.complete(p)
        # The finished path (cleanPodPolicy, the PodGroup, the TTL) runs in the next pass, on
        # the status this one writes; the shell does not see its own status write as a change.
        p.requeue.append(0.0)
    job_limits.deadline_requeue(p)
