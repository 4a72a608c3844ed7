"""What a job kind is, as data: the descriptor every kind's module fills in.

Everything that differs between PyTorchJob and MSJob *as the API* lives in one ``JobKind``:
its REST coordinates, its wire model, the field that holds its replica specs, its replica
types and their order, the container and port the framework talks to, the names its
controller goes by, which replica speaks for the job, and the functions that default and
validate it and lay it out from a pipeline step's parameters. Each kind's module
(``trainctl.api.pytorch``, ``trainctl.api.mindspore``) holds its model, those functions and
its descriptor; ``trainctl.api.kinds`` is the registry. The api layer (loading, validation,
defaulting, CRDs), the kube shell, the launcher, the pipelines and the timeline read the
descriptors; the behaviour of a kind in the controller (environment, success rules) is its
framework plugin in ``trainctl.controller.frameworks``, which points at its descriptor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from trainctl.api import constants as c
from trainctl.api.common import WireModel
from trainctl.api.errors import FieldError


@dataclass(frozen=True)
class Parameters:
    """The sizes a pipeline step gives instead of a manifest (``trainctl.pipelines.jobspec``)."""

    replicas: int
    min_replicas: int = 0
    max_replicas: int = 0
    nproc_per_node: str = ""


# One replica spec of ``n`` pods running the step's container; ``accelerators``: with the
# GPUs and NPUs the step asks for (False: CPU and memory only, e.g. a coordinator).
MakeReplica = Callable[[int, bool], dict[str, Any]]
# The job's spec laid out from the parameters, its replica specs made by ``MakeReplica``.
Layout = Callable[[Parameters, MakeReplica], dict[str, Any]]


def no_deprecations(obj: dict[str, Any]) -> list[str]:
    return []


@dataclass(frozen=True)
class JobKind:
    """One training-job kind's names, wire shape, replica roles and API rules."""

    kind: str
    group: str
    version: str
    plural: str
    singular: str
    model: type[WireModel]
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
    # Fills in the kind's defaults on a parsed job the caller owns and returns it
    # (``trainctl.api.defaults.default_job`` calls it on a copy).
    defaulter: Callable[[Any], Any]
    # The kind's own rules on the wire dict, each problem with its field path; the rules
    # every kind shares are ``trainctl.api.validation``'s.
    validator: Callable[[dict[str, Any]], list[FieldError]]
    # Things in a wire dict that work but should change (deprecated fields), one line each.
    deprecations: Callable[[dict[str, Any]], list[str]] = no_deprecations
    # The job a pipeline step builds from its parameters (None: the step needs a manifest).
    layout: Optional[Layout] = None
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
