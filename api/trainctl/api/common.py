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

from typing import Annotated, Any, Optional, Protocol, TypeVar, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from trainctl.api import constants as c


def _fits(bits: int) -> AfterValidator:
    """Go's intN range, checked without adding bounds to the CRD schema (its format says it)."""
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(value: int) -> int:
        if not low <= value <= high:
            raise PydanticCustomError("int_range", "must be at most {high}", {"high": high, "low": low})
        return value

    return AfterValidator(check)


# Integer widths as Go declares them; the CRD schema carries the format.
Int32 = Annotated[int, Field(json_schema_extra={"format": "int32"}), _fits(32)]
NonNegativeInt32 = Annotated[int, Field(ge=0, json_schema_extra={"format": "int32"}), _fits(32)]
NonNegativeInt64 = Annotated[int, Field(ge=0, json_schema_extra={"format": "int64"}), _fits(64)]
PositiveInt32 = Annotated[int, Field(ge=1, json_schema_extra={"format": "int32"}), _fits(32)]


def _int_or_string(value: Any) -> Union[int, str]:
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return value
    raise PydanticCustomError("int_or_string_type", "Input should be an integer or a string")


# A resource.Quantity: 2, "500m", "4Gi".
Quantity = Annotated[
    Union[int, str],
    PlainValidator(_int_or_string),
    WithJsonSchema(
        {
            "description": "A resource quantity: 2, 500m, 4Gi.",
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }
    ),
]

# A PodTemplateSpec, passed through as a plain dict. The CRD describes only what trainctl
# relies on (containers with names) and preserves the rest; see docs/architecture.md.
PodTemplate = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "type": "object",
            "description": "PodTemplateSpec for the pods of this replica type.",
            "required": ["spec"],
            "properties": {
                "metadata": {
                    "type": "object",
                    "description": "Labels and annotations of the pods (a Pod's ObjectMeta).",
                    "x-kubernetes-preserve-unknown-fields": True,
                },
                "spec": {
                    "type": "object",
                    "description": "The pods' PodSpec; the API server checks it when each pod is created.",
                    "required": ["containers"],
                    "properties": {
                        "containers": {
                            "type": "array",
                            "description": "The pods' containers; one must carry the framework's name (pytorch, mindspore).",
                            "minItems": 1,
                            "items": {
                                "type": "object",
                                "description": "A Container.",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string", "description": "Name of the container."},
                                    "image": {"type": "string", "description": "Container image to run."},
                                },
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        }
                    },
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
            "x-kubernetes-preserve-unknown-fields": True,
        }
    ),
]

# ObjectMeta: the API server owns its schema; a CRD may only say it is an object.
ObjectMeta = Annotated[dict[str, Any], WithJsonSchema({"type": "object"})]

# The enumerations are trainctl/api/constants.py's, the one list of their values.
RestartPolicy = c.RestartPolicy
CleanPodPolicy = c.CleanPodPolicy
ManagedBy = c.ManagedBy


_Model = TypeVar("_Model", bound="WireModel")


class WireModel(BaseModel):
    """Base for every API type: camelCase on the wire, strict types, nothing dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        strict=True,
    )

    @classmethod
    def parse(cls: type[_Model], data: Any) -> _Model:
        """Parse a wire dict (raises ``pydantic.ValidationError`` with locations)."""
        return cls.model_validate(data)

    def dump(self) -> dict[str, Any]:
        """The wire dict: aliases, only the fields that were set."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


class SchedulingPolicy(WireModel):
    """Gang-scheduling knobs (Volcano / scheduler-plugins PodGroup)."""

    min_available: Optional[NonNegativeInt32] = Field(None, description="Minimum number of pods that must be scheduled together.")
    queue: Optional[str] = Field(
        None,
        description="Volcano queue. Immutable.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "spec.runPolicy.schedulingPolicy.queue is immutable"}
            ]
        },
    )
    min_resources: Optional[dict[str, Quantity]] = Field(None, description="Minimum resources of the gang (resource name to quantity).")
    priority_class: Optional[str] = Field(None, description="PriorityClass of the PodGroup.")
    schedule_timeout_seconds: Optional[NonNegativeInt32] = Field(None, description="scheduler-plugins: seconds to wait for the gang.")


class RunPolicy(WireModel):
    """Job-wide policies: clean-up, TTL, deadline, retries, gang scheduling and suspension."""

    # MSJob's copy (kubeflow/common v0.4.1) lacks suspend and managedBy; trainctl/api/crd.py drops
    # them from its schema and trainctl/api/validation.py rejects them.

    clean_pod_policy: Optional[CleanPodPolicy] = Field(None, description="Which pods to delete when the job finishes: All, Running or None.")
    ttl_seconds_after_finished: Optional[NonNegativeInt32] = Field(None, description="Delete the job this many seconds after it finished.")
    active_deadline_seconds: Optional[NonNegativeInt64] = Field(None, description="Fail the job after it has been active this long (from status.startTime).")
    backoff_limit: Optional[NonNegativeInt32] = Field(None, description="Number of retries before the job is marked Failed.")
    scheduling_policy: Optional[SchedulingPolicy] = None
    # PyTorchJob only (MSJob's schema leaves these two out; see trainctl/api/crd.py).
    suspend: Optional[bool] = Field(
        None,
        description="Delete the job's pods and stop it until resumed.",
        json_schema_extra={"default": False},
    )
    managed_by: Optional[ManagedBy] = Field(
        None,
        description="Controller that reconciles this job. Immutable.",
        json_schema_extra={"x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "field is immutable"}]},
    )


class ReplicaSpec(WireModel):
    """One replica type: how many pods, from which template, restarted how."""

    replicas: Optional[Int32] = Field(
        None, description="Number of pods of this replica type. Defaults to 1.", json_schema_extra={"minimum": 0}
    )
    template: Optional[PodTemplate] = None
    restart_policy: Optional[RestartPolicy] = Field(None, description="Always, OnFailure, Never or ExitCode.")


# metav1.Time on the wire: an RFC 3339 string.
Time = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class JobCondition(WireModel):
    """One observation of the job's state; the last one in the list is the job's State."""

    type: str = Field(description="Created, Running, Restarting, Succeeded, Suspended or Failed.")
    status: str = Field(description="True, False or Unknown.")
    reason: Optional[str] = None
    message: Optional[str] = None
    last_update_time: Optional[Time] = None
    last_transition_time: Optional[Time] = None


class ReplicaStatus(WireModel):
    """Pod counts of one replica type; ``selector`` feeds the scale subresource."""

    active: Optional[Int32] = None
    succeeded: Optional[Int32] = None
    failed: Optional[Int32] = None
    selector: Optional[str] = None
    label_selector: Optional[dict[str, Any]] = None


class OOMMemory(WireModel):
    """trainctl: the memory limit one replica runs with after out-of-memory relaunches."""

    memory: Optional[str] = None
    previous: Optional[str] = None
    relaunches: Optional[NonNegativeInt32] = Field(
        None,
        description=(
            "trainctl: how often the replica was relaunched with more memory; counted in restartCount, "
            "not against backoffLimit."
        ),
    )


class NodeCheckOutcome(WireModel):
    """trainctl: how one pod's last node check on a node went (annotation trainctl.io/node-check)."""

    result: Optional[str] = Field(
        None, description="trainctl: passed, straggler (kept), or why the node was tainted: node-check-failed, "
                          "unreachable, straggler.")
    pod_uid: Optional[str] = Field(None, alias="podUID")
    time: Optional[Time] = None
    allgather_seconds: Optional[float] = None
    matmul_seconds: Optional[float] = None
    median_seconds: Optional[float] = None
    error: Optional[str] = None
    replaced: Optional[bool] = Field(
        None, description="trainctl: the pod passed and was recreated with its static job for another pod's failed check.")


class Hang(WireModel):
    """trainctl: one hang the controller found (annotation trainctl.io/hang-timeout)."""

    time: Optional[Time] = None
    pod: Optional[str] = Field(None, description="trainctl: the worker that stopped first (the culprit).")
    rank: Optional[NonNegativeInt32] = None
    node: Optional[str] = None
    stacks: Optional[str] = Field(None, description="trainctl: the ConfigMap holding every worker's Python stacks.")
    replaced: Optional[list[str]] = Field(None, description="trainctl: the uids of the pods restarted for it.")


class JobStatus(WireModel):
    """What the controller observed; written through the status subresource only."""

    conditions: Optional[list[JobCondition]] = None
    replica_statuses: Optional[dict[str, ReplicaStatus]] = None
    start_time: Optional[Time] = None
    completion_time: Optional[Time] = None
    last_reconcile_time: Optional[Time] = None
    restart_count: Optional[NonNegativeInt32] = Field(
        None,
        description=(
            "trainctl: pods the controller deleted and recreated after a failure, over the job's "
            "life. backoffLimit counts these together with the kubelet's in-place restarts."
        ),
    )
    oom_memory: Optional[dict[str, OOMMemory]] = Field(
        None,
        description=(
            "trainctl: per replica (e.g. Worker-1), the memory limit it was relaunched with after "
            "being OOMKilled (annotations trainctl.io/oom-memory-factor and -max), and the one before."
        ),
    )
    node_check: Optional[dict[str, dict[str, NodeCheckOutcome]]] = Field(
        None, description="trainctl: per node and pod, the outcome of the pod's last node check there.")
    hangs: Optional[list[Hang]] = Field(
        None,
        description="trainctl: the latest hangs the controller found (annotation trainctl.io/hang-timeout), oldest first.",
    )


# --- what the generic code reads of any kind's job --------------------------------------------


class JobSpec(Protocol):
    """A kind's spec as code serving every kind sees it."""

    run_policy: Optional[RunPolicy]

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """The spec's replica-type map, whatever the kind calls its field."""
        ...


class Job(Protocol):
    """A parsed training job of any kind (``PyTorchJob``, ``MSJob``, …)."""

    metadata: dict[str, Any]
    status: Optional[JobStatus]

    @property
    def spec(self) -> JobSpec: ...

    def dump(self) -> dict[str, Any]: ...
