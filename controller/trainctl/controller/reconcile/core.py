"""The reconcile function: one job, what the cluster holds for it, the time → a Plan.

This is the whole decision-making of the controller, as a pure function: it parses and
validates the job once (a started job whose only problem is its scaled replica count keeps
its size: ``scale``) and defaults the parsed model in memory, then walks the reference
controller's algorithm (kubeflow-pytorchjob.md §5.1, msjob-mindspore.md §2.2) in a fixed
order: the replica limit; the HPA; the PodDisruptionBudget; the finished path (clean-up, TTL); the suspended path;
limits (backoffLimit, deadline); the PodGroup; the rendezvous store; per replica type the
Services and the pods by index, at most ``max_creates_per_pass`` of each; then the job's
conditions. Each step lives in the module of its feature and works on the pass's shared
``state.Pass``; this module only runs them in that order.
It reads no clock and does no I/O, so every policy is a table of plain dicts in the tests.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from trainctl.api import constants as c
from trainctl.api.defaults import default_job
from trainctl.api.validation import check
from trainctl.controller.frameworks import framework_for
from trainctl.controller.reconcile import (
    budget,
    disrupted,
    gang,
    hang,
    hpa,
    job_limits,
    lifecycle,
    lost,
    node_health,
    outcome,
    relaunch,
    rendezvous,
    replicas,
)
from trainctl.controller.reconcile.children import rfc3339
from trainctl.controller.reconcile.conditions import TRUE, ConditionBook, find
from trainctl.controller.reconcile.config import ReconcileConfig
from trainctl.controller.reconcile.plan import Observed, Plan
from trainctl.controller.reconcile.scale import kept_size
from trainctl.controller.reconcile.state import Pass

_DEFAULT_CONFIG = ReconcileConfig()


def reconcile(job: dict[str, Any], observed: Observed, now: datetime, config: ReconcileConfig = _DEFAULT_CONFIG) -> Plan:
    """Decide what to do for ``job``; see docs/architecture.md for the contract."""
    framework = framework_for(job.get("kind", ""))
    meta = job.get("metadata") or {}
    plan = Plan()
    if meta.get("deletionTimestamp"):
        return plan  # garbage collection removes the children
    spec = job.get("spec")
    run_policy = spec.get("runPolicy") if isinstance(spec, dict) else None
    if isinstance(run_policy, dict) and run_policy.get("managedBy") not in (None, c.MANAGED_BY_TRAINING_OPERATOR):
        return plan  # another controller (e.g. Kueue's MultiKueue) owns this job
    stored = job.get("status")
    status: dict[str, Any] = stored if isinstance(stored, dict) else {}
    book = ConditionBook(status.get("conditions"), rfc3339(now))

    parsed, problems = check(job)
    kept = kept_size(framework.job_kind, job, problems, observed) if parsed is not None and problems else None
    if parsed is None or (problems and kept is None):
        message = "; ".join(map(str, problems))
        book.set(c.CONDITION_FAILED, TRUE, framework.reason("FailedValidation"), message, "Warning")
        plan.events, _ = book.changes()
        new_status = {**status, "conditions": book.conditions}
        if new_status != status:
            plan.status = new_status
        return plan

    defaulted = default_job(parsed, in_place=True)
    if kept is not None:
        defaulted.spec.replica_specs[kept.replica_type].replicas = kept.replicas
    one_pass = Pass(framework, job, defaulted, observed, now, config, book, plan)
    if kept is not None:
        one_pass.warnings[kept.event.reason] = kept.event
    lost.find_lost_pods(one_pass)
    disrupted.find_disrupted(one_pass)
    relaunch.find_oom_killed(one_pass)
    node_health.find_reports(one_pass)
    _run(one_pass)
    return plan


def _run(p: Pass) -> None:
    """The steps of a pass, in the reference's order; the active path is ``_active``."""
    fw = p.framework
    if find(p.book.conditions, c.CONDITION_CREATED) is None:
        p.book.set(c.CONDITION_CREATED, TRUE, fw.reason("Created"), f"{fw.kind} {p.name} is created.", None)
    too_many = job_limits.replica_limit_exceeded(p)
    if too_many is not None:
        p.book.set(c.CONDITION_FAILED, TRUE, fw.reason("ReplicaLimitExceeded"), too_many, "Warning")
    suspended = bool(p.run_policy.suspend)
    hpa.reconcile(p, suspended)
    done = p.done()
    budget.reconcile(p, running=not (suspended or done))
    if done:  # nothing is replaced any more
        lost.forget_lost_pods(p)
        p.problems = []  # nor do the settings that decide replacements matter
    lost.force_delete_stuck_pods(p)
    lost.force_delete_lost_pods(p)
    if done:
        lifecycle.finished(p)
    elif suspended:
        lifecycle.suspend(p)
    else:
        _active(p)
    _finish(p)


def _active(p: Pass) -> None:
    """Limits, the PodGroup, the rendezvous store, lost and disrupted pods, the replicas, then the outcome."""
    lifecycle.start(p)
    counts = {rtype: replicas.count(p, rtype) for rtype in p.types}
    failure = job_limits.limit_failure(p, counts)
    if failure is None and p.oom.cannot_fit:
        failure = f"Job {p.name} has failed: " + "; ".join(p.oom.cannot_fit)
    elif failure is not None:
        failure = p.oom.with_cause(failure)
    if failure is not None:
        replicas.set_replica_statuses(p, counts)
        lifecycle.fail(p, p.framework.limit_failure_reason, failure)
        return
    may_create_pods = gang.reconcile(p)
    ctx = replicas.env_context(p)
    if p.store is not None and may_create_pods:
        # Agents start only once the store's Service exists, so its name resolves for them.
        may_create_pods = rendezvous.reconcile_store(p, p.store)
    # A non-retryable exit fails the job in this pass, so nothing is restarted or created:
    # a peer that left with a retryable code at the same moment would otherwise be
    # deleted (losing its status and log) only for the job to fail anyway.
    node_health.act(p)
    permanent = replicas.exit_code_failures(p)
    restarts, lost_pods = (0, {}) if permanent else lost.restart_for_lost_pods(p)
    # A hung job is judged only when nothing else is being replaced: the hang may be theirs.
    hang_restarts, hang_restarting = (0, None) if permanent or lost_pods else hang.reconcile(p)
    if p.done():  # its restarts would reach backoffLimit
        replicas.set_replica_statuses(p, counts)
        return
    taken, why = (0, {}) if permanent else disrupted.restart_for_disrupted(p)
    restarted = list(lost_pods) + [rtype for rtype in why if rtype not in lost_pods]
    more, types = replicas.reconcile_all(p, ctx if may_create_pods and not permanent else None, restart=not permanent)
    restarted += [rtype for rtype in types if rtype not in restarted]
    outcome.conclude(p, counts, restarts + hang_restarts + taken + more, restarted, lost_pods, permanent, hang_restarting, why)
    if p.store is not None and p.done():
        rendezvous.withhold_store(p)


def _finish(p: Pass) -> None:
    """Hand the status, the events, the metrics, the problems and the requeue to the plan."""
    p.status["conditions"] = p.book.conditions
    order = ("conditions", "replicaStatuses", "startTime", "completionTime", "lastReconcileTime", "restartCount")
    p.status = {**{k: p.status[k] for k in order if k in p.status}, **p.status}
    events, metrics = p.book.changes()
    p.plan.events = events + p.plan.events + list(p.warnings.values())
    p.plan.metrics = metrics + p.plan.metrics
    p.plan.problems = p.problems
    if p.status != p.old_status:
        p.plan.status = p.status
    if p.requeue:
        p.plan.requeue_after = max(0.0, min(p.requeue))
