"""The HorizontalPodAutoscaler of a job whose kind asks for one (spec §4).

A PyTorchJob gets one when it is elastic and declares metrics. The HPA scales the job
through its scale subresource (``Worker.replicas``); the reconcile then adds or removes
pods by index. It exists while the job is not suspended.

It is created only once the job's stored status carries the selector the scale subresource
reports (``status.replicaStatuses[Worker].selector``, the CRD's ``labelSelectorPath``): an
HPA that reads a Scale without one can pick no pods, and says so with a ``SelectorRequired``
Warning. The pass that first writes the selector creates the pods; the next one, woken by
that status write, creates the HPA.
"""

from __future__ import annotations

from typing import Any, Optional

from trainctl.controller.frameworks.base import Autoscaling, Framework
from trainctl.controller.reconcile.children import JobRef, typed_ref
from trainctl.controller.reconcile.state import Pass

HPA_API_VERSION = "autoscaling/v2"
HPA_KIND = "HorizontalPodAutoscaler"


def desired_hpa(scaling: Autoscaling, *, job_ref: JobRef) -> dict[str, Any]:
    """The HPA, named after the job, scaling the job through its scale subresource."""
    owner = job_ref.owner
    return {
        "apiVersion": HPA_API_VERSION,
        "kind": HPA_KIND,
        "metadata": job_ref.child_metadata(job_ref.name),
        "spec": {
            "scaleTargetRef": {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": job_ref.name},
            "minReplicas": scaling.min_replicas,
            "maxReplicas": scaling.max_replicas,
            "metrics": scaling.metrics,
        },
    }


def scale_selector_published(framework: Framework[Any], job_name: str, replica_types: Any, status: dict[str, Any]) -> bool:
    """Whether ``status`` (as stored) holds the selector the job's scale subresource reports."""
    rtype = framework.job_kind.scale_replica_type
    if rtype is None or rtype not in replica_types:
        return True  # no Scale selector to wait for
    expected = framework.scale_selector(job_name, rtype)
    stored = ((status.get("replicaStatuses") or {}).get(rtype) or {}).get("selector")
    return expected is None or stored == expected


def _differs(desired: dict[str, Any], observed: dict[str, Any]) -> bool:
    """Whether any field we set differs; fields the API server defaults are ignored."""
    return any(observed.get(key) != value for key, value in desired.items())


def hpa_update(desired: dict[str, Any], observed: dict[str, Any]) -> Optional[dict[str, Any]]:
    if not _differs(desired["spec"], observed.get("spec") or {}):
        return None
    return {**observed, "spec": {**(observed.get("spec") or {}), **desired["spec"]}}


# How soon to look again for the scale selector this pass writes (a status that only moves
# replica counts may be held for the status batch period, so not at once).
_SELECTOR_REQUEUE_SECONDS = 1.0


def reconcile(p: Pass, suspended: bool) -> None:
    """Create, update or delete the job's HPA: it exists while the job is not suspended."""
    scaling = p.framework.autoscaling(p.job)
    desired = None if scaling is None else desired_hpa(scaling, job_ref=p.job_ref)
    current = p.observed.hpa
    if current is None:
        if desired is not None and not suspended:
            if scale_selector_published(p.framework, p.name, p.specs, p.old_status):
                p.plan.creates.append(desired)
            else:  # this pass writes the selector; the HPA follows once it is stored
                p.requeue.append(_SELECTOR_REQUEUE_SECONDS)
    elif desired is None or suspended:
        p.plan.deletes.append(typed_ref(current, HPA_KIND, HPA_API_VERSION))
    else:
        update = hpa_update(desired, current)
        if update is not None:
            p.plan.updates.append(update)
