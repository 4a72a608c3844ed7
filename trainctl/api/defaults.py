"""Defaulting, exactly as the reference operators do it, as a pure function.

The references default in memory at every reconcile and never write defaults back, so a
stored job looks the way the user wrote it. trainctl does the same: ``default_job`` returns
a defaulted copy and leaves its input untouched. The steps and their order follow
training-operator's ``SetDefaults_PyTorchJob`` and ms-operator's ``SetDefaults_MSJob``
(see docs/compatibility.md).
"""

from __future__ import annotations

from typing import Any, Union

from trainctl.api import constants as c
from trainctl.api.common import ReplicaSpec, RunPolicy
from trainctl.api.kinds import MSJOB, PYTORCHJOB, JobKind
from trainctl.api.mindspore import MSJob
from trainctl.api.pytorch import PyTorchJob

Job = Union[PyTorchJob, MSJob]


def _copy(job: Job) -> Job:
    """A deep copy. Re-validating a dump is about 3x faster than ``model_copy(deep=True)``,
    and the dump builds fresh dicts for pod templates, so defaulting never reaches the
    caller's objects."""
    return type(job).model_validate(job.model_dump(by_alias=True, exclude_unset=True))


def default_container(template: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The container a framework talks to: the one called ``name``, else the first one."""
    containers = ((template or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if isinstance(container, dict) and container.get("name") == name:
            return container
    if containers and isinstance(containers[0], dict):
        return containers[0]
    return None


def _with_port(template: dict[str, Any] | None, container_name: str, port_name: str, port: int) -> dict[str, Any] | None:
    """The template with the named port on the framework container; new dicts where it changes.

    Copy on write: the template may share its dicts with the object the job was parsed from.
    """
    container = default_container(template, container_name)
    if template is None or container is None:
        return template
    ports = container.get("ports")
    if ports is not None and any(isinstance(p, dict) and p.get("name") == port_name for p in ports):
        return template
    ported = {**container, "ports": [*(ports or []), {"name": port_name, "containerPort": port}]}
    spec = template["spec"]
    containers = [ported if item is container else item for item in spec["containers"]]
    return {**template, "spec": {**spec, "containers": containers}}


def _normalise_replica_keys(specs: dict[str, ReplicaSpec], canonical: tuple[str, ...]) -> dict[str, ReplicaSpec]:
    """``worker`` → ``Worker``: only the first key folding to a canonical name is renamed."""
    by_fold = {name.lower(): name for name in canonical}
    out: dict[str, ReplicaSpec] = {}
    for key, spec in specs.items():
        target = by_fold.get(key.lower(), key)
        out[target if target not in out else key] = spec
    return out


def _default_replicas(specs: dict[str, ReplicaSpec], kind: JobKind) -> dict[str, ReplicaSpec]:
    """Keys folded to the kind's spelling; replicas, restart policy and port filled in."""
    specs = _normalise_replica_keys(specs, kind.replica_types)
    for spec in specs.values():
        if spec is None:
            continue
        if spec.replicas is None:
            spec.replicas = 1
        if not spec.restart_policy:
            spec.restart_policy = kind.default_restart_policy
        if spec.template is not None:
            spec.template = _with_port(spec.template, kind.container, kind.port_name, kind.default_port)
    return specs


def default_pytorchjob(job: PyTorchJob) -> PyTorchJob:
    spec = job.spec
    if spec.run_policy is None:
        spec.run_policy = RunPolicy()
    if spec.run_policy.clean_pod_policy is None:
        spec.run_policy.clean_pod_policy = "None"
    spec.pytorch_replica_specs = _default_replicas(spec.pytorch_replica_specs, PYTORCHJOB)
    elastic = spec.elastic_policy
    if elastic is not None:
        if elastic.min_replicas is None and elastic.max_replicas is not None:
            elastic.min_replicas = elastic.max_replicas
        elif elastic.max_replicas is None and elastic.min_replicas is not None:
            elastic.max_replicas = elastic.min_replicas
        elif elastic.min_replicas is None and elastic.max_replicas is None:
            worker = spec.pytorch_replica_specs.get("Worker")
            if worker is not None and worker.replicas is not None:
                elastic.min_replicas = elastic.max_replicas = worker.replicas
    if spec.nproc_per_node is None and (elastic is None or elastic.n_proc_per_node is None):
        spec.nproc_per_node = c.PYTORCH_DEFAULT_NPROC
    return job


def default_msjob(job: MSJob) -> MSJob:
    spec = job.spec
    if spec.run_policy is None:
        spec.run_policy = RunPolicy()
    if spec.run_policy.clean_pod_policy is None:
        spec.run_policy.clean_pod_policy = c.MINDSPORE_DEFAULT_CLEAN_POD_POLICY
    if spec.success_policy is None:
        spec.success_policy = ""
    spec.ms_replica_specs = _default_replicas(spec.ms_replica_specs, MSJOB)
    return job


def default_job(job: Job, *, in_place: bool = False) -> Job:
    """A defaulted copy of a PyTorchJob or MSJob; the input is not modified.

    ``in_place``: default ``job`` itself, for a caller that owns the model it just parsed
    (the reconcile): no copy. Pod templates are still never changed in place, since they
    share dicts with the object the job was parsed from.
    """
    if not isinstance(job, (PyTorchJob, MSJob)):
        raise TypeError(f"not a training job: {type(job).__name__}")
    if not in_place:
        job = _copy(job)
    if isinstance(job, PyTorchJob):
        return default_pytorchjob(job)
    return default_msjob(job)
