"""What a job kind is, as data: the one descriptor per kind and the registry of kinds.

Everything that differs between PyTorchJob and MSJob *as names and shapes* lives in one
``JobKind``: its REST coordinates, its wire model, the field that holds its replica specs,
its replica types and their order, the container and port the framework talks to, the
names its controller goes by, and which replica speaks for the job. The api layer (loading,
validation, defaulting, CRDs), the kube shell, the launcher and the pipelines read these
descriptors; the behaviour of a kind (environment, success rules) is its framework plugin
in ``trainctl.controller.frameworks``, which points at its descriptor. A new kind is one
more descriptor here, its wire model, and its plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from trainctl.api import constants as c
from trainctl.api.mindspore import MSJob
from trainctl.api.pytorch import PyTorchJob

JobModel = Union[type[PyTorchJob], type[MSJob]]


@dataclass(frozen=True)
class JobKind:
    """One training-job kind's names, wire shape and replica roles."""

    kind: str
    group: str
    version: str
    plural: str
    singular: str
    model: JobModel
    # The spec field that maps replica type → replica spec (``pytorchReplicaSpecs``).
    replica_specs_field: str
    # Replica types in the kind's order (status, PodGroup resources, creation order).
    replica_types: tuple[str, ...]
    # The container the framework talks to, and its named port with the default number.
    container: str
    port_name: str
    default_port: int
    default_restart_policy: c.RestartPolicy
    # The reference operator's name: the operator-name label and the events' component.
    controller_name: str
    # The ``framework`` label of the controller's metrics.
    framework: str
    # The replica whose pod speaks for the job (its logs are the job's): index 0 of the
    # first of these types the job has.
    lead_replica_types: tuple[str, ...]
    # The CRD's description of the kind.
    description: str = ""
    # The replica type the scale subresource scales, if the kind has one.
    scale_replica_type: Optional[str] = None
    # RunPolicy fields the kind's API lacks: dropped from its CRD, rejected by validation.
    unsupported_run_policy: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def replica_path(self, rtype: str) -> str:
        """The field path of one replica spec, as problems name it."""
        return f"spec.{self.replica_specs_field}[{rtype}]"

    def lead_replica(self, replica_types: Any) -> str:
        """The lead replica type among the job's (spec keys in any case), lowercase as labels are."""
        present = {str(name).lower() for name in replica_types}
        for rtype in self.lead_replica_types:
            if rtype.lower() in present:
                return rtype.lower()
        return self.lead_replica_types[-1].lower()


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
    lead_replica_types=("Master", "Worker"),
    description="PyTorchJob represents a distributed PyTorch training job.",
    scale_replica_type="Worker",
)

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
    lead_replica_types=("Worker",),
    description="MSJob represents a distributed MindSpore training job.",
    # ms-operator's RunPolicy is kubeflow/common v0.4.1's, which predates these fields.
    unsupported_run_policy=("suspend", "managedBy"),
)

# The registry: every kind trainctl serves, in the order lists and help texts show them.
KINDS: tuple[JobKind, ...] = (PYTORCHJOB, MSJOB)
BY_KIND: dict[str, JobKind] = {k.kind: k for k in KINDS}


def find(kind: Any) -> Optional[JobKind]:
    """The descriptor of a kind name, or None for anything else."""
    return BY_KIND.get(kind) if isinstance(kind, str) else None


def of(obj: Any) -> Optional[JobKind]:
    """The kind an object is, when both its kind and its apiVersion match one."""
    if not isinstance(obj, dict):
        return None
    found = find(obj.get("kind"))
    return found if found is not None and obj.get("apiVersion") == found.api_version else None
