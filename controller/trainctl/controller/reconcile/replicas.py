"""The replicas in a pass: their Services and pods by index, and the restart policy.

Per replica type the job asks for a number of replicas; this step creates the missing
indices (lowest first, within the pass's create budget), deletes surplus ones (scale-down:
the highest indices go; an elastic job's chosen ones, ``members``) and restarts failed pods per restartPolicy (spec §3.8, §5.5): a
Failed pod is deleted and recreated under the same name once gone. Pods the controller
replaces for its own reasons (an OOM kill, a lost node, a closed rendezvous) are handed to
those features and counted neither up nor failed.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any, Optional

from trainctl.controller.frameworks.base import UNKNOWN_EXIT_CODE, ConditionChange, EnvContext, EnvFactory, ReplicaCounts
from trainctl.controller.reconcile import disrupted, hang, members, node_health, relaunch, rendezvous
from trainctl.controller.reconcile.children import ChildIndex, exit_code, is_terminating, node_of, replica_name
from trainctl.controller.reconcile.config import VOLCANO
from trainctl.controller.reconcile.pods import PodFactory, build_service, service_ports
from trainctl.controller.reconcile.state import Pass

# Restart policies under which the controller recreates a pod whose phase is Failed.
_RECREATE_ALWAYS = ("OnFailure", "Always")


def env_context(p: Pass) -> EnvContext:
    """What the kind's environment of a replica pod is made from."""
    ctx = EnvContext(name=p.name, namespace=p.namespace, uid=p.uid, reference_env=p.reference_env, gang_scheduler=p.gang)
    if p.store is not None:
        ctx = replace(ctx, rendezvous_host=rendezvous.store_name(p.name), rendezvous_conf=p.config.rendezvous_conf())
    service_type = p.framework.env_service(p.job)
    if service_type is not None:
        ctx = replace(ctx, env_service=p.services.by_name.get(replica_name(p.name, service_type, 0)))
    return ctx


def reconcile_all(p: Pass, ctx: Optional[EnvContext], *, restart: bool) -> tuple[int, list[str]]:
    """Services and pods of every replica type; the restarts and the types restarted.

    ``ctx`` None: create no pod yet; ``restart`` False: leave failed pods as they are.
    """
    restarts, restarted = 0, []
    for rtype in p.types:
        if p.framework.service_cluster_ip(rtype) is not None:
            reconcile_services(p, rtype, members.kept(p, rtype))
        env_factory = None if ctx is None else p.framework.env_factory(p.job, rtype, ctx)
        count = reconcile_pods(p, rtype, env_factory, restart=restart)
        if count:
            restarts += count
            restarted.append(rtype)
    return restarts, restarted


def exit_code_failures(p: Pass) -> list[ConditionChange]:
    """The Failed conditions that non-retryable ``ExitCode`` exits call for, one per type."""
    fw, out = p.framework, []
    for rtype in p.types:
        change = fw.permanent_failure(p.name, rtype) if p.specs[rtype].restart_policy == "ExitCode" else None
        if change is None:  # MSJob fails through its own rules
            continue
        duplicated = p.pods.duplicated(rtype)
        if any(index not in duplicated and not is_terminating(pod) and index in members.kept(p, rtype)
               and (pod.get("status") or {}).get("phase") == "Failed" and not fw.is_retryable(exit_code(pod, fw.container))
               and not rendezvous.closed_out(p, pod) and not p.node_check.handles(pod) and not disrupted.is_disrupted(p, pod)
               for index, pod in p.pods.slots(rtype).items()):
            out.append(change)
    return out


def reconcile_pods(p: Pass, rtype: str, env_factory: Optional[EnvFactory], *, restart: bool = True) -> int:
    """Create missing indices, delete surplus ones, restart failed pods (spec §3.8, §5.5).

    Returns how many failed pods were deleted to be recreated. ``env_factory`` None:
    create nothing yet; ``restart`` False: leave failed pods as they are.
    """
    fw, spec = p.framework, p.specs[rtype]
    kept = members.kept(p, rtype)
    restarts = 0
    if env_factory is not None:
        create_pods(p, rtype, env_factory, kept)
    slots, duplicated = p.pods.slots(rtype), p.pods.duplicated(rtype)
    for index in sorted(slots):  # ints sort fast; deletes go lowest index first
        pod = slots[index]
        if index in duplicated or is_terminating(pod) or p.is_lost(pod) or p.is_deleting(pod):
            continue  # duplicates on one index are left alone, as the reference does
        if p.node_check.handles(pod) and index in kept:
            continue  # its node check failed: node_health replaces it
        if index not in kept:
            p.delete(pod, with_service=False)  # scale-down: the indices no longer kept go
            continue
        if restart and relaunch.relaunch_oom_killed(p, rtype, pod):
            restarts += 1
            continue
        if restart and rendezvous.closed_out(p, pod):
            rendezvous.rejoin_closed_out(p, pod)
            continue
        if disrupted.is_disrupted(p, pod):
            disrupted.replace_failed(p, pod)  # an elastic job's: a static job's restarted already
            continue
        if not restart or (pod.get("status") or {}).get("phase") != "Failed":
            continue
        code = exit_code(pod, fw.container)
        if spec.restart_policy in _RECREATE_ALWAYS or (spec.restart_policy == "ExitCode" and fw.is_retryable(code)):
            # recreated under the same name once gone
            p.delete(pod, with_service=False, cause=f"to be recreated: {failure_cause(pod, code)}")
            restarts += 1
    return restarts


def create_pods(p: Pass, rtype: str, env_factory: EnvFactory, kept: Collection[int]) -> None:
    """Create missing pods of the ``kept`` indices, lowest first, within what is left of this pass's budget."""
    missing = p.within_budget("Pod", _missing(p.pods, rtype, kept, p.create_budget["Pod"] + 1))
    if not missing:
        return
    factory = pod_factory(p, rtype, env_factory)
    for warning in factory.warnings:
        p.warnings.setdefault(warning.reason, warning)
    for index in missing:
        p.plan.creates.append(hang.with_fault_handler(p, relaunch.with_grown_memory(p, rtype, index, factory.build(index))))


def pod_factory(p: Pass, rtype: str, env_factory: EnvFactory) -> PodFactory:
    return PodFactory(
        framework=p.framework,
        job=p.job,
        job_ref=p.job_ref,
        rtype=rtype,
        spec=p.specs[rtype],
        env_factory=env_factory,
        gang=p.gang,
        init_image=p.config.init_container_image,
        init_max_tries=p.config.init_container_max_tries,
        ascend_annotation_env=p.gang == VOLCANO and not p.reference_env,
        report_closed_rendezvous=p.store is not None,
        node_check=node_health.container_factory(p, rtype),
    )


def reconcile_services(p: Pass, rtype: str, kept: Collection[int]) -> None:
    """Create missing Services of the ``kept`` indices within the pass's budget; delete the others."""
    fw = p.framework
    missing = p.within_budget("Service", _missing(p.services, rtype, kept, p.create_budget["Service"] + 1))
    if missing:
        ports = service_ports(fw, p.specs[rtype])
        cluster_ip = fw.service_cluster_ip(rtype) or ""
        p.plan.creates.extend(
            build_service(fw, job_ref=p.job_ref, rtype=rtype, index=index, ports=ports, cluster_ip=cluster_ip)
            for index in missing
        )
    slots, duplicated = p.services.slots(rtype), p.services.duplicated(rtype)
    for index in sorted(slots):
        if index not in kept and index not in duplicated:
            p.delete(slots[index], kind="Service", with_service=False)


def _missing(index: ChildIndex, rtype: str, kept: Collection[int], limit: int) -> list[int]:
    """Up to ``limit`` kept indices with no object, lowest first (``0 … n-1``: without walking them all)."""
    if isinstance(kept, range):
        return index.missing(rtype, len(kept), limit)
    return index.missing_of(rtype, kept, limit)


def count(p: Pass, rtype: str) -> ReplicaCounts:
    """Active, succeeded and failed pods of one type (spec §5.11; Pending is not counted)."""
    active = succeeded = failed = 0
    duplicated = p.pods.duplicated(rtype)
    for index, pod in p.pods.slots(rtype).items():
        if (index in duplicated or p.oom.handles(pod) or p.is_lost(pod) or rendezvous.closed_out(p, pod)
                or p.node_check.handles(pod) or hang.replaced(p, pod) or disrupted.is_disrupted(p, pod)):
            continue  # replaced (more memory, a lost node, a closed rendezvous, a failed node check, a hang) or taken away: neither up nor failed
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


def set_replica_statuses(p: Pass, counts: dict[str, ReplicaCounts]) -> None:
    statuses = {}
    for rtype in p.types:
        entry: dict[str, Any] = {}
        rc = counts[rtype]
        for key, value in (("active", rc.active), ("succeeded", rc.succeeded), ("failed", rc.failed)):
            if value:
                entry[key] = value
        selector = p.framework.scale_selector(p.name, rtype)
        if selector is not None:
            entry["selector"] = selector
        statuses[rtype] = entry
    p.status["replicaStatuses"] = statuses


def lead_completed(p: Pass) -> bool:
    """Whether pod 0 of the kind's lead replica type has succeeded with exit code 0."""
    lead = p.framework.job_kind.lead_replica(p.specs)
    pod = p.pods.slots(lead).get(0)
    if pod is None or 0 in p.pods.duplicated(lead) or (pod.get("status") or {}).get("phase") != "Succeeded":
        return False
    return exit_code(pod, p.framework.container) == 0


def failure_cause(pod: dict[str, Any], code: int) -> str:
    """Which way a Failed pod went and where, for the Event of its replacement."""
    status = pod.get("status") or {}
    reasons = [status.get("reason")]
    for cs in status.get("containerStatuses") or []:
        reasons.append(((cs.get("state") or {}).get("terminated") or {}).get("reason"))
    why = next((r for r in reasons if r), None)
    exited = "no exit code" if code == UNKNOWN_EXIT_CODE else f"exit code {code}"
    return f"failed with {exited}" + (f" ({why})" if why else "") + f" on node {node_of(pod)}"
