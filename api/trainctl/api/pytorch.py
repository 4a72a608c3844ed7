"""PyTorchJob (kubeflow.org/v1), as training-operator v1.9 defines it: the kind in one place.

Its wire model, its defaulting (training-operator's ``SetDefaults_PyTorchJob``), the rules
of its validating webhook, the layout a pipeline step gives it, and its descriptor
``PYTORCHJOB``, which ``trainctl.api.kinds`` registers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import ConfigDict, Field, JsonValue

from trainctl.api import constants as c
from trainctl.api.common import JobStatus, NonNegativeInt32, ObjectMeta, PositiveInt32, ReplicaSpec, RunPolicy, WireModel
from trainctl.api.errors import FieldError, show, supported
from trainctl.api.jobkind import JobKind, MakeReplica, Parameters
from trainctl.api.replicas import default_replicas, default_run_policy
from trainctl.api.rules import dict_at, int_or_none, validate_template

MASTER = "Master"
WORKER = "Worker"

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


# --- defaulting -----------------------------------------------------------------------------


def default_pytorchjob(job: PyTorchJob) -> PyTorchJob:
    spec = job.spec
    spec.run_policy = default_run_policy(spec.run_policy, "None")
    spec.pytorch_replica_specs = default_replicas(spec.pytorch_replica_specs, PYTORCHJOB)
    elastic = spec.elastic_policy
    if elastic is not None:
        if elastic.min_replicas is None and elastic.max_replicas is not None:
            elastic.min_replicas = elastic.max_replicas
        elif elastic.max_replicas is None and elastic.min_replicas is not None:
            elastic.max_replicas = elastic.min_replicas
        elif elastic.min_replicas is None and elastic.max_replicas is None:
            worker = spec.pytorch_replica_specs.get(WORKER)
            if worker is not None and worker.replicas is not None:
                elastic.min_replicas = elastic.max_replicas = worker.replicas
    if spec.nproc_per_node is None and (elastic is None or elastic.n_proc_per_node is None):
        spec.nproc_per_node = c.PYTORCH_DEFAULT_NPROC
    return job


# --- validation -----------------------------------------------------------------------------


def validate_pytorchjob(obj: dict[str, Any]) -> list[FieldError]:
    """The reference webhook's rules: Master and Worker only, one Master, the elastic policy."""
    spec = dict_at(obj, "spec")
    specs = dict_at(spec, PYTORCHJOB.replica_specs_field)
    elastic = spec.get("elasticPolicy")
    errors: list[FieldError] = []

    for rtype, rspec in specs.items():
        path = PYTORCHJOB.replica_path(rtype)
        if rtype not in c.PYTORCH_REPLICA_TYPES:
            errors.append(FieldError(path, "NotSupported", f"unsupported replica type {show(rtype)}; {supported(c.PYTORCH_REPLICA_TYPES)}"))
            continue
        if not isinstance(rspec, dict):
            continue  # parsing reported it
        errors += validate_template(path, rspec, c.PYTORCH_CONTAINER)
        replicas = rspec.get("replicas")
        count = int_or_none(replicas)
        if rtype == MASTER and (replicas is None or (count is not None and count != 1)):
            errors.append(FieldError(f"{path}.replicas", "Forbidden", "must be 1"))

    if isinstance(elastic, dict):
        errors += _validate_elastic(spec, elastic, specs)
    return errors


def _validate_elastic(spec: dict[str, Any], elastic: dict[str, Any], specs: dict[str, Any]) -> list[FieldError]:
    errors = []
    if specs.get(WORKER) is None:
        errors.append(FieldError(PYTORCHJOB.replica_path(WORKER), "Required", "must be configured if elastic policy is used"))
    if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
        errors.append(FieldError("spec.elasticPolicy.nProcPerNode", "Forbidden", "must not be used with spec.nprocPerNode"))
    low, high = int_or_none(elastic.get("minReplicas")), int_or_none(elastic.get("maxReplicas"))
    if low is not None and high is not None and low > high:
        errors.append(FieldError("spec.elasticPolicy.minReplicas", "Invalid", f"must be less than or equal to maxReplicas ({high}), not {low}"))
    return errors


def pytorchjob_deprecations(obj: dict[str, Any]) -> list[str]:
    if dict_at(dict_at(obj, "spec"), "elasticPolicy").get("nProcPerNode") is not None:
        return ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"]
    return []


# --- a pipeline step's job ------------------------------------------------------------------


def layout_pytorchjob(p: Parameters, replica: MakeReplica) -> dict[str, Any]:
    """Master + (replicas - 1) Workers, or elastic Workers between the bounds."""
    spec: dict[str, Any]
    if p.max_replicas:
        low = p.min_replicas or p.max_replicas
        spec = {
            "elasticPolicy": {"minReplicas": low, "maxReplicas": p.max_replicas},
            PYTORCHJOB.replica_specs_field: {WORKER: replica(min(max(p.replicas, low), p.max_replicas), True)},
        }
    else:
        specs = {MASTER: replica(1, True)}
        if p.replicas > 1:
            specs[WORKER] = replica(p.replicas - 1, True)
        spec = {PYTORCHJOB.replica_specs_field: specs}
    if p.nproc_per_node:
        spec["nprocPerNode"] = p.nproc_per_node
    # The kubeflow-training SDK cannot read a job without runPolicy.
    spec["runPolicy"] = {"cleanPodPolicy": "None"}
    return spec


PYTORCHJOB = JobKind(
    kind=c.PYTORCHJOB_KIND,
    group=c.KUBEFLOW_GROUP,
    version=c.KUBEFLOW_VERSION,
    plural=c.PYTORCHJOB_PLURAL,
    singular=c.PYTORCHJOB_SINGULAR,
    model=PyTorchJob,
    replica_specs_field="pytorchReplicaSpecs",
    replica_types=c.PYTORCH_REPLICA_TYPES,
    container=c.PYTORCH_CONTAINER,
    port_name=c.PYTORCH_PORT_NAME,
    default_port=c.PYTORCH_DEFAULT_PORT,
    default_restart_policy=c.PYTORCH_DEFAULT_RESTART_POLICY,
    controller_name=c.PYTORCH_CONTROLLER_NAME,
    framework=c.PYTORCH_FRAMEWORK,
    lead_replica_types=(MASTER, WORKER),
    defaulter=default_pytorchjob,
    validator=validate_pytorchjob,
    deprecations=pytorchjob_deprecations,
    layout=layout_pytorchjob,
    description="PyTorchJob represents a distributed PyTorch training job.",
    scale_replica_type=WORKER,
)
