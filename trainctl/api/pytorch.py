"""PyTorchJob (kubeflow.org/v1): the wire model, as training-operator v1.9 defines it."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import ConfigDict, Field, JsonValue

from trainctl.api import constants as c
from trainctl.api.common import JobStatus, NonNegativeInt32, ObjectMeta, PositiveInt32, ReplicaSpec, RunPolicy, WireModel

# torchrun's --nproc-per-node: a keyword or a positive integer, written as a string.
NPROC_PATTERN = c.NPROC_PATTERN
Port = Annotated[int, Field(ge=1, le=65535, json_schema_extra={"format": "int32"})]  # le=65535 implies int32


# An autoscaling/v2 MetricSpec, passed to the HPA as written (the API server checks it there).
MetricSpec = Annotated[dict[str, Any], Field(description="An autoscaling/v2 MetricSpec: type, then resource, pods, object or external.")]


class RDZVConf(WireModel):
    """One torchrun --rdzv-conf entry, key=value."""

    key: Optional[str] = Field(None, description="Rendezvous option, e.g. join_timeout or read_timeout.")
    value: Optional[str] = Field(None, description="Its value, as torchrun reads it.")


class ElasticPolicy(WireModel):
    """torchrun's elastic knobs; each becomes a PET_* variable in the pods."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
                    "message": "minReplicas must be less than or equal to maxReplicas",
                }
            ]
        }
    )

    min_replicas: Optional[PositiveInt32] = Field(None, description="Lower bound of Worker replicas (torchrun --nnodes MIN).")
    max_replicas: Optional[PositiveInt32] = Field(None, description="Upper bound of Worker replicas (torchrun --nnodes MAX).")
    rdzv_backend: Optional[c.RdzvBackend] = Field(None, description="c10d, etcd or etcd-v2.")
    rdzv_port: Optional[Port] = Field(
        None, description="Port of the rendezvous endpoint (torchrun --rdzv-endpoint HOST:PORT). Defaults to the Worker's pytorchjob-port."
    )
    rdzv_host: Optional[str] = Field(
        None,
        description=(
            "Host of the rendezvous endpoint. Unset: the c10d store trainctl runs for the job (<job>-rdzv) "
            "or, where it runs none, Worker 0's Service."
        ),
    )
    rdzv_id: Optional[str] = Field(None, description="Rendezvous id shared by the job's agents (torchrun --rdzv-id). Defaults to the job's uid.")
    rdzv_conf: Optional[list[RDZVConf]] = Field(None, description="Extra rendezvous configuration (torchrun --rdzv-conf).")
    standalone: Optional[bool] = Field(None, description="Run a single-node rendezvous on localhost (torchrun --standalone).")
    n_proc_per_node: Optional[PositiveInt32] = Field(None, description="Deprecated: use spec.nprocPerNode.")
    max_restarts: Optional[NonNegativeInt32] = Field(
        None,
        description=(
            "Restarts of the worker group each agent allows before failing (torchrun --max-restarts). trainctl adds "
            "maxReplicas to it, since every member that leaves costs the others one restart."
        ),
    )
    metrics: Optional[list[MetricSpec]] = Field(None, description="autoscaling/v2 MetricSpecs; when set, an HPA is created.")


# The scale subresource writes Worker.replicas, and kube-apiserver applies a CRD's rules to a
# scale write, so these refuse a `kubectl scale` or an HPA that leaves the range (422) before
# the job could see it. Count and bounds as defaulting fills them (trainctl/api/validation.py's
# replica_bounds says the same in Python): replicas 1, a missing bound takes the other's value.
_WORKER, _ELASTIC = "self.pytorchReplicaSpecs.Worker", "self.elasticPolicy"
_COUNT = f"(has({_WORKER}.replicas) ? {_WORKER}.replicas : 1)"
_LOW = f"(has({_ELASTIC}.minReplicas) ? {_ELASTIC}.minReplicas : {_ELASTIC}.maxReplicas)"
_HIGH = f"(has({_ELASTIC}.maxReplicas) ? {_ELASTIC}.maxReplicas : {_ELASTIC}.minReplicas)"
_WORKER_REPLICAS_RULES: list[JsonValue] = [
    {
        "rule": f"!has({_WORKER}) || {_COUNT} >= 1",
        "message": "must be at least 1",
        "fieldPath": ".pytorchReplicaSpecs.Worker.replicas",
    },
    {
        # A count below 1 and a range with min > max are the other rules' to report.
        "rule": (
            f"!has({_ELASTIC}) || !has({_WORKER}) || {_COUNT} < 1 || "
            f"(!has({_ELASTIC}.minReplicas) && !has({_ELASTIC}.maxReplicas)) || {_LOW} > {_HIGH} || "
            f"({_LOW} <= {_COUNT} && {_COUNT} <= {_HIGH})"
        ),
        "message": "must be between elasticPolicy.minReplicas and elasticPolicy.maxReplicas",
        "messageExpression": (
            f"'must be between minReplicas (' + string({_LOW}) + ') and maxReplicas (' + string({_HIGH}) + '), not ' + string({_COUNT})"
        ),
        "fieldPath": ".pytorchReplicaSpecs.Worker.replicas",
    },
]


class PyTorchJobSpec(WireModel):
    """The desired state of a PyTorchJob: its replicas, run policy and elastic policy."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _WORKER_REPLICAS_RULES})

    pytorch_replica_specs: dict[str, ReplicaSpec] = Field(
        description="Master and/or Worker replica specs.",
        json_schema_extra={
            "maxProperties": len(c.PYTORCH_REPLICA_TYPES),
            "x-kubernetes-validations": [
                {"rule": "self.all(k, k == 'Master' || k == 'Worker')", "message": "replica types must be Master or Worker"},
                {
                    "rule": "!has(self.Master) || (has(self.Master.replicas) && self.Master.replicas == 1)",
                    "message": "Master replicas must be 1",
                },
            ],
        },
    )
    # The CRD defaults runPolicy to {} so every stored job has one: the kubeflow-training SDK
    # cannot read a PyTorchJob without it (docs/compatibility.md).
    run_policy: Optional[RunPolicy] = Field(None, json_schema_extra={"default": {}})
    elastic_policy: Optional[ElasticPolicy] = None
    nproc_per_node: Optional[str] = Field(
        None, description="Processes per node: auto, cpu, gpu or an integer.", pattern=NPROC_PATTERN
    )

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.pytorch_replica_specs


class PyTorchJob(WireModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["PyTorchJob"] = "PyTorchJob"
    metadata: ObjectMeta = Field(default_factory=dict)
    spec: PyTorchJobSpec
    status: Optional[JobStatus] = None
