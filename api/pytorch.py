"""PyTorchJob (kubeflow.org/v1): the wire model, as training-operator v1.9 defines it."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from api.common import JobStatus, ReplicaSpec, RunPolicy, WireModel


class RDZVConf(WireModel):
    key: Optional[str] = None
    value: Optional[str] = None


class ElasticPolicy(WireModel):
    """torchrun's elastic knobs; each becomes a PET_* variable in the pods."""

    min_replicas: Optional[int] = Field(None, description="Lower bound of Worker replicas (torchrun --nnodes MIN).")
    max_replicas: Optional[int] = Field(None, description="Upper bound of Worker replicas (torchrun --nnodes MAX).")
    rdzv_backend: Optional[str] = Field(None, description="c10d, etcd or etcd-v2.")
    rdzv_port: Optional[int] = None
    rdzv_host: Optional[str] = None
    rdzv_id: Optional[str] = None
    rdzv_conf: Optional[list[RDZVConf]] = Field(None, description="Extra rendezvous configuration (torchrun --rdzv-conf).")
    standalone: Optional[bool] = None
    n_proc_per_node: Optional[int] = Field(None, description="Deprecated: use spec.nprocPerNode.")
    max_restarts: Optional[int] = None
    metrics: Optional[list[dict[str, Any]]] = Field(None, description="autoscaling/v2 MetricSpecs; when set, an HPA is created.")


class PyTorchJobSpec(WireModel):
    pytorch_replica_specs: dict[str, ReplicaSpec] = Field(description="Master and/or Worker replica specs.")
    run_policy: Optional[RunPolicy] = None
    elastic_policy: Optional[ElasticPolicy] = None
    nproc_per_node: Optional[str] = Field(None, description="Processes per node: auto, cpu, gpu or an integer.")

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.pytorch_replica_specs


class PyTorchJob(WireModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["PyTorchJob"] = "PyTorchJob"
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: PyTorchJobSpec
    status: Optional[JobStatus] = None
