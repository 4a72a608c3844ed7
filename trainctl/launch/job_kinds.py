"""Which training job a manifest is, which of its pods speaks for it, and where it stands.

The launcher handles every kind the same way; what differs between kinds (the REST
coordinates, the container that runs the training code, the lead replica whose logs a user
wants to see: the Master, or Worker 0) is the kind's ``trainctl.api.kinds.JobKind``.
"""

from __future__ import annotations

from typing import Any

from trainctl.api import constants as c
from trainctl.api import kinds
from trainctl.api.kinds import JobKind


def kind_of(job: dict[str, Any]) -> JobKind:
    """The job's kind, or ``ValueError`` naming what is supported."""
    found = kinds.of(job)
    if found is None:
        api_version, kind = job.get("apiVersion"), job.get("kind")
        supported = ", ".join(f"{k.api_version} {k.kind}" for k in kinds.KINDS)
        raise ValueError(f"{kind or 'object'} ({api_version or 'no apiVersion'}) is not a training job; supported: {supported}")
    return found


def lead_replica(job: dict[str, Any], kind: JobKind) -> tuple[str, str]:
    """(replica-type label value, replica-index label value) of the pod whose logs we follow.

    Decided from the spec, not from whichever pods exist at the moment, so that the
    follower never switches to Worker 0 while the Master is being recreated.
    """
    specs = (job.get("spec") or {}).get(kind.replica_specs_field) or {}
    return (kind.lead_replica(specs), "0")


def terminal_condition(job: dict[str, Any]) -> dict[str, Any] | None:
    """The Failed or Succeeded condition that is True, Failed first (MSJob can have both)."""
    conditions = [cond for cond in ((job.get("status") or {}).get("conditions") or []) if isinstance(cond, dict)]
    for wanted in (c.CONDITION_FAILED, c.CONDITION_SUCCEEDED):
        for cond in conditions:
            if cond.get("type") == wanted and cond.get("status") == "True":
                return cond
    return None


def current_condition(job: dict[str, Any]) -> dict[str, Any] | None:
    """The condition a user should see now: the terminal one, else the last True one."""
    terminal = terminal_condition(job)
    if terminal is not None:
        return terminal
    conditions = [cond for cond in ((job.get("status") or {}).get("conditions") or []) if isinstance(cond, dict)]
    true = [cond for cond in conditions if cond.get("status") == "True"]
    return true[-1] if true else None
