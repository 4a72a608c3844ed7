"""Pods and Services of one replica type, built from the replica's template.

A job with thousands of replicas creates thousands of pods from one template, so the
template is prepared once per replica type (restart policy, init containers, scheduler,
annotations) and each pod shares the parts it does not change. Only the metadata, the
container list and the containers that receive environment variables are new per pod.
Objects in a Plan are read-only; nothing may mutate them after the reconcile returns.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from trainctl.api import constants as c
from trainctl.api.common import Job, ReplicaSpec
from trainctl.api.replicas import default_container
from trainctl.controller.frameworks.accelerators import ascend_visible_devices_env
from trainctl.controller.frameworks.base import EnvFactory, Framework
from trainctl.controller.reconcile.children import JobRef, replica_name
from trainctl.controller.reconcile.config import VOLCANO
from trainctl.controller.reconcile.plan import Event
from trainctl.controller.reconcile.rendezvous import with_closed_rendezvous_reported

ANNOTATION_VOLCANO_GROUP = "scheduling.k8s.io/group-name"
ANNOTATION_VOLCANO_TASK = "volcano.sh/task-spec"
LABEL_SCHEDULER_PLUGINS_GROUP = "scheduling.x-k8s.io/pod-group"


def pod_restart_policy(policy: Optional[str]) -> str:
    """The pod-level policy: ``ExitCode`` is the controller's job, so the kubelet gets Never."""
    return "Never" if policy == "ExitCode" else (policy or "Never")


class PodFactory:
    """Builds pod ``index`` of one replica type."""

    def __init__(
        self,
        *,
        framework: Framework[Any],
        job: Job,
        job_ref: JobRef,
        rtype: str,
        spec: ReplicaSpec,
        env_factory: EnvFactory,
        gang: Optional[str],
        init_image: str,
        init_max_tries: int,
        ascend_annotation_env: bool,
        report_closed_rendezvous: bool = False,
        node_check: Optional[Callable[[dict[str, Any], int], dict[str, Any]]] = None,
    ):
        self.framework, self.job, self.job_ref, self.rtype = framework, job, job_ref, rtype
        self.env_factory = env_factory
        job_name = job_ref.name
        template = spec.template or {}
        meta = template.get("metadata") or {}
        tspec = template.get("spec") or {}
        self.warnings: list[Event] = []

        # Operator labels win over template labels with the same key (spec §3.2).
        self.labels = {**(meta.get("labels") or {}), **framework.replica_labels(job_name, rtype, 0)}
        annotations = dict(meta.get("annotations") or {})
        self.finalizers = meta.get("finalizers")
        pod_spec = dict(tspec)
        if "restartPolicy" in tspec:
            self.warnings.append(
                Event(
                    "Warning",
                    framework.restart_policy_event,
                    "Restart policy in pod template will be overwritten by restart policy in replica spec",
                )
            )
        pod_spec["restartPolicy"] = pod_restart_policy(spec.restart_policy)
        init = framework.init_containers(job, rtype, job_name, init_image, init_max_tries)
        if init:
            pod_spec["initContainers"] = list(tspec.get("initContainers") or []) + init
        self.gang_label: Optional[str] = None
        if gang:
            if not tspec.get("schedulerName"):
                pod_spec["schedulerName"] = gang
            elif tspec["schedulerName"] != gang:
                self.warnings.append(
                    Event(
                        "Warning",
                        framework.scheduler_name_event,
                        "Another scheduler is specified when gang-scheduling is enabled and it will not be overwritten",
                    )
                )
            if gang == VOLCANO:
                annotations[ANNOTATION_VOLCANO_GROUP] = job_name
                annotations[ANNOTATION_VOLCANO_TASK] = rtype.lower()
            else:
                self.gang_label = job_name
        self.annotations = annotations
        self.pod_spec = pod_spec
        wants_env = framework.env_containers(template)
        containers = tspec.get("containers") or []
        if report_closed_rendezvous:
            containers = [with_closed_rendezvous_reported(container) if container.get("name") == framework.container
                          else container for container in containers]
        main = next((container for container in containers if container.get("name") == framework.container), None)
        # The node check's init container of pod ``index`` (it differs by index), if the job has one.
        self.node_check = (lambda index: node_check(main, index)) if node_check is not None and main is not None else None
        self.containers = [
            (
                container,
                wants_env(container),
                ascend_visible_devices_env(container) if ascend_annotation_env else None,
                framework.advisory_env.intersection(e.get("name") for e in container.get("env") or []),
            )
            for container in containers
        ]

    def build(self, index: int) -> dict[str, Any]:
        env = self.env_factory(index)
        containers = []
        for container, inject, extra, user_set in self.containers:
            if not (inject and env) and extra is None:
                containers.append(container)
                continue
            container = dict(container)
            container_env = list(container.get("env") or [])
            if inject:
                container_env += [e for e in env if e["name"] not in user_set] if user_set else env
            if extra is not None:
                container_env.append(extra)
            container["env"] = container_env
            containers.append(container)
        labels = dict(self.labels)
        position = str(index)
        for key in self.framework.index_labels:
            labels[key] = position
        if self.framework.is_master_role(self.job, self.rtype, index):
            labels[c.LABEL_JOB_ROLE] = "master"
        if self.gang_label:
            labels[LABEL_SCHEDULER_PLUGINS_GROUP] = self.gang_label
        metadata: dict[str, Any] = {
            "name": replica_name(self.job_ref.name, self.rtype, index),
            "namespace": self.job_ref.namespace,
            "labels": labels,
        }
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        if self.finalizers:
            metadata["finalizers"] = list(self.finalizers)
        metadata["ownerReferences"] = [self.job_ref.owner]
        spec = dict(self.pod_spec)
        spec["containers"] = containers
        if self.node_check is not None:
            spec["initContainers"] = list(spec.get("initContainers") or []) + [self.node_check(index)]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def service_ports(framework: Framework[Any], spec: ReplicaSpec) -> list[dict[str, Any]]:
    """Every named port of the framework container, as ``{name, port}`` (spec §3.6)."""
    container = default_container(spec.template, framework.container)
    return [
        {"name": port["name"], "port": port["containerPort"]}
        for port in (container or {}).get("ports") or []
        if port.get("name") and port.get("containerPort") is not None
    ]


def build_service(
    framework: Framework[Any],
    *,
    job_ref: JobRef,
    rtype: str,
    index: int,
    ports: list[dict[str, Any]],
    cluster_ip: str,
) -> dict[str, Any]:
    labels = framework.replica_labels(job_ref.name, rtype, index)
    spec: dict[str, Any] = {"selector": labels, "ports": ports}
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": job_ref.child_metadata(replica_name(job_ref.name, rtype, index), labels=labels),
        "spec": spec,
    }
