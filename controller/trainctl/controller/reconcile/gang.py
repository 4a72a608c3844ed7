"""Gang scheduling: the job's PodGroup for Volcano or the scheduler-plugins coscheduler.

A gang scheduler places a job's pods all together or not at all; it learns the gang's size
and resources from a PodGroup named after the job (spec §6). The PodGroup is written only
when its spec changes (the reference rewrites it on every reconcile) and, with Volcano, pods
are created only once the PodGroup has been admitted (phase Inqueue or Running).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Optional

from trainctl.api.common import Job
from trainctl.api.quantity import parse_quantity
from trainctl.controller.frameworks.base import Framework
from trainctl.controller.reconcile.children import JobRef, typed_ref
from trainctl.controller.reconcile.config import VOLCANO
from trainctl.controller.reconcile.plan import Event
from trainctl.controller.reconcile.state import Pass

VOLCANO_API_VERSION = "scheduling.volcano.sh/v1beta1"
SCHEDULER_PLUGINS_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
PODGROUP_KIND = "PodGroup"
_NOT_ADMITTED = ("", "Pending")


def min_member(framework: Framework[Any], job: Job) -> int:
    """``minAvailable``, else every replica the kind counts in its gang."""
    policy = job.spec.run_policy.scheduling_policy if job.spec.run_policy else None
    if policy is not None and policy.min_available is not None:
        return policy.min_available
    return sum(framework.gang_replicas(job, rtype) for rtype in job.spec.replica_specs)


def _format_quantity(value: Decimal) -> str:
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    return f"{int(milli)}m" if milli == milli.to_integral_value() else str(value)


def min_resources(framework: Framework[Any], job: Job, members: int) -> dict[str, str]:
    """What the first ``members`` pods request, in replica-type order (spec §6).

    The reference orders replica types by their PriorityClass value, which needs a lookup
    the pure core cannot make; trainctl uses the kind's replica order instead.
    """
    totals: dict[str, Decimal] = {}
    for rtype in framework.ordered_types(job):
        if members <= 0:
            break
        spec = job.spec.replica_specs[rtype]
        count = min(spec.replicas or 0, members)
        members -= count
        for container in ((spec.template or {}).get("spec") or {}).get("containers") or []:
            resources = container.get("resources") or {}
            for name, quantity in (resources.get("requests") or resources.get("limits") or {}).items():
                try:
                    totals[name] = totals.get(name, Decimal(0)) + parse_quantity(quantity) * count
                except ValueError:
                    continue  # the API server rejects the pod; nothing to add here
    return {name: _format_quantity(value) for name, value in sorted(totals.items())}


def desired_pod_group(
    framework: Framework[Any], job: Job, *, job_ref: JobRef, gang: str, annotations: dict[str, Any],
    observed: Optional[dict[str, Any]],
) -> dict[str, Any]:
    policy = job.spec.run_policy.scheduling_policy if job.spec.run_policy else None
    members = min_member(framework, job)
    resources = policy.min_resources if policy is not None and policy.min_resources is not None else min_resources(
        framework, job, members
    )
    spec: dict[str, Any] = {"minMember": members}
    if gang == VOLCANO:
        api_version = VOLCANO_API_VERSION
        observed_queue = ((observed or {}).get("spec") or {}).get("queue")
        queue = observed_queue or (policy.queue if policy is not None and policy.queue else framework.volcano_default_queue)
        if queue:
            spec["queue"] = queue
        if policy is not None and policy.priority_class:
            spec["priorityClassName"] = policy.priority_class
        if resources:
            spec["minResources"] = resources
    else:
        api_version = SCHEDULER_PLUGINS_API_VERSION
        if resources:
            spec["minResources"] = resources
        if policy is not None and policy.schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = policy.schedule_timeout_seconds
    extra = {"annotations": dict(annotations)} if annotations else {}
    metadata = job_ref.child_metadata(job_ref.name, **extra)
    return {"apiVersion": api_version, "kind": PODGROUP_KIND, "metadata": metadata, "spec": spec}


def pod_group_update(desired: dict[str, Any], observed: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The PUT body when the observed PodGroup's spec differs, else None."""
    if observed.get("spec") == desired["spec"]:
        return None
    return {**observed, "spec": desired["spec"]}


def admitted(gang: str, observed: Optional[dict[str, Any]]) -> bool:
    """Whether pods may be created: Volcano must have moved the PodGroup past Pending."""
    if gang != VOLCANO:
        return True
    if observed is None:
        return False
    return ((observed.get("status") or {}).get("phase") or "") not in _NOT_ADMITTED


def reconcile(p: Pass) -> bool:
    """Create or update the PodGroup; whether pods may be created now."""
    if not p.gang:
        return True
    current = p.observed.pod_group
    desired = desired_pod_group(p.framework, p.job, job_ref=p.job_ref, gang=p.gang, annotations=p.annotations, observed=current)
    if current is None:
        p.plan.creates.append(desired)
    else:
        update = pod_group_update(desired, current)
        if update is not None:
            p.plan.updates.append(update)
    if admitted(p.gang, current):
        return True
    p.requeue.append(p.config.podgroup_poll_seconds)
    return False


def delete(p: Pass) -> None:
    if p.gang and p.observed.pod_group is not None:
        api_version = VOLCANO_API_VERSION if p.gang == VOLCANO else SCHEDULER_PLUGINS_API_VERSION
        p.plan.deletes.append(typed_ref(p.observed.pod_group, PODGROUP_KIND, api_version))
        p.warnings.setdefault("JobTerminated", Event("Normal", "JobTerminated", "Job has been terminated. Deleting PodGroup"))
