"""What one reconcile pass of one job shares between its steps.

The pass is a sequence of steps (``core``), each in the module of its feature: lost nodes,
the out-of-memory relaunch, the rendezvous store, the HPA, the PodGroup, the replicas, the
limits and the job's life cycle. They read the same job and observed children and add to the
same plan, so these live in one small object: the job's identity and parsed spec, the
observed pods and Services indexed once, the ConditionBook, the status and the plan being
built, what this pass may still create and what it deletes already. Each feature keeps its
own decisions; the few that others must respect (a pod lost with its node, one replaced for
an OOM kill) are recorded here.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.api.common import Job, ReplicaSpec, RunPolicy
from trainctl.controller.frameworks.base import Framework, RendezvousStore
from trainctl.controller.reconcile import node_check, oom
from trainctl.controller.reconcile.children import ChildIndex, JobRef, is_terminating, owner_reference, typed_ref
from trainctl.controller.reconcile.conditions import ConditionBook
from trainctl.controller.reconcile.config import ReconcileConfig
from trainctl.controller.reconcile.disruption import Disruption
from trainctl.controller.reconcile.nodes import LostPod
from trainctl.controller.reconcile.plan import Event, Observed, Plan


@dataclass
class Pass:
    """The state of one reconcile of one job; the steps fill in the plan."""

    framework: Framework[Any]
    raw: dict[str, Any]
    job: Job  # parsed and defaulted
    observed: Observed
    now: datetime
    config: ReconcileConfig
    book: ConditionBook
    plan: Plan
    requeue: list[float] = field(default_factory=list)
    warnings: dict[str, Event] = field(default_factory=dict)
    problems: list[Event] = field(default_factory=list)  # with the job's settings: Plan.problems
    deleting: set[Optional[str]] = field(default_factory=set)  # uids this pass deletes
    lost: list[LostPod] = field(default_factory=list)  # pods lost with their node: force-deleted
    lost_waits: list[float] = field(default_factory=list)  # seconds until a node-lost grace expires
    lost_uids: set[Optional[str]] = field(default_factory=set)
    oom: oom.Relaunches = field(default_factory=oom.Relaunches)
    node_check: node_check.Checks = field(default_factory=node_check.Checks)
    disrupted: dict[Optional[str], Disruption] = field(default_factory=dict)  # by uid: evicted, preempted
    members: dict[str, Collection[int]] = field(default_factory=dict)  # by type, the indices kept: members.kept

    def __post_init__(self) -> None:
        meta = self.raw.get("metadata") or {}
        self.name: str = meta.get("name", "")
        self.namespace: str = meta.get("namespace") or "default"
        self.uid: str = meta.get("uid", "")
        self.annotations: dict[str, Any] = meta.get("annotations") or {}
        self.reference_env = str(self.annotations.get(c.ANNOTATION_REFERENCE_ENV, "")).lower() == "true"
        self.job_ref = JobRef(
            self.name, self.namespace, owner_reference(self.framework.api_version, self.framework.kind, self.name, self.uid)
        )
        stored = self.raw.get("status")
        self.old_status: dict[str, Any] = stored if isinstance(stored, dict) else {}
        self.status: dict[str, Any] = dict(self.old_status)
        self.pods = ChildIndex(self.observed.pods)
        self.services = ChildIndex(self.observed.services)
        self.run_policy: RunPolicy = self.job.spec.run_policy or RunPolicy()  # defaulting always sets one
        self.specs: dict[str, ReplicaSpec] = self.job.spec.replica_specs
        self.types: list[str] = self.framework.ordered_types(self.job)
        self.gang = self.config.gang
        self.store: Optional[RendezvousStore] = self.framework.rendezvous_store(self.job, self.reference_env)
        # What this pass may still create, per kind of replica child (never below one).
        per_pass = max(1, self.config.max_creates_per_pass)
        self.create_budget = {"Pod": per_pass, "Service": per_pass}

    def done(self) -> bool:
        return self.book.is_true(c.CONDITION_SUCCEEDED) or self.book.is_true(c.CONDITION_FAILED)

    def delete(
        self, obj: dict[str, Any], *, kind: str = "Pod", with_service: bool = True, as_observed: bool = False,
        cause: Optional[str] = None, grace_seconds: Optional[int] = None,
    ) -> None:
        """Delete a live object (and a pod's same-named Service); terminating ones are left.

        ``as_observed``: the decision rests on the object's current state (its phase), so the
        delete carries its resourceVersion and fails if the object has changed since.
        """
        if is_terminating(obj) or self.is_lost(obj) or self.is_deleting(obj):
            return  # a lost pod has its force-delete already
        self.deleting.add((obj.get("metadata") or {}).get("uid"))
        self.plan.deletes.append(typed_ref(obj, kind, as_observed=as_observed, cause=cause, grace_seconds=grace_seconds))
        if with_service:
            service = self.services.by_name.get((obj.get("metadata") or {}).get("name", ""))
            if service is not None and service is not obj and not is_terminating(service):
                self.plan.deletes.append(typed_ref(service, "Service"))

    def is_deleting(self, obj: dict[str, Any]) -> bool:
        """Whether this pass deletes ``obj`` already (a static job's restart, say)."""
        uid = (obj.get("metadata") or {}).get("uid")
        return uid is not None and uid in self.deleting

    def is_lost(self, obj: dict[str, Any]) -> bool:
        return bool(self.lost_uids) and (obj.get("metadata") or {}).get("uid") in self.lost_uids

    def within_budget(self, kind: str, missing: list[int]) -> list[int]:
        """The first of ``missing`` this pass may still create; a requeue when some must wait."""
        budget = self.create_budget[kind]
        if len(missing) > budget:
            self.requeue.append(0.0)  # the rest follow in the next pass
            missing = missing[:budget]
        self.create_budget[kind] = budget - len(missing)
        return missing
