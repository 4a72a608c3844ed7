"""MSJob (mindspore.gitee.com/v1): the rules of MindSpore's ms-operator.

Pods get MindSpore's dynamic-cluster environment (msjob-mindspore.md §2.5) in their
``mindspore`` containers; only the Scheduler gets a Service, a ClusterIP one whose address
the other pods receive as ``MS_SCHED_HOST``. Unlike the reference, pods are created only
once that Service and its ClusterIP are known, so no pod ever starts without its
environment (§2.13.1). Pods with several devices run one process per device, as msrun and
the Ascend launchers do: they get ``MS_LOCAL_WORKER`` and ``MS_WORKER_NUM`` counts processes.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from trainctl.api import constants as c
from trainctl.api import kinds
from trainctl.api.mindspore import MSJob
from trainctl.api.replicas import default_container
from trainctl.controller.frameworks.accelerators import devices_per_pod
from trainctl.controller.frameworks.base import (
    ConditionChange,
    EnvContext,
    EnvFactory,
    Framework,
    JobFacts,
    env,
    env_from_field,
)

SCHEDULER = "Scheduler"
PS = "PS"
WORKER = "Worker"
# MS_ROLE's value for each replica type.
ROLES = {SCHEDULER: "MS_SCHED", PS: "MS_PSERVER", WORKER: "MS_WORKER"}
# kubeflow/common v0.4.1: signals and 138 (user-defined) are worth a retry; the rest is not.
RETRYABLE_EXIT_CODES = frozenset({130, 137, 138, 143})


def worker_devices(job: MSJob, reference_env: bool) -> int:
    """Devices per Worker pod when there is more than one (one process each), else 0."""
    worker = job.spec.ms_replica_specs.get(WORKER)
    if worker is None or reference_env:
        return 0
    devices = devices_per_pod(default_container(worker.template, c.MINDSPORE_CONTAINER))
    return devices if devices > 1 else 0


class MindSporeFramework(Framework[MSJob]):
    job_kind = kinds.MSJOB
    restart_policy_event = "SettedPodTemplateRestartPolicy"
    scheduler_name_event = "SettedPodTemplateSchedulerName"
    limit_failure_reason = "JobFailed"
    restarting_message = "MSJob {name} is restarting because {rtype} replica(s) failed."
    index_labels = (c.LABEL_REPLICA_INDEX, c.LEGACY_LABEL_REPLICA_INDEX)
    volcano_default_queue = None  # ms-operator copies schedulingPolicy.queue, even when empty

    def base_labels(self, job_name: str) -> dict[str, str]:
        labels = super().base_labels(job_name)
        labels[c.LEGACY_LABEL_GROUP_NAME] = c.MINDSPORE_GROUP
        labels[c.LEGACY_LABEL_JOB_NAME] = job_name.replace("/", "-")
        return labels

    def replica_labels(self, job_name: str, rtype: str, index: int) -> dict[str, str]:
        labels = super().replica_labels(job_name, rtype, index)
        labels[c.LEGACY_LABEL_REPLICA_TYPE] = rtype.lower()
        labels[c.LEGACY_LABEL_REPLICA_INDEX] = str(index)
        return labels

    def service_cluster_ip(self, rtype: str) -> Optional[str]:
        return "" if rtype == SCHEDULER else None

    def env_service(self, job: MSJob) -> Optional[str]:
        return SCHEDULER if SCHEDULER in job.spec.ms_replica_specs else None

    def env_containers(self, template: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
        return lambda container: container.get("name") == c.MINDSPORE_CONTAINER

    def env_factory(self, job: MSJob, rtype: str, ctx: EnvContext) -> Optional[EnvFactory]:
        specs = job.spec.ms_replica_specs
        service = ctx.env_service
        if service is None:
            if self.env_service(job) is not None:
                return None  # the Scheduler Service comes first
            return lambda index: []  # no Scheduler, no MindSpore env (standalone jobs)
        cluster_ip = (service.get("spec") or {}).get("clusterIP")
        port = next(
            (p.get("port") for p in (service.get("spec") or {}).get("ports") or [] if p.get("name") == c.MINDSPORE_PORT_NAME),
            None,
        )
        if not cluster_ip or cluster_ip == "None" or port is None:
            return None
        devices = worker_devices(job, ctx.reference_env)
        workers = (specs[WORKER].replicas or 0) if WORKER in specs else 0
        host = (
            env_from_field(c.MS_SCHED_HOST, "status.podIP") if rtype == SCHEDULER else env(c.MS_SCHED_HOST, cluster_ip)
        )
        out = [
            host,
            env_from_field(c.MS_NODE_ID, "metadata.name"),
            env(c.MS_SCHED_PORT, port),
            env(c.MS_SERVER_NUM, (specs[PS].replicas or 0) if PS in specs else 0),
            env(c.MS_WORKER_NUM, workers * devices if devices else workers),
            env(c.MS_ROLE, ROLES.get(rtype, "")),
        ]
        if devices and rtype == WORKER:
            out.append(env(c.MS_LOCAL_WORKER, devices))
        return lambda index: out

    def is_retryable(self, exit_code: int) -> bool:
        return exit_code in RETRYABLE_EXIT_CODES

    def evaluate(self, facts: JobFacts[MSJob]) -> list[ConditionChange]:
        job, name, ns = facts.job, facts.name, facts.namespace
        specs = job.spec.ms_replica_specs
        restarting = c.CONDITION_RESTARTING in facts.true_conditions
        out: list[ConditionChange] = []
        for rtype in self.ordered_types(job):
            counts = facts.counts[rtype]
            if rtype == WORKER:
                expected = (specs[rtype].replicas or 0) - counts.succeeded
                if expected == 0 or (facts.lead_completed and job.spec.success_policy != c.MS_SUCCESS_POLICY_ALL_WORKERS):
                    out.append(self.change(c.CONDITION_SUCCEEDED, f"MSJob {ns}/{name} successfully completed."))
                elif counts.active > 0 and not facts.restarted:
                    # After a restart in this pass the job is Restarting, not Running: the
                    # reference flips to Running here and then fails the job (§2.13.6).
                    out.append(self.change(c.CONDITION_RUNNING, f"MSJob {ns}/{name} is running.", None))
            if counts.failed > 0:
                if restarting or facts.restarted:
                    continue
                if job.spec.enable_dynamic_worker and rtype == WORKER:
                    continue
                message = f"MSJob {ns}/{name} has failed because {counts.failed} {rtype} replica(s) failed."
                out.append(self.change(c.CONDITION_FAILED, message))
        return out
