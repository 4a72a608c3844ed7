"""What differs between job kinds, behind one interface the reconcile core drives.

The core owns the generic machinery (replica slots, restarts, conditions, policies); a
framework supplies the kind's rules: the labels and Services its pods get, the environment
each container receives, the children it needs besides its replicas (PyTorch's rendezvous
store), which exit codes are retryable and when the job has succeeded or failed. Its names
and shape (REST coordinates, replica types and their order, container, lead replica) are
its ``trainctl.api.kinds.JobKind``, which the plugin points at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Optional, TypeVar

from trainctl.api import constants as c
from trainctl.api.common import Job
from trainctl.api.kinds import JobKind

EnvFactory = Callable[[int], list[dict[str, Any]]]
# The wire model a plugin works on (PyTorchJob, MSJob).
J = TypeVar("J", bound=Job)

# Exit code the references use when the framework container has no terminated state
# (evicted pods, pods that never started).
UNKNOWN_EXIT_CODE = 0xBEEF


@dataclass(frozen=True)
class ReplicaCounts:
    """One replica type's pods as the status counts them (spec §5.11)."""

    active: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(frozen=True)
class ConditionChange:
    """A condition the framework wants set, with the type of the event that announces it."""

    type: str
    reason: str
    message: str
    event_type: Optional[str] = "Normal"  # None: no event (Running has none in the references)


@dataclass(frozen=True)
class JobFacts(Generic[J]):
    """What a framework may look at to decide the job's state in one pass."""

    name: str
    namespace: str
    job: J  # defaulted
    counts: dict[str, ReplicaCounts]
    # Replica types whose failed pods this pass deleted to be recreated.
    restarted: frozenset[str] = frozenset()
    # The lead replica's pod 0 (the kind's ``lead_replica``) exited 0; MSJob's default
    # success policy asks for it (Worker 0).
    lead_completed: bool = False
    # The condition types currently True, as the pass has left them so far.
    true_conditions: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class EnvContext:
    """Inputs to the environment that are not in the job spec."""

    name: str
    namespace: str
    uid: str
    reference_env: bool
    gang_scheduler: Optional[str]
    # PyTorch: the endpoint of the trainctl-managed rendezvous store, when the job has one.
    rendezvous_host: Optional[str] = None
    rendezvous_conf: Optional[str] = None
    # The Service ``Framework.env_service`` names, as observed (ClusterIP and port), when
    # it exists (MSJob: the Scheduler's).
    env_service: Optional[dict[str, Any]] = None


@dataclass(frozen=True)
class RendezvousStore:
    """A store pod that outlives the replicas, run from ``template``'s image on ``port``."""

    port: int
    template: dict[str, Any]


@dataclass(frozen=True)
class Autoscaling:
    """What a kind's HorizontalPodAutoscaler is given (it scales ``scale_replica_type``)."""

    min_replicas: Optional[int]
    max_replicas: Optional[int]
    metrics: list[dict[str, Any]]


class Framework(Generic[J]):
    """Base class: the shared Kubeflow vocabulary; subclasses fill in the kind."""

    job_kind: JobKind
    # Reference event reasons for a template that set restartPolicy / schedulerName itself.
    restart_policy_event: str
    scheduler_name_event: str
    # Condition reason for failures from backoffLimit / activeDeadlineSeconds.
    limit_failure_reason: str
    # The Restarting condition's message in the reference's words ({name}, {rtype}).
    restarting_message: str
    # The Volcano queue of a PodGroup whose job names none (None: leave ``queue`` unset).
    volcano_default_queue: Optional[str] = "default"

    @property
    def kind(self) -> str:
        return self.job_kind.kind

    @property
    def api_version(self) -> str:
        return self.job_kind.api_version

    @property
    def controller_name(self) -> str:
        return self.job_kind.controller_name

    @property
    def container(self) -> str:
        return self.job_kind.container

    @property
    def replica_types(self) -> tuple[str, ...]:
        return self.job_kind.replica_types

    def reason(self, what: str) -> str:
        return f"{self.kind}{what}"

    def change(self, condition_type: str, message: str, event_type: Optional[str] = "Normal") -> ConditionChange:
        """A condition with the kind's reason for it (``PyTorchJobRunning``, ``MSJobFailed`` …)."""
        return ConditionChange(condition_type, self.reason(condition_type), message, event_type)

    # --- replica types ------------------------------------------------------------------
    def ordered_types(self, job: J) -> list[str]:
        """The job's replica types in the kind's order, unknown keys last (sorted)."""
        specs = job.spec.replica_specs
        known = [t for t in self.replica_types if t in specs]
        return known + sorted(t for t in specs if t not in self.replica_types)

    # --- labels ---------------------------------------------------------------------------
    def base_labels(self, job_name: str) -> dict[str, str]:
        return {c.LABEL_OPERATOR_NAME: self.controller_name, c.LABEL_JOB_NAME: job_name.replace("/", "-")}

    # The labels that carry the replica index (the rest of a replica's labels do not vary).
    index_labels: tuple[str, ...] = (c.LABEL_REPLICA_INDEX,)

    def replica_labels(self, job_name: str, rtype: str, index: int) -> dict[str, str]:
        """Base labels plus replica type and index: Services' labels and selector."""
        labels = self.base_labels(job_name)
        labels[c.LABEL_REPLICA_TYPE] = rtype.lower()
        labels[c.LABEL_REPLICA_INDEX] = str(index)
        return labels

    def is_master_role(self, job: J, rtype: str, index: int) -> bool:
        return False

    # --- services -------------------------------------------------------------------------
    def service_cluster_ip(self, rtype: str) -> Optional[str]:
        """``"None"`` for a headless Service, ``""`` for a ClusterIP one, None for no Service."""
        raise NotImplementedError

    # --- pods -----------------------------------------------------------------------------
    # Variables trainctl adds beyond the reference operator's. Unlike the reference's own
    # (which are appended and win, as in the reference), a container that sets one of these
    # itself keeps its value and gets no second entry.
    advisory_env: frozenset[str] = frozenset()

    def env_containers(self, template: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
        """Which containers of a pod receive the injected environment."""
        raise NotImplementedError

    def env_factory(self, job: J, rtype: str, ctx: EnvContext) -> Optional[EnvFactory]:
        """The env for pod ``index`` of ``rtype``; None when pods cannot be created yet."""
        raise NotImplementedError

    def init_containers(self, job: J, rtype: str, name: str, image: str, max_tries: int) -> list[dict[str, Any]]:
        return []

    def env_service(self, job: J) -> Optional[str]:
        """The replica type whose Service (index 0) pods need in their env; no pods until it exists."""
        return None

    # --- children besides the replicas ----------------------------------------------------
    def rendezvous_store(self, job: J, reference_env: bool) -> Optional[RendezvousStore]:
        """The store pod and Service the job needs before its pods, if any."""
        return None

    def autoscaling(self, job: J) -> Optional[Autoscaling]:
        """The HorizontalPodAutoscaler the job asks for, if any."""
        return None

    def gang_replicas(self, job: J, rtype: str) -> int:
        """How many pods of ``rtype`` the gang (PodGroup minMember) must hold at least."""
        return job.spec.replica_specs[rtype].replicas or 0

    # --- restarts and outcome -------------------------------------------------------------
    def is_retryable(self, exit_code: int) -> bool:
        raise NotImplementedError

    def permanent_failure(self, name: str, rtype: str) -> Optional[ConditionChange]:
        """The Failed condition for a non-retryable exit under ``ExitCode``, if set at once."""
        return None

    def replaces_members_alone(self, job: J) -> bool:
        """Whether a lost pod is replaced alone (elastic) rather than with all its peers."""
        return False

    def restarting(self, name: str, rtype: str) -> ConditionChange:
        return self.change(c.CONDITION_RESTARTING, self.restarting_message.format(name=name, rtype=rtype), "Warning")

    def restarting_lost(self, name: str, rtype: str, lost: list[tuple[str, str]]) -> ConditionChange:
        """Restarting because ``lost`` (pod, node) were lost with their node: nothing failed,
        so the reference's "replica(s) failed" would mislead (trainctl's own words)."""
        pods = ", ".join(f"pod {pod} was lost with node {node}" for pod, node in lost)
        return self.change(c.CONDITION_RESTARTING, f"{self.kind} {name} is restarting because {rtype} {pods}.", "Warning")

    def evaluate(self, facts: JobFacts[J]) -> list[ConditionChange]:
        """Conditions to set, in order, from this pass's replica counts."""
        raise NotImplementedError

    def disruption_budget_minimum(self, job: J) -> Optional[int]:
        """How many of the scaled replica type's pods a disruption must leave (None: no budget)."""
        return None

    def scale_selector(self, job_name: str, rtype: str) -> Optional[str]:
        """``status.replicaStatuses[T].selector`` (the scale subresource's), if the kind has one."""
        return None


def env(name: str, value: Any) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def env_from_field(name: str, field_path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def named_port(container: Optional[dict[str, Any]], port_name: str) -> Optional[int]:
    for port in (container or {}).get("ports") or []:
        if port.get("name") == port_name:
            container_port: Optional[int] = port.get("containerPort")
            return container_port
    return None
