"""Replica specs as every kind defaults them, and the container a framework talks to.

Both references default the same way before their kind-specific steps: replica-type keys
folded to the kind's spelling, ``replicas`` 1, the kind's restart policy, the framework's
named port on its container, a run policy with the kind's clean-pod policy. Each kind's
defaulting (in its module) is those steps plus its own.
"""

from __future__ import annotations

from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.api.common import ReplicaSpec, RunPolicy
from trainctl.api.jobkind import JobKind


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


def default_replicas(specs: dict[str, ReplicaSpec], kind: JobKind) -> dict[str, ReplicaSpec]:
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


def default_run_policy(run_policy: Optional[RunPolicy], clean_pod_policy: c.CleanPodPolicy) -> RunPolicy:
    """The job's run policy, present, with the kind's clean-pod policy when it names none."""
    if run_policy is None:
        run_policy = RunPolicy()
    if run_policy.clean_pod_policy is None:
        run_policy.clean_pod_policy = clean_pod_policy
    return run_policy
