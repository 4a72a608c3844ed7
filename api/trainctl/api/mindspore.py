"""MSJob (mindspore.gitee.com/v1), as MindSpore's ms-operator defines it: the kind in one place.

Its wire model, its defaulting (ms-operator's ``SetDefaults_MSJob``), its rules (ms-operator
only logs its validation; trainctl enforces it and closes its gaps, see
docs/compatibility.md), the layout a pipeline step gives it, and its descriptor ``MSJOB``,
which ``trainctl.api.kinds`` registers.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from trainctl.api import constants as c
from trainctl.api.common import JobStatus, ObjectMeta, ReplicaSpec, RunPolicy, WireModel
from trainctl.api.errors import FieldError, show, supported
from trainctl.api.jobkind import JobKind, MakeReplica, Parameters
from trainctl.api.replicas import default_replicas, default_run_policy
from trainctl.api.rules import dict_at, int_or_none, validate_template

SCHEDULER = "Scheduler"
PS = "PS"
WORKER = "Worker"


class MSJobSpec(WireModel):
    """The desired state of an MSJob: its replicas, run policy and success policy."""

    run_policy: Optional[RunPolicy] = None
    success_policy: Optional[c.MSSuccessPolicy] = Field(
        None, description='"" (worker 0 or all workers succeeded) or "AllWorkers".'
    )
    ms_replica_specs: dict[str, ReplicaSpec] = Field(
        description="Scheduler, PS and Worker replica specs.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.Scheduler) || !has(self.Scheduler.replicas) || self.Scheduler.replicas == 1",
                    "message": "Scheduler replicas must be 1",
                }
            ]
        },
    )
    enable_dynamic_worker: Optional[bool] = Field(None, description="Failed Worker pods do not fail the job.")

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.ms_replica_specs


class MSJob(WireModel):
    api_version: Literal["mindspore.gitee.com/v1"] = "mindspore.gitee.com/v1"
    kind: Literal["MSJob"] = "MSJob"
    metadata: ObjectMeta = Field(default_factory=dict)
    spec: MSJobSpec
    status: Optional[JobStatus] = None


# --- defaulting -----------------------------------------------------------------------------


def default_msjob(job: MSJob) -> MSJob:
    spec = job.spec
    spec.run_policy = default_run_policy(spec.run_policy, c.MINDSPORE_DEFAULT_CLEAN_POD_POLICY)
    if spec.success_policy is None:
        spec.success_policy = ""
    spec.ms_replica_specs = default_replicas(spec.ms_replica_specs, MSJOB)
    return job


# --- validation -----------------------------------------------------------------------------


def validate_msjob(obj: dict[str, Any]) -> list[FieldError]:
    """Scheduler, PS and Worker; one Scheduler, needed with a PS or several Workers; Workers required."""
    spec = dict_at(obj, "spec")
    specs = dict_at(spec, MSJOB.replica_specs_field)
    errors: list[FieldError] = []

    # ms-operator folds keys to their canonical spelling (worker → Worker); two keys that fold
    # to the same type would be one replica type twice.
    canonical = {name.lower(): name for name in c.MINDSPORE_REPLICA_TYPES}
    present: set[str] = set()
    by_type: dict[str, dict[str, Any]] = {}
    for key, rspec in specs.items():
        path = MSJOB.replica_path(key)
        rtype = canonical.get(key.lower()) if isinstance(key, str) else None
        if rtype is None:
            errors.append(FieldError(path, "NotSupported", f"unsupported replica type {show(key)}; {supported(c.MINDSPORE_REPLICA_TYPES)}"))
            continue
        if rtype in present:
            errors.append(FieldError(path, "Duplicate", f"replica type {rtype} is already specified"))
            continue
        present.add(rtype)
        if not isinstance(rspec, dict):
            continue  # parsing reported it
        by_type[rtype] = rspec
        errors += validate_template(path, rspec, c.MINDSPORE_CONTAINER)
        replicas = int_or_none(rspec.get("replicas"))
        if replicas is None:
            continue
        if rtype == SCHEDULER and replicas != 1:
            errors.append(FieldError(f"{path}.replicas", "Invalid", f"must be 1, not {replicas}: a job has exactly one Scheduler"))
        elif rtype == WORKER and replicas < 1:
            errors.append(FieldError(f"{path}.replicas", "Forbidden", "must be at least 1"))
        elif replicas < 0:
            errors.append(FieldError(f"{path}.replicas", "Invalid", f"must be greater than or equal to 0, not {replicas}"))

    if not specs:
        return errors  # a missing map was reported by parsing
    worker = by_type.get(WORKER)
    if WORKER not in present:
        errors.append(FieldError(MSJOB.replica_path(WORKER), "Required", "must be configured: an MSJob succeeds when its workers do"))
    worker_count = int_or_none((worker or {}).get("replicas"))
    worker_count = 1 if worker_count is None else worker_count
    if SCHEDULER not in present and (PS in present or worker_count > 1):
        errors.append(
            FieldError(
                MSJOB.replica_path(SCHEDULER),
                "Required",
                "must be configured when there is a PS or more than one Worker",
            )
        )
    return errors


# --- a pipeline step's job ------------------------------------------------------------------


def layout_msjob(p: Parameters, replica: MakeReplica) -> dict[str, Any]:
    """``replicas`` Workers, plus the one Scheduler (no accelerators) MindSpore needs for several."""
    specs: dict[str, Any] = {}
    if p.replicas > 1:
        specs[SCHEDULER] = replica(1, False)
    specs[WORKER] = replica(p.replicas, True)
    return {"runPolicy": {"cleanPodPolicy": c.MINDSPORE_DEFAULT_CLEAN_POD_POLICY}, MSJOB.replica_specs_field: specs}


MSJOB = JobKind(
    kind=c.MSJOB_KIND,
    group=c.MINDSPORE_GROUP,
    version=c.MINDSPORE_VERSION,
    plural=c.MSJOB_PLURAL,
    singular=c.MSJOB_SINGULAR,
    model=MSJob,
    replica_specs_field="msReplicaSpecs",
    replica_types=c.MINDSPORE_REPLICA_TYPES,
    container=c.MINDSPORE_CONTAINER,
    port_name=c.MINDSPORE_PORT_NAME,
    default_port=c.MINDSPORE_DEFAULT_PORT,
    default_restart_policy=c.MINDSPORE_DEFAULT_RESTART_POLICY,
    controller_name=c.MINDSPORE_CONTROLLER_NAME,
    framework=c.MINDSPORE_FRAMEWORK,
    lead_replica_types=(WORKER,),
    defaulter=default_msjob,
    validator=validate_msjob,
    layout=layout_msjob,
    description="MSJob represents a distributed MindSpore training job.",
    # ms-operator's RunPolicy is kubeflow/common v0.4.1's, which predates these fields.
    unsupported_run_policy=("suspend", "managedBy"),
)
