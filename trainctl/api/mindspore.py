"""MSJob (mindspore.gitee.com/v1): the wire model, as MindSpore's ms-operator defines it."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from trainctl.api import constants as c
from trainctl.api.common import JobStatus, ObjectMeta, ReplicaSpec, RunPolicy, WireModel


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
