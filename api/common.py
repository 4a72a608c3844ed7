"""Types shared by every Kubeflow-style job: replica specs, run policy, status.

These are the wire shapes of kubeflow.org/v1 `common_types.go` (and kubeflow/common v0.4.1
for MSJob), written as pydantic models so one definition gives parsing with field paths,
JSON with the exact camelCase names, and the CRD's OpenAPI schema. Pod templates are plain
dicts: trainctl passes them through and never re-models Kubernetes' PodSpec.

Round-trip promise: for valid input, ``Model.parse(x).dump() == x``. Unset fields stay
unset (``exclude_unset``), unknown fields are kept (``extra="allow"``), and types are
strict so that a string where an integer belongs is an error, not a silent conversion.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """Base for every API type: camelCase on the wire, strict types, nothing dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        strict=True,
    )

    @classmethod
    def parse(cls, data: Any):
        """Parse a wire dict (raises ``pydantic.ValidationError`` with locations)."""
        return cls.model_validate(data)

    def dump(self) -> dict[str, Any]:
        """The wire dict: aliases, only the fields that were set."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class SchedulingPolicy(WireModel):
    """Gang-scheduling knobs (Volcano / scheduler-plugins PodGroup)."""

    min_available: Optional[int] = Field(None, description="Minimum number of pods that must be scheduled together.")
    queue: Optional[str] = Field(None, description="Volcano queue. Immutable.")
    min_resources: Optional[dict[str, Any]] = Field(None, description="Minimum resources of the gang (resource name to quantity).")
    priority_class: Optional[str] = Field(None, description="PriorityClass of the PodGroup.")
    schedule_timeout_seconds: Optional[int] = Field(None, description="scheduler-plugins: seconds to wait for the gang.")


class RunPolicy(WireModel):
    """Job-wide policies. MSJob's kubeflow/common v0.4.1 copy lacks suspend and managedBy."""

    clean_pod_policy: Optional[str] = Field(None, description="Which pods to delete when the job finishes: All, Running or None.")
    ttl_seconds_after_finished: Optional[int] = Field(None, description="Delete the job this many seconds after it finished.")
    active_deadline_seconds: Optional[int] = Field(None, description="Fail the job after it has been active this long (from status.startTime).")
    backoff_limit: Optional[int] = Field(None, description="Number of retries before the job is marked Failed.")
    scheduling_policy: Optional[SchedulingPolicy] = None
    suspend: Optional[bool] = Field(None, description="Delete the job's pods and stop it until resumed.")
    managed_by: Optional[str] = Field(None, description="Controller that reconciles this job.")


class ReplicaSpec(WireModel):
    """One replica type: how many pods, from which template, restarted how."""

    replicas: Optional[int] = Field(None, description="Number of pods of this replica type. Defaults to 1.")
    template: Optional[dict[str, Any]] = Field(None, description="PodTemplateSpec for the pods of this replica type.")
    restart_policy: Optional[str] = Field(None, description="Always, OnFailure, Never or ExitCode.")


class JobCondition(WireModel):
    type: str
    status: str
    reason: Optional[str] = None
    message: Optional[str] = None
    last_update_time: Optional[str] = None
    last_transition_time: Optional[str] = None


class ReplicaStatus(WireModel):
    active: Optional[int] = None
    succeeded: Optional[int] = None
    failed: Optional[int] = None
    selector: Optional[str] = None
    label_selector: Optional[dict[str, Any]] = None


class JobStatus(WireModel):
    conditions: Optional[list[JobCondition]] = None
    replica_statuses: Optional[dict[str, ReplicaStatus]] = None
    start_time: Optional[str] = None
    completion_time: Optional[str] = None
    last_reconcile_time: Optional[str] = None
