"""The reconcile function: one job, what the cluster holds for it, the time → a Plan.

This is the whole decision-making of the controller, as a pure function: it parses and
validates the job once (a started job whose only problem is its scaled replica count keeps
its size: ``scale``) and defaults the parsed model in memory, then walks the reference
controller's algorithm (kubeflow-pytorchjob.md §5.1, msjob-mindspore.md §2.2) in a fixed
order: the replica limit; the HPA; the finished path (clean-up, TTL); the suspended path;
limits (backoffLimit, deadline); the PodGroup; per replica type the Services and the pods
by index, at most ``max_creates_per_pass`` of each; then the job's conditions.
It reads no clock and does no I/O, so every policy is a table of plain dicts in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.api.common import Job, RunPolicy
from trainctl.api.defaults import default_job
from trainctl.api.validation import check
from trainctl.controller.frameworks import Framework, framework_for
from trainctl.controller.frameworks.base import (
    UNKNOWN_EXIT_CODE,
    ConditionChange,
    EnvContext,
    EnvFactory,
    JobFacts,
    RendezvousStore,
    ReplicaCounts,
)
from trainctl.controller.reconcile import gang as gangs
from trainctl.controller.reconcile import nodes, oom, rendezvous
from trainctl.controller.reconcile.children import (
    ChildIndex,
    JobRef,
    is_terminating,
    owner_reference,
    parse_time,
    ref,
    replica_name,
    rfc3339,
)
from trainctl.controller.reconcile.conditions import FALSE, TRUE, ConditionBook, find
from trainctl.controller.reconcile.config import VOLCANO, ReconcileConfig
from trainctl.controller.reconcile.hpa import HPA_API_VERSION, HPA_KIND, desired_hpa, hpa_update, scale_selector_published
from trainctl.controller.reconcile.plan import Event, ObjectRef, Observed, Plan
from trainctl.controller.reconcile.pods import PodFactory, build_service, service_ports
from trainctl.controller.reconcile.scale import kept_size

_DEFAULT_CONFIG = ReconcileConfig()
# Restart policies under which the controller recreates a pod whose phase is Failed.
_RECREATE_ALWAYS = ("OnFailure", "Always")


def reconcile(job: dict[str, Any], observed: Observed, now: datetime, config: ReconcileConfig = _DEFAULT_CONFIG) -> Plan:
    """Decide what to do for ``job``; see docs/architecture.md for the contract."""
    framework = framework_for(job.get("kind", ""))
    meta = job.get("metadata") or {}
    plan = Plan()
    if meta.get("deletionTimestamp"):
        return plan  # garbage collection removes the children
    spec = job.get("spec")
    run_policy = spec.get("runPolicy") if isinstance(spec, dict) else None
    if isinstance(run_policy, dict) and run_policy.get("managedBy") not in (None, c.MANAGED_BY_TRAINING_OPERATOR):
        return plan  # another controller (e.g. Kueue's MultiKueue) owns this job
    stored = job.get("status")
    status: dict[str, Any] = stored if isinstance(stored, dict) else {}
    book = ConditionBook(status.get("conditions"), rfc3339(now))

    parsed, problems = check(job)
    kept = kept_size(framework.job_kind, job, problems, observed) if parsed is not None and problems else None
    if parsed is None or (problems and kept is None):
        message = "; ".join(map(str, problems))
        book.set(c.CONDITION_FAILED, TRUE, framework.reason("FailedValidation"), message, "Warning")
        plan.events, _ = book.changes()
        new_status = {**status, "conditions": book.conditions}
        if new_status != status:
            plan.status = new_status
        return plan

    defaulted = default_job(parsed, in_place=True)
    if kept is not None:
        defaulted.spec.replica_specs[kept.replica_type].replicas = kept.replicas
    one_pass = _Pass(framework, job, defaulted, observed, now, config, book, plan)
    if kept is not None:
        one_pass.warnings[kept.event.reason] = kept.event
    one_pass.run()
    return plan


@dataclass
class _Pass:
    """The state of one reconcile of one job; ``run`` fills in the plan."""

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
        self.run_policy = self.job.spec.run_policy or RunPolicy()  # defaulting always sets one
        self.specs = self.job.spec.replica_specs
        self.types = self.framework.ordered_types(self.job)
        self.gang = self.config.gang
        self.store = self.framework.rendezvous_store(self.job, self.reference_env)
        # What this pass may still create, per kind of replica child (never below one).
        per_pass = max(1, self.config.max_creates_per_pass)
        self.create_budget = {"Pod": per_pass, "Service": per_pass}
        grace, problem = nodes.grace_seconds(self.annotations, self.config.node_lost_grace_seconds)
        if problem is not None:
            self.problems.append(Event("Warning", "InvalidNodeLostGrace", problem))
        self.lost, self.lost_waits = nodes.find_lost(self.observed.pods, self.observed.nodes, self.now, grace)
        self.deleting: set[Optional[str]] = set()  # uids this pass deletes
        self.lost_uids = {(lost.pod.get("metadata") or {}).get("uid") for lost in self.lost}
        self.oom_policy, oom_problems = oom.policy(self.annotations, self.config.oom_memory_factor, self.config.oom_memory_max)
        self.problems.extend(Event("Warning", "InvalidOOMMemory", problem) for problem in oom_problems)
        self.oom_memory: dict[str, dict[str, Any]] = dict(self.old_status.get("oomMemory") or {})
        self.oom_relaunch: dict[str, tuple[str, int, int, int]] = {}  # uid -> (type, index, limit, new limit)
        self.oom_replacing: set[str] = set()  # uids of OOMKilled pods already being deleted for a relaunch
        self.oom_at_max: list[str] = []  # why memory ended a replica, for the failure message
        if self.oom_policy is not None:
            self.find_oom_killed(self.oom_policy)

    # --- the pass ---------------------------------------------------------------------------
    def run(self) -> None:
        fw = self.framework
        if find(self.book.conditions, c.CONDITION_CREATED) is None:
            self.book.set(c.CONDITION_CREATED, TRUE, fw.reason("Created"), f"{fw.kind} {self.name} is created.", None)
        too_many = self.replica_limit_exceeded()
        if too_many is not None:
            self.book.set(c.CONDITION_FAILED, TRUE, fw.reason("ReplicaLimitExceeded"), too_many, "Warning")
        suspended = bool(self.run_policy.suspend)
        self.reconcile_hpa(suspended)
        done = self.book.is_true(c.CONDITION_SUCCEEDED) or self.book.is_true(c.CONDITION_FAILED)
        if done:  # nothing is replaced any more: pods follow cleanPodPolicy, stuck ones the rule below
            self.lost, self.lost_uids, self.lost_waits = [], set(), []
            self.problems = []  # nor do the settings that decide replacements matter
        self.force_delete_stuck_pods()
        self.force_delete_lost_pods()
        if done:
            self.finished()
        elif suspended:
            self.suspend()
        else:
            self.active()
        self.finish()

    def finish(self) -> None:
        self.status["conditions"] = self.book.conditions
        order = ("conditions", "replicaStatuses", "startTime", "completionTime", "lastReconcileTime", "restartCount")
        self.status = {**{k: self.status[k] for k in order if k in self.status}, **self.status}
        events, metrics = self.book.changes()
        self.plan.events = events + self.plan.events + list(self.warnings.values())
        self.plan.metrics = metrics + self.plan.metrics
        self.plan.problems = self.problems
        if self.status != self.old_status:
            self.plan.status = self.status
        if self.requeue:
            self.plan.requeue_after = max(0.0, min(self.requeue))

    # --- paths ------------------------------------------------------------------------------
    def finished(self) -> None:
        """Clean up per cleanPodPolicy, drop the PodGroup and the store, then the TTL."""
        self.clean_up()
        if self.book.is_true(c.CONDITION_SUCCEEDED):
            statuses = {}
            for rtype, counts in (self.status.get("replicaStatuses") or {}).items():
                counts = dict(counts)
                moved = (counts.pop("active", 0) or 0) + (counts.get("succeeded", 0) or 0)
                if moved:
                    counts["succeeded"] = moved
                statuses[rtype] = counts
            if statuses:
                self.status["replicaStatuses"] = statuses
        if not self.status.get("completionTime"):
            self.status["completionTime"] = rfc3339(self.now)
        self.ttl()

    def suspend(self) -> None:
        """Delete every pod, Service, the PodGroup and the store; mark the job Suspended."""
        fw = self.framework
        for pod in self.pods.replicas():
            self.delete(pod, with_service=False)
        for service in self.services.replicas():
            self.delete(service, kind="Service", with_service=False)
        self.delete_rendezvous_store()
        self.delete_pod_group()
        statuses = {}
        for rtype, counts in (self.status.get("replicaStatuses") or {}).items():
            statuses[rtype] = {k: v for k, v in counts.items() if k != "active"}
        if statuses:
            self.status["replicaStatuses"] = statuses
        message = f"{fw.kind} {self.name} is suspended."
        if self.book.is_true(c.CONDITION_RUNNING):
            self.book.set(c.CONDITION_RUNNING, FALSE, fw.reason("Suspended"), message, None)
        if not self.book.is_true(c.CONDITION_SUSPENDED):
            self.book.set(c.CONDITION_SUSPENDED, TRUE, fw.reason("Suspended"), message, "Normal")

    def active(self) -> None:
        fw = self.framework
        if self.book.is_true(c.CONDITION_SUSPENDED):
            self.book.set(c.CONDITION_SUSPENDED, FALSE, fw.reason("Resumed"), f"{fw.kind} {self.name} is resumed.", "Normal")
            self.status["startTime"] = rfc3339(self.now)
        if not self.status.get("startTime"):
            self.status["startTime"] = rfc3339(self.now)
        counts = {rtype: self.count(rtype) for rtype in self.types}
        failure = self.limit_failure(counts)
        if failure is not None:
            self.set_replica_statuses(counts)
            if not self.status.get("completionTime"):
                self.status["completionTime"] = rfc3339(self.now)
            self.clean_up()
            self.book.set(c.CONDITION_FAILED, TRUE, fw.limit_failure_reason, self.with_oom_cause(failure), "Normal")
            self.ttl()
            return
        may_create_pods = self.reconcile_pod_group()
        ctx = EnvContext(
            name=self.name,
            namespace=self.namespace,
            uid=self.uid,
            reference_env=self.reference_env,
            gang_scheduler=self.gang,
        )
        store = self.store
        if store is not None:
            ctx = replace(ctx, rendezvous_host=rendezvous.store_name(self.name), rendezvous_conf=self.config.rendezvous_conf())
        service_type = fw.env_service(self.job)
        if service_type is not None:
            ctx = replace(ctx, env_service=self.services.by_name.get(replica_name(self.name, service_type, 0)))
        if store is not None and may_create_pods:
            # Agents start only once the store's Service exists, so its name resolves for them.
            may_create_pods = self.reconcile_rendezvous_store(store)

        restarted: list[str] = []
        # A non-retryable exit fails the job in this pass, so nothing is restarted or created:
        # a peer that left with a retryable code at the same moment would otherwise be
        # deleted (losing its status and log) only for the job to fail anyway.
        permanent = self.exit_code_failures()
        restarts, lost = 0, dict[str, list[tuple[str, str]]]()
        if not permanent:
            restarts, lost = self.restart_for_lost_pods()
            restarted = list(lost)
        for rtype in self.types:
            if fw.service_cluster_ip(rtype) is not None:
                self.reconcile_services(rtype, self.specs[rtype].replicas or 0)
            env_factory = fw.env_factory(self.job, rtype, ctx) if may_create_pods and not permanent else None
            count = self.reconcile_pods(rtype, env_factory, restart=not permanent)
            if count:
                restarts += count
                if rtype not in restarted:
                    restarted.append(rtype)

        if self.oom_memory:
            self.status["oomMemory"] = self.oom_memory
        if restarts:
            self.status["restartCount"] = (self.status.get("restartCount") or 0) + restarts
        for rtype in restarted:
            self.book.apply(self.restarting(rtype, lost))
        for change in permanent:
            self.book.apply(change)
        facts = JobFacts(
            name=self.name,
            namespace=self.namespace,
            job=self.job,
            counts=counts,
            restarted=frozenset(restarted),
            lead_completed=self.lead_completed(),
            true_conditions=self.book.true_types(),
        )
        for change in fw.evaluate(facts):
            if change.type == c.CONDITION_FAILED and self.oom_at_max:
                change = replace(change, message=self.with_oom_cause(change.message))
            self.book.apply(change)
        if not (self.book.is_true(c.CONDITION_SUCCEEDED) or self.book.is_true(c.CONDITION_FAILED)):
            for rtype in lost:  # a lost pod is counted neither up nor failed: say it restarts
                self.book.apply(self.restarting(rtype, lost))
        self.set_replica_statuses(counts)
        if (self.book.is_true(c.CONDITION_SUCCEEDED) or self.book.is_true(c.CONDITION_FAILED)) and not self.status.get(
            "completionTime"
        ):
            self.status["completionTime"] = rfc3339(self.now)
        self.deadline_requeue()

    # --- pods and services --------------------------------------------------------------------
    def exit_code_failures(self) -> list[ConditionChange]:
        """The Failed conditions that non-retryable ``ExitCode`` exits call for, one per type."""
        fw, out = self.framework, []
        for rtype in self.types:
            change = fw.permanent_failure(self.name, rtype) if self.specs[rtype].restart_policy == "ExitCode" else None
            if change is None:  # MSJob fails through its own rules
                continue
            duplicated = self.pods.duplicated(rtype)
            if any(index not in duplicated and not is_terminating(pod) and index < (self.specs[rtype].replicas or 0)
                   and (pod.get("status") or {}).get("phase") == "Failed" and not fw.is_retryable(exit_code(pod, fw.container))
                   and not self.closed_out(pod)
                   for index, pod in self.pods.slots(rtype).items()):
                out.append(change)
        return out

    def reconcile_pods(self, rtype: str, env_factory: Optional[EnvFactory], *, restart: bool = True) -> int:
        """Create missing indices, delete surplus ones, restart failed pods (spec §3.8, §5.5).

        Returns how many failed pods were deleted to be recreated. ``env_factory`` None:
        create nothing yet; ``restart`` False: leave failed pods as they are.
        """
        fw, spec = self.framework, self.specs[rtype]
        replicas = spec.replicas or 0
        restarts = 0
        if env_factory is not None:
            self.create_pods(rtype, env_factory, replicas)
        slots, duplicated = self.pods.slots(rtype), self.pods.duplicated(rtype)
        for index in sorted(slots):  # ints sort fast; deletes go lowest index first
            pod = slots[index]
            if index in duplicated or is_terminating(pod) or self.is_lost(pod) or self.is_deleting(pod):
                continue  # duplicates on one index are left alone, as the reference does
            if index >= replicas:
                self.delete(pod, with_service=False)  # scale-down: the highest indices go
                continue
            if restart and self.relaunch_oom_killed(rtype, pod):
                restarts += 1
                continue
            if restart and self.closed_out(pod):
                self.rejoin_closed_out(pod)
                continue
            if not restart or (pod.get("status") or {}).get("phase") != "Failed":
                continue
            code = exit_code(pod, fw.container)
            if spec.restart_policy in _RECREATE_ALWAYS or (spec.restart_policy == "ExitCode" and fw.is_retryable(code)):
                # recreated under the same name once gone
                self.delete(pod, with_service=False, cause=f"to be recreated: {failure_cause(pod, code)}")
                restarts += 1
        return restarts

    def create_pods(self, rtype: str, env_factory: EnvFactory, replicas: int) -> None:
        """Create missing pods, lowest indices first, within what is left of this pass's budget."""
        missing = self.within_budget("Pod", self.pods.missing(rtype, replicas, self.create_budget["Pod"] + 1))
        if not missing:
            return
        factory = self.pod_factory(rtype, env_factory)
        for warning in factory.warnings:
            self.warnings.setdefault(warning.reason, warning)
        for index in missing:
            pod = factory.build(index)
            grown = self.oom_memory.get(f"{rtype}-{index}")
            if grown and grown.get("memory"):
                pod = oom.with_memory(pod, self.framework.container, grown["memory"], grown.get("previous") or "")
            self.plan.creates.append(pod)

    def within_budget(self, kind: str, missing: list[int]) -> list[int]:
        """The first of ``missing`` this pass may still create; a requeue when some must wait."""
        budget = self.create_budget[kind]
        if len(missing) > budget:
            self.requeue.append(0.0)  # the rest follow in the next pass
            missing = missing[:budget]
        self.create_budget[kind] = budget - len(missing)
        return missing

    def pod_factory(self, rtype: str, env_factory: EnvFactory) -> PodFactory:
        return PodFactory(
            framework=self.framework,
            job=self.job,
            job_ref=self.job_ref,
            rtype=rtype,
            spec=self.specs[rtype],
            env_factory=env_factory,
            gang=self.gang,
            init_image=self.config.init_container_image,
            init_max_tries=self.config.init_container_max_tries,
            ascend_annotation_env=self.gang == VOLCANO and not self.reference_env,
            report_closed_rendezvous=self.store is not None,
        )

    def reconcile_services(self, rtype: str, replicas: int) -> None:
        """Create missing Services within the pass's budget; delete those of surplus indices."""
        fw = self.framework
        missing = self.within_budget("Service", self.services.missing(rtype, replicas, self.create_budget["Service"] + 1))
        if missing:
            ports = service_ports(fw, self.specs[rtype])
            cluster_ip = fw.service_cluster_ip(rtype) or ""
            self.plan.creates.extend(
                build_service(fw, job_ref=self.job_ref, rtype=rtype, index=index, ports=ports, cluster_ip=cluster_ip)
                for index in missing
            )
        slots, duplicated = self.services.slots(rtype), self.services.duplicated(rtype)
        for index in sorted(slots):
            if index >= replicas and index not in duplicated:
                self.delete(slots[index], kind="Service", with_service=False)

    def count(self, rtype: str) -> ReplicaCounts:
        """Active, succeeded and failed pods of one type (spec §5.11; Pending is not counted)."""
        active = succeeded = failed = 0
        duplicated = self.pods.duplicated(rtype)
        for index, pod in self.pods.slots(rtype).items():
            if index in duplicated or self.is_oom_relaunched(pod) or self.is_lost(pod) or self.closed_out(pod):
                continue  # replaced by the controller (more memory, a lost node, a closed rendezvous): neither up nor failed
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Running":
                if is_terminating(pod):
                    failed += 1  # being deleted, e.g. its node is gone
                else:
                    active += 1
            elif phase == "Succeeded":
                succeeded += 1
            elif phase == "Failed":
                failed += 1
        return ReplicaCounts(active, succeeded, failed)

    def set_replica_statuses(self, counts: dict[str, ReplicaCounts]) -> None:
        statuses = {}
        for rtype in self.types:
            entry: dict[str, Any] = {}
            rc = counts[rtype]
            for key, value in (("active", rc.active), ("succeeded", rc.succeeded), ("failed", rc.failed)):
                if value:
                    entry[key] = value
            selector = self.framework.scale_selector(self.name, rtype)
            if selector is not None:
                entry["selector"] = selector
            statuses[rtype] = entry
        self.status["replicaStatuses"] = statuses

    def lead_completed(self) -> bool:
        """Whether pod 0 of the kind's lead replica type has succeeded with exit code 0."""
        lead = self.framework.job_kind.lead_replica(self.specs)
        pod = self.pods.slots(lead).get(0)
        if pod is None or 0 in self.pods.duplicated(lead) or (pod.get("status") or {}).get("phase") != "Succeeded":
            return False
        return exit_code(pod, self.framework.container) == 0

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
        self.plan.deletes.append(_typed_ref(obj, kind, as_observed=as_observed, cause=cause, grace_seconds=grace_seconds))
        if with_service:
            service = self.services.by_name.get((obj.get("metadata") or {}).get("name", ""))
            if service is not None and service is not obj and not is_terminating(service):
                self.plan.deletes.append(_typed_ref(service, "Service"))

    def clean_up(self) -> None:
        """cleanPodPolicy: None keeps every pod, Running deletes Running and Pending ones, else all."""
        policy = self.run_policy.clean_pod_policy
        self.delete_rendezvous_store()
        self.delete_pod_group()
        if policy == "None":
            return
        for pod in self.pods.replicas():
            phase = (pod.get("status") or {}).get("phase")
            if policy == "Running" and phase not in ("Running", "Pending"):
                continue
            self.delete(pod, as_observed=policy == "Running")

    def force_delete_stuck_pods(self) -> None:
        """Pods terminating long past their deletionTimestamp sit on a lost node (#2072)."""
        grace = self.config.force_delete_grace_seconds
        for pod in self.observed.pods:
            if self.is_lost(pod):
                continue
            deleted_at = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
            if deleted_at is None:
                continue
            left = (deleted_at - self.now).total_seconds() + grace
            if left <= 0:
                cause = (
                    f"force-deleted: on node {node_of(pod)}, still terminating "
                    f"at least {grace:g}s after its deadline {rfc3339(deleted_at)}"
                )
                self.plan.deletes.append(_typed_ref(pod, "Pod", force=True, cause=cause))
            else:
                self.requeue.append(left)

    # --- lost nodes (trainctl extension, docs/compatibility.md) -------------------------------
    def is_deleting(self, obj: dict[str, Any]) -> bool:
        """Whether this pass deletes ``obj`` already (a static job's restart, say)."""
        uid = (obj.get("metadata") or {}).get("uid")
        return uid is not None and uid in self.deleting

    def is_lost(self, obj: dict[str, Any]) -> bool:
        return bool(self.lost_uids) and (obj.get("metadata") or {}).get("uid") in self.lost_uids

    def force_delete_lost_pods(self) -> None:
        """Force-delete pods lost with their node, terminating ones too: no kubelet confirms it."""
        for lost in self.lost:
            self.plan.deletes.append(_typed_ref(lost.pod, "Pod", force=True, cause=lost.cause))
        self.requeue.extend(self.lost_waits)  # look again the moment a grace expires

    def restarting(self, rtype: str, lost: dict[str, list[tuple[str, str]]]) -> ConditionChange:
        """The Restarting condition for ``rtype``: its pods lost with their node, if any, else failed."""
        if rtype in lost:
            return self.framework.restarting_lost(self.name, rtype, lost[rtype])
        return self.framework.restarting(self.name, rtype)

    def restart_for_lost_pods(self) -> tuple[int, dict[str, list[tuple[str, str]]]]:
        """Count the replacements of lost replicas; a static job restarts all its pods.

        The manager deletes conditionally and waits for its deletes to show in the cache, so
        a lost pod (one uid) is seen lost, and counted, in one pass only. An elastic job's
        survivors keep training at the smaller size and the replacement rejoins: one restart
        per lost pod. A static job's ranks cannot take a new member: every pod is deleted and
        recreated, one restart of the job. Returns the restarts and, by replica type, the
        lost pods and their nodes.
        """
        lost_by_type: dict[str, list[tuple[str, str]]] = {}
        for rtype in self.types:
            replicas = self.specs[rtype].replicas or 0
            for index, pod in sorted(self.pods.slots(rtype).items()):
                if index < replicas and self.is_lost(pod):
                    lost_by_type.setdefault(rtype, []).append((pod["metadata"].get("name", ""), node_of(pod)))
        if not lost_by_type:
            return 0, {}
        if self.framework.replaces_members_alone(self.job):
            return sum(len(pods) for pods in lost_by_type.values()), lost_by_type
        name, node = next(iter(lost_by_type.values()))[0]
        why = f"restarting the static job: {name} was lost with node {node}"
        for pod in self.pods.replicas():
            self.delete(pod, with_service=False, cause=why)
        return 1, lost_by_type

    # --- out-of-memory relaunch (trainctl extension, docs/compatibility.md) ------------------
    def find_oom_killed(self, policy: oom.Policy) -> None:
        """Which OOMKilled replicas get more memory; which are at their ceiling already (the
        maximum, or the most memory any node can give)."""
        container = self.framework.container
        for rtype in self.types:
            duplicated = self.pods.duplicated(rtype)
            for index, pod in self.pods.slots(rtype).items():
                if index in duplicated or self.is_lost(pod) or not oom.oom_killed(pod, container):
                    continue
                limit = oom.memory_limit(pod.get("spec") or {}, container)
                if limit is None:
                    continue  # no memory limit: nothing to grow
                grown = oom.grown(limit, policy, self.observed.node_memory)
                uid = pod["metadata"].get("uid", "")
                if grown > limit and is_terminating(pod):
                    self.oom_replacing.add(uid)
                elif grown > limit:
                    self.oom_relaunch[uid] = (rtype, index, limit, grown)
                elif not is_terminating(pod):
                    self.oom_at_max.append(oom.no_room(f"{rtype}-{index}", limit, policy, self.observed.node_memory))

    def is_oom_relaunched(self, pod: dict[str, Any]) -> bool:
        """Whether ``pod`` is replaced for an OOM kill, in this pass or by a delete under way."""
        uid = (pod.get("metadata") or {}).get("uid")
        return uid in self.oom_relaunch or uid in self.oom_replacing

    def relaunch_oom_killed(self, rtype: str, pod: dict[str, Any]) -> bool:
        """Replace an OOMKilled pod; its replacement gets the grown limit from the status."""
        decided = self.oom_relaunch.get((pod.get("metadata") or {}).get("uid", ""))
        if decided is None:
            return False
        _, index, limit, grown = decided
        key, previous, memory = f"{rtype}-{index}", oom.format_memory(limit), oom.format_memory(grown)
        recorded = self.oom_memory.get(key) or {}
        relaunches = int(recorded.get("relaunches") or 0)
        if (recorded.get("memory"), recorded.get("previous")) != (memory, previous):
            relaunches += 1  # else this kill was counted in a pass whose delete is not seen yet
        self.oom_memory[key] = {"memory": memory, "previous": previous, "relaunches": relaunches}
        name = pod["metadata"].get("name", "")
        cause = f"to be recreated with memory {memory}: OOMKilled at {previous} on node {node_of(pod)}"
        self.delete(pod, with_service=False, cause=cause, grace_seconds=oom.RELAUNCH_GRACE_SECONDS)
        self.plan.events.append(Event(
            "Normal", "OOMMemoryIncreased",
            f"Pod {name} was OOMKilled with memory limit {previous}: replica {key} is relaunched with {memory}",
        ))
        return True

    def with_oom_cause(self, message: str) -> str:
        return message + ("; " + "; ".join(self.oom_at_max) if self.oom_at_max else "")

    # --- trainctl's rendezvous store --------------------------------------------------------
    def reconcile_rendezvous_store(self, store: RendezvousStore) -> bool:
        """Keep the store pod and its Service; whether the Service is there for agents to use."""
        port = store.port
        base = self.framework.base_labels(self.name)
        name = rendezvous.store_name(self.name)
        pod = self.pods.by_name.get(name)
        if pod is None:
            self.plan.creates.append(
                rendezvous.store_pod(
                    store, job_ref=self.job_ref, container_name=self.framework.container, base_labels=base, config=self.config
                )
            )
        elif (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded") and not is_terminating(pod):
            self.plan.deletes.append(_typed_ref(pod, "Pod"))  # recreated once it is gone
        elif (closer := rendezvous.found_closed(pod, self.pods.replicas(), self.framework.container)) is not None:
            why = f"for a fresh rendezvous: {closer['metadata'].get('name')} found this one closed, its group had ended"
            self.plan.deletes.append(_typed_ref(pod, "Pod", cause=why))  # recreated once it is gone
        if name in self.services.by_name:
            return True
        self.plan.creates.append(rendezvous.store_service(job_ref=self.job_ref, base_labels=base, port=port))
        return False

    def closed_out(self, pod: dict[str, Any]) -> bool:
        """A Failed replica whose run found the rendezvous of trainctl's store closed: it came
        after its group had ended, so it has neither failed nor run; it is recreated to join
        a fresh rendezvous, whatever the restart policy (its exit code says nothing)."""
        return (self.store is not None and (pod.get("status") or {}).get("phase") == "Failed"
                and rendezvous.ended_on_closed(pod, self.framework.container) is not None)

    def rejoin_closed_out(self, pod: dict[str, Any]) -> None:
        """Recreate a closed-out replica once the store running started no earlier than its run
        (the store found closed is being replaced meanwhile; its events bring the next pass)."""
        store = self.pods.by_name.get(rendezvous.store_name(self.name))
        started = None if store is None else rendezvous.store_started(store)
        run = rendezvous.ended_on_closed(pod, self.framework.container)
        if started is not None and run is not None and started >= run:
            cause = f"to be recreated: it found the rendezvous closed on node {node_of(pod)}; a fresh one is running"
            self.delete(pod, with_service=False, cause=cause)

    def delete_rendezvous_store(self) -> None:
        for pod in self.pods.rendezvous:
            if not is_terminating(pod):
                self.plan.deletes.append(_typed_ref(pod, "Pod"))
        for service in self.services.rendezvous:
            if not is_terminating(service):
                self.plan.deletes.append(_typed_ref(service, "Service"))

    # --- HPA and PodGroup ---------------------------------------------------------------------
    def reconcile_hpa(self, suspended: bool) -> None:
        scaling = self.framework.autoscaling(self.job)
        desired = None if scaling is None else desired_hpa(scaling, job_ref=self.job_ref)
        current = self.observed.hpa
        if current is None:
            if desired is not None and not suspended and scale_selector_published(
                    self.framework, self.name, self.specs, self.old_status):
                self.plan.creates.append(desired)
        elif desired is None or suspended:
            self.plan.deletes.append(_typed_ref(current, HPA_KIND, HPA_API_VERSION))
        else:
            update = hpa_update(desired, current)
            if update is not None:
                self.plan.updates.append(update)

    def reconcile_pod_group(self) -> bool:
        """Create or update the PodGroup; whether pods may be created now."""
        if not self.gang:
            return True
        current = self.observed.pod_group
        desired = gangs.desired_pod_group(
            self.framework, self.job, job_ref=self.job_ref, gang=self.gang, annotations=self.annotations, observed=current
        )
        if current is None:
            self.plan.creates.append(desired)
        else:
            update = gangs.pod_group_update(desired, current)
            if update is not None:
                self.plan.updates.append(update)
        if gangs.admitted(self.gang, current):
            return True
        self.requeue.append(self.config.podgroup_poll_seconds)
        return False

    def delete_pod_group(self) -> None:
        if self.gang and self.observed.pod_group is not None:
            api_version = gangs.VOLCANO_API_VERSION if self.gang == VOLCANO else gangs.SCHEDULER_PLUGINS_API_VERSION
            self.plan.deletes.append(_typed_ref(self.observed.pod_group, gangs.PODGROUP_KIND, api_version))
            self.warnings.setdefault("JobTerminated", Event("Normal", "JobTerminated", "Job has been terminated. Deleting PodGroup"))

    # --- limits -------------------------------------------------------------------------------
    def replica_limit_exceeded(self) -> Optional[str]:
        """Why the job asks for more replicas than the controller takes on, if it does."""
        limit = self.config.max_replicas_per_job
        flag = f"the controller's limit of {limit} replicas per job (--max-replicas-per-job)"
        kind = self.framework.job_kind
        for rtype in self.types:
            replicas = self.specs[rtype].replicas or 0
            if replicas > limit:
                return f"{kind.replica_path(rtype)}.replicas: {replicas} exceeds {flag}"
        total = sum(self.specs[rtype].replicas or 0 for rtype in self.types)
        if total > limit:
            return f"spec.{kind.replica_specs_field}: {total} replicas in all exceed {flag}"
        return None

    def limit_failure(self, counts: dict[str, ReplicaCounts]) -> Optional[str]:
        """The failure message when backoffLimit or activeDeadlineSeconds is exceeded."""
        limit = self.run_policy.backoff_limit
        if limit is not None and self.past_backoff_limit(limit, counts):
            return f"Job {self.name} has failed because it has reached the specified backoff limit"
        deadline = self.run_policy.active_deadline_seconds
        started = parse_time(self.status.get("startTime"))
        if deadline is not None and started is not None and (self.now - started).total_seconds() >= deadline:
            return f"Job {self.name} has failed because it was active longer than specified deadline"
        return None

    def past_backoff_limit(self, limit: int, counts: dict[str, ReplicaCounts]) -> bool:
        """Restarts so far, the kubelet's and the controller's own (#2045), against the limit.
        OOM kills that a relaunch with more memory handles do not count: neither the relaunch
        (it is in restartCount all the same) nor the kubelet's in-place restarts of the
        OOMKilled pod with the old limit, before or while the relaunch deletes it."""
        own = max(0, (self.status.get("restartCount") or 0) - oom.relaunches(self.oom_memory))
        kubelet = 0
        for rtype in self.types:
            if self.specs[rtype].restart_policy == "Never":
                continue
            for pod in self.pods.of_type(rtype):  # a duplicate's restarts count too
                status = pod.get("status") or {}
                if status.get("phase") != "Running":
                    continue
                if self.is_oom_relaunched(pod):
                    continue
                for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
                    kubelet += cs.get("restartCount") or 0
        used = kubelet + own
        if used > 0 if limit == 0 else used >= limit:
            return True
        failed_before = sum((s or {}).get("failed") or 0 for s in (self.old_status.get("replicaStatuses") or {}).values())
        failed_now = sum(rc.failed for rc in counts.values())
        all_active = sum(rc.active for rc in counts.values()) == sum(self.specs[t].replicas or 0 for t in self.types)
        return failed_now > failed_before and not all_active and own + 1 > limit

    def deadline_requeue(self) -> None:
        deadline = self.run_policy.active_deadline_seconds
        started = parse_time(self.status.get("startTime"))
        if deadline is not None and started is not None:
            self.requeue.append(deadline - (self.now - started).total_seconds())

    def ttl(self) -> None:
        ttl = self.run_policy.ttl_seconds_after_finished
        completed = parse_time(self.status.get("completionTime"))
        if ttl is None or completed is None:
            return
        left = (completed - self.now).total_seconds() + ttl
        if left <= 0:
            self.plan.delete_job = True
            self.plan.metrics.append("deleted")
        else:
            self.requeue.append(left)


def exit_code(pod: dict[str, Any], container: str) -> int:
    """The framework container's exit code, or the references' placeholder 0xBEEF."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is not None and terminated.get("exitCode") is not None:
                code: int = terminated["exitCode"]
                return code
    return UNKNOWN_EXIT_CODE


def node_of(pod: dict[str, Any]) -> str:
    return (pod.get("spec") or {}).get("nodeName") or "(none)"


def failure_cause(pod: dict[str, Any], code: int) -> str:
    """Which way a Failed pod went and where, for the Event of its replacement."""
    status = pod.get("status") or {}
    reasons = [status.get("reason")]
    for cs in status.get("containerStatuses") or []:
        reasons.append(((cs.get("state") or {}).get("terminated") or {}).get("reason"))
    why = next((r for r in reasons if r), None)
    exited = "no exit code" if code == UNKNOWN_EXIT_CODE else f"exit code {code}"
    return f"failed with {exited}" + (f" ({why})" if why else "") + f" on node {node_of(pod)}"


def _typed_ref(obj: dict[str, Any], kind: str, api_version: str = "v1", *, force: bool = False,
               as_observed: bool = False, cause: Optional[str] = None, grace_seconds: Optional[int] = None) -> ObjectRef:
    """A reference to an observed object; items of a list response carry no apiVersion/kind."""
    typed = {**obj, "apiVersion": obj.get("apiVersion") or api_version, "kind": obj.get("kind") or kind}
    return ref(typed, force=force, as_observed=as_observed, cause=cause, grace_seconds=grace_seconds)
