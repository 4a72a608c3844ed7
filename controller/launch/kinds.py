"""Which training job a manifest is, and which of its pods speaks for it.

The launcher handles PyTorchJob and MSJob the same way; this module holds the few facts
that differ between them: the REST coordinates, the container that runs the training
code, and the lead pod whose logs a user wants to see (the Master, or Worker 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainctl.api import constants as c
from trainctl.controller.kube.resources import Resource, resource_for


@dataclass(frozen=True)
class JobKind:
    kind: str
    group: str
    version: str
    plural: str
    container: str
    replica_specs_field: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def resource(self) -> Resource:
        return resource_for(self.api_version, self.kind)


PYTORCHJOB = JobKind(
    c.PYTORCHJOB_KIND, c.KUBEFLOW_GROUP, c.KUBEFLOW_VERSION, c.PYTORCHJOB_PLURAL, c.PYTORCH_CONTAINER, "pytorchReplicaSpecs"
)
MSJOB = JobKind(
    c.MSJOB_KIND, c.MINDSPORE_GROUP, c.MINDSPORE_VERSION, c.MSJOB_PLURAL, c.MINDSPORE_CONTAINER, "msReplicaSpecs"
)
JOB_KINDS: dict[tuple[str, str], JobKind] = {(k.api_version, k.kind): k for k in (PYTORCHJOB, MSJOB)}


def kind_of(job: dict[str, Any]) -> JobKind:
    """The job's kind, or ``ValueError`` naming what is supported."""
    key = (job.get("apiVersion"), job.get("kind"))
    try:
        return JOB_KINDS[key]  # type: ignore[index]
    except KeyError:
        supported = ", ".join(f"{k.api_version} {k.kind}" for k in JOB_KINDS.values())
        raise ValueError(f"{key[1] or 'object'} ({key[0] or 'no apiVersion'}) is not a training job; supported: {supported}") from None


def lead_replica(job: dict[str, Any], kind: JobKind) -> tuple[str, str]:
    """(replica-type label value, replica-index label value) of the pod whose logs we follow.

    Decided from the spec, not from whichever pods exist at the moment, so that the
    follower never switches to Worker 0 while the Master is being recreated.
    """
    specs = (job.get("spec") or {}).get(kind.replica_specs_field) or {}
    if kind is PYTORCHJOB and any(str(name).lower() == "master" for name in specs):
        return ("master", "0")
    return ("worker", "0")


def is_finished(job: dict[str, Any]) -> bool:
    return terminal_condition(job) is not None


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
