"""A replica count the spec no longer allows, met after the job started: the job keeps its size.

The CRD's rules refuse a ``kubectl scale`` or an HPA write outside the scaled replica type's
bounds (PyTorchJob: Worker at least 1 and within ``elasticPolicy``'s range), but a running job
can still come to hold such a count: an API server with an older CRD, a write that bypassed
the rules, an ``elasticPolicy`` narrowed under the job. Its pods run on, so failing the job
for a number would throw away a healthy run. Instead the job keeps the size it runs at,
brought within the bounds, and a Warning event says what was ignored. Only this problem is
survivable: anything else wrong with the spec still fails the job, as does this one before
the job ever started (``status.startTime``).

The size comes from what is observed, never from memory the core does not have: how many
indices hold a pod or a Service that is not being deleted (a Service outlives its pod's
restarts, so an index between restarts still counts; an elastic job's indices may have holes). With
nothing observed, the asked-for count is brought within the bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from trainctl.api.errors import FieldError
from trainctl.api.kinds import JobKind
from trainctl.api.validation import replica_bounds, scaled_replicas_path
from trainctl.controller.reconcile.children import ChildIndex, is_terminating
from trainctl.controller.reconcile.plan import Event, Observed

REASON = "InvalidReplicas"


@dataclass(frozen=True)
class KeptSize:
    """The count the scaled replica type keeps instead of the spec's, and the Warning saying so."""

    replica_type: str
    replicas: int
    event: Event


def kept_size(kind: JobKind, job: dict[str, Any], problems: list[FieldError], observed: Observed) -> Optional[KeptSize]:
    """The size a started job keeps when its only problems are its scaled count; None otherwise."""
    path, bounds, rtype = scaled_replicas_path(kind), replica_bounds(job), kind.scale_replica_type
    if path is None or rtype is None or bounds is None or not problems:
        return None
    if any(problem.path != path or problem.type not in ("Invalid", "Forbidden") for problem in problems):
        return None
    status = job.get("status")
    if not isinstance(status, dict) or not status.get("startTime"):
        return None  # never started: an invalid count fails the job as any other problem does
    size = _observed_size(rtype, observed)
    if size is None:
        size = _asked(job, kind, rtype)
    low, high = bounds
    size = max(low, size if high is None else min(size, high))
    said = "; ".join(map(str, problems))
    return KeptSize(rtype, size, Event("Warning", REASON, f"{said}; the job keeps {size} {rtype} replicas"))


def _observed_size(rtype: str, observed: Observed) -> Optional[int]:
    indices = {
        index
        for index_of in (ChildIndex(observed.pods), ChildIndex(observed.services))
        for index, obj in index_of.slots(rtype).items()
        if not is_terminating(obj)
    }
    return len(indices) if indices else None


def _asked(job: dict[str, Any], kind: JobKind, rtype: str) -> int:
    spec = job.get("spec") or {}
    replicas = ((spec.get(kind.replica_specs_field) or {}).get(rtype) or {}).get("replicas")
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
