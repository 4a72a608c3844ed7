"""What one reconcile decides: the Plan, and what it looked at: the Observed state.

The reconcile core is a pure function ``(job, Observed, now) -> Plan``. The shell
(trainctl/kube) is the only code that turns a Plan into API calls. Keeping the contract
in one small module lets both sides change independently.

Events about the job travel as ``Plan.events`` (transitions) and ``Plan.problems`` (standing
problems with its settings, which the shell records once); the Events about creating and deleting
children depend on how the API call went, so the plan names them (``create_events``,
``delete_events``, with the core's ``ObjectRef.cause``) and the shell records the one that
matches the outcome.

Applying a Plan must be safe to repeat: creates of objects that already exist as the job's
own (controller ownerReference uid) and deletes of objects that are gone count as success,
and every name is deterministic. An object of someone else's under a child's name (a deleted
job's pod, still terminating) makes its create fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional


@dataclass(frozen=True)
class ObjectRef:
    """An object to delete. ``uid`` makes the delete conditional (a precondition)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: Optional[str] = None
    # Force-delete (gracePeriodSeconds=0), used for pods stuck terminating on a lost node.
    force: bool = False
    # A graceful delete's gracePeriodSeconds; None: the pod's own terminationGracePeriodSeconds.
    grace_seconds: Optional[int] = None
    # Delete only the version the decision was made on: a 409 when the object changed since
    # (a pod that was Running in the cache may have finished), and the job is reconciled again.
    resource_version: Optional[str] = None
    # Why the core deletes it, when the object is being replaced (its Event says so).
    cause: Optional[str] = None


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event about the job itself."""

    type: str  # "Normal" or "Warning"
    reason: str
    message: str


@dataclass(frozen=True)
class ChildEvents:
    """The Events about a create or delete of a child, one for each outcome.

    Only the shell learns the outcome, so it records one of them after the API call; the
    failure's message is completed with the server's error (``Error creating: <error>``).
    """

    success: Event
    failure: Event


# The kinds the reference's pod and service controls announce, and their nouns.
_ANNOUNCED = {"Pod": "pod", "Service": "service"}


def create_events(obj: dict[str, Any]) -> Optional[ChildEvents]:
    """``SuccessfulCreatePod`` "Created pod: <name>" or ``FailedCreatePod`` (training-operator)."""
    kind = obj.get("kind", "")
    noun = _ANNOUNCED.get(kind)
    if noun is None:
        return None
    name = (obj.get("metadata") or {}).get("name", "")
    return ChildEvents(
        Event("Normal", f"SuccessfulCreate{kind}", f"Created {noun}: {name}"),
        Event("Warning", f"FailedCreate{kind}", "Error creating"),
    )


def delete_events(ref: ObjectRef) -> Optional[ChildEvents]:
    """``SuccessfulDeletePod`` "Deleted pod: <name>", with the cause of a replacement."""
    noun = _ANNOUNCED.get(ref.kind)
    if noun is None:
        return None
    message = f"Deleted {noun}: {ref.name}" + (f" ({ref.cause})" if ref.cause else "")
    return ChildEvents(
        Event("Normal", f"SuccessfulDelete{ref.kind}", message),
        Event("Warning", f"FailedDelete{ref.kind}", "Error deleting"),
    )


@dataclass(frozen=True)
class NodeTaint:
    """Taint a Node ``trainctl.io/unhealthy=<value>:NoSchedule`` (the node check blamed it)."""

    node: str
    value: str


@dataclass(frozen=True)
class PodProgress:
    """What the shell has seen of one pod's progress (``trainctl.io/hang-timeout``).

    ``last_progress``: the end of the last usage window in which the pod worked (or when it
    was first seen); ``observed_at``: the end of the latest window read, so a reading after
    ``last_progress`` is evidence that the pod has been idle since; ``stopped``: whether a
    Python process of its was found stopped by a signal (state T) since it went idle (None:
    nobody could look yet).
    """

    last_progress: datetime
    observed_at: datetime
    stopped: Optional[bool] = False


@dataclass(frozen=True)
class StackCapture:
    """Dump the Python stacks of ``pods`` (name, container) before they are deleted, and keep
    them in the ConfigMap ``config_map`` (owned by ``owner``), one key per pod."""

    namespace: str
    config_map: str
    owner: dict[str, Any]
    labels: dict[str, str]
    pods: tuple[tuple[str, str], ...]


@dataclass
class Observed:
    """What the cluster holds for one job, as plain dicts straight from the API."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    services: list[dict[str, Any]] = field(default_factory=list)
    hpa: Optional[dict[str, Any]] = None
    pod_group: Optional[dict[str, Any]] = None
    # The job's PodDisruptionBudget, and whether the cluster serves them (policy/v1) at all.
    pdb: Optional[dict[str, Any]] = None
    disruption_budgets: bool = False
    # The Nodes the job's pods are on, by name (a node absent here is not judged).
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The most memory any Node can give one pod (``oom.largest_node_memory`` of every Node,
    # in bytes; None: no Node says): no out-of-memory relaunch asks for more.
    node_memory: Optional[int] = None
    # By pod uid, the progress the shell has seen (only for jobs with a hang timeout).
    progress: dict[str, PodProgress] = field(default_factory=dict)


@dataclass
class Plan:
    """Everything the shell should do for one job after one reconcile."""

    # Full objects to create, in order. Children carry a controller ownerReference.
    creates: list[dict[str, Any]] = field(default_factory=list)
    # Full objects to replace (PUT); they carry the observed metadata.resourceVersion.
    updates: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[ObjectRef] = field(default_factory=list)
    # The job's new status, or None when it did not change (no write).
    status: Optional[dict[str, Any]] = None
    # Delete the job object itself (ttlSecondsAfterFinished expired).
    delete_job: bool = False
    events: list[Event] = field(default_factory=list)
    # Reconcile again after this many seconds even if nothing changes (deadline, TTL, grace periods).
    requeue_after: Optional[float] = None
    # Job-level counters to increment, once per transition: "created", "succeeded",
    # "failed", "restarted", "deleted" (training_operator_jobs_<name>_total).
    metrics: list[str] = field(default_factory=list)
    # Standing problems with the job's settings (an annotation that is not a valid value),
    # as Warning Events, and standing notices (an elastic job going on without a worker that
    # was taken away). Stated in every pass while they hold, unlike ``events``: the shell
    # records one when it appears, not again while it stays.
    problems: list[Event] = field(default_factory=list)
    # Nodes to taint, before any pod is deleted (their replacements must not land there).
    taints: list[NodeTaint] = field(default_factory=list)
    # Stacks to dump and keep before this plan's deletes run (a hung job's workers).
    stack_captures: list[StackCapture] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.creates or self.updates or self.deletes or self.status is not None or self.delete_job
                    or self.events or self.taints or self.stack_captures)
