"""PyTorchJob (kubeflow.org/v1): the wire model, as training-operator v1.9 defines it."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import ConfigDict, Field

from trainctl.api import constants as c
from trainctl.api.common import JobStatus, NonNegativeInt32, ObjectMeta, PositiveInt32, ReplicaSpec, RunPolicy, WireModel

# torchrun's --nproc-per-node: a keyword or a positive integer, written as a string.
NPROC_PATTERN = c.NPROC_PATTERN
Port = Annotated[int, Field(ge=1, le=65535, json_schema_extra={"format": "int32"})]  # le=65535 implies int32


class RDZVConf(WireModel):
    key: Optional[str] = None
    value: Optional[str] = None


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
    rdzv_port: Optional[Port] = None
    rdzv_host: Optional[str] = None
    rdzv_id: Optional[str] = None
    rdzv_conf: Optional[list[RDZVConf]] = Field(None, description="Extra rendezvous configuration (torchrun --rdzv-conf).")
    standalone: Optional[bool] = None
    n_proc_per_node: Optional[PositiveInt32] = Field(None, description="Deprecated: use spec.nprocPerNode.")
    max_restarts: Optional[NonNegativeInt32] = None
    metrics: Optional[list[dict[str, Any]]] = Field(None, description="autoscaling/v2 MetricSpecs; when set, an HPA is created.")


class PyTorchJobSpec(WireModel):
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
