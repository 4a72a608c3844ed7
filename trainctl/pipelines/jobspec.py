"""A PyTorchJob or MSJob manifest from the few parameters a pipeline author usually sets.

The components accept either a whole manifest or these parameters: image, command,
replicas, elastic bounds, processes per node and resources (CPU, memory, NVIDIA GPUs as
``nvidia.com/gpu``, Ascend NPUs as ``huawei.com/Ascend910``). The shapes follow the
references: a PyTorchJob is one Master plus ``replicas - 1`` Workers, or Workers only when
elastic; an MSJob is its Workers plus the Scheduler MindSpore needs once there are two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainctl.api import constants as c
from trainctl.api.kinds import MSJOB, PYTORCHJOB

RESOURCE_ASCEND_910 = f"{c.RESOURCE_ASCEND_PREFIX}910"


@dataclass
class JobParameters:
    image: str
    command: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    replicas: int = 1
    min_replicas: int = 0
    max_replicas: int = 0
    nproc_per_node: str = ""
    cpu: str = ""
    memory: str = ""
    gpus: int = 0
    npus: int = 0

    def problems(self) -> list[str]:
        found = []
        if not self.image:
            found.append("image: required when no manifest is given")
        if self.replicas < 1:
            found.append(f"replicas: must be at least 1, got {self.replicas}")
        if self.min_replicas < 0 or self.max_replicas < 0:
            found.append("min_replicas, max_replicas: must not be negative")
        if self.max_replicas and not (0 < (self.min_replicas or 1) <= self.max_replicas):
            found.append(f"min_replicas ({self.min_replicas}) must be between 1 and max_replicas ({self.max_replicas})")
        if self.min_replicas and not self.max_replicas:
            found.append("max_replicas: required when min_replicas is set")
        if self.gpus < 0 or self.npus < 0:
            found.append("gpus, npus: must not be negative")
        return found


def _container(name: str, p: JobParameters) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": p.image}
    if p.command:
        container["command"] = list(p.command)
    if p.args:
        container["args"] = list(p.args)
    limits: dict[str, Any] = {}
    if p.cpu:
        limits["cpu"] = p.cpu
    if p.memory:
        limits["memory"] = p.memory
    if p.gpus:
        limits[c.RESOURCE_NVIDIA_GPU] = p.gpus
    if p.npus:
        limits[RESOURCE_ASCEND_910] = p.npus
    if limits:
        # Extended resources must be requested as much as limited; CPU/memory requests
        # default to their limits too.
        container["resources"] = {"limits": limits, "requests": dict(limits)}
    return container


def _replica(name: str, p: JobParameters, replicas: int, restart_policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas, "template": {"spec": {"containers": [_container(name, p)]}}}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def _metadata(name: str, kind: str) -> dict[str, Any]:
    return {"name": name} if name else {"generateName": f"{kind.lower()}-"}


def pytorchjob(name: str, p: JobParameters) -> dict[str, Any]:
    """A PyTorchJob: Master + (replicas - 1) Workers, or elastic Workers between the bounds."""
    spec: dict[str, Any]
    if p.max_replicas:
        low = p.min_replicas or p.max_replicas
        spec = {
            "elasticPolicy": {"minReplicas": low, "maxReplicas": p.max_replicas},
            PYTORCHJOB.replica_specs_field: {"Worker": _replica(PYTORCHJOB.container, p, min(max(p.replicas, low), p.max_replicas))},
        }
    else:
        specs = {"Master": _replica(PYTORCHJOB.container, p, 1)}
        if p.replicas > 1:
            specs["Worker"] = _replica(PYTORCHJOB.container, p, p.replicas - 1)
        spec = {PYTORCHJOB.replica_specs_field: specs}
    if p.nproc_per_node:
        spec["nprocPerNode"] = p.nproc_per_node
    spec["runPolicy"] = {"cleanPodPolicy": "None"}
    return {"apiVersion": PYTORCHJOB.api_version, "kind": PYTORCHJOB.kind, "metadata": _metadata(name, PYTORCHJOB.kind), "spec": spec}


def msjob(name: str, p: JobParameters) -> dict[str, Any]:
    """An MSJob: ``replicas`` Workers, plus one Scheduler when there is more than one Worker."""
    specs: dict[str, Any] = {}
    if p.replicas > 1:
        scheduler = JobParameters(image=p.image, command=p.command, args=p.args, cpu=p.cpu, memory=p.memory)
        specs["Scheduler"] = _replica(MSJOB.container, scheduler, 1)
    specs["Worker"] = _replica(MSJOB.container, p, p.replicas)
    return {
        "apiVersion": MSJOB.api_version,
        "kind": MSJOB.kind,
        "metadata": _metadata(name, MSJOB.kind),
        "spec": {"runPolicy": {"cleanPodPolicy": c.MINDSPORE_DEFAULT_CLEAN_POD_POLICY}, MSJOB.replica_specs_field: specs},
    }


BUILDERS = {PYTORCHJOB.kind: pytorchjob, MSJOB.kind: msjob}
