"""A training job's manifest from the few parameters a pipeline author usually sets.

The components accept either a whole manifest or these parameters: image, command,
replicas, elastic bounds, processes per node and resources (CPU, memory, NVIDIA GPUs as
``nvidia.com/gpu``, Ascend NPUs as ``huawei.com/Ascend910``). Each kind lays its job out
(``JobKind.layout``), following the references: a PyTorchJob is one Master plus
``replicas - 1`` Workers, or Workers only when elastic; an MSJob is its Workers plus the
Scheduler MindSpore needs once there are two. This module makes the containers and the
manifest around the kind's spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from trainctl.api import constants as c
from trainctl.api.jobkind import JobKind, Parameters

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
    # The framework container's named port (pytorchjob-port, msjob-port); 0 keeps the kind's default.
    port: int = 0

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
        if not 0 <= self.port <= 65535:
            found.append(f"port: must be between 1 and 65535 (0: the kind's default), got {self.port}")
        return found


def _container(kind: JobKind, p: JobParameters) -> dict[str, Any]:
    container: dict[str, Any] = {"name": kind.container, "image": p.image}
    if p.port:
        container["ports"] = [{"name": kind.port_name, "containerPort": p.port}]
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


def _replica(kind: JobKind, p: JobParameters, replicas: int, restart_policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas, "template": {"spec": {"containers": [_container(kind, p)]}}}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def _metadata(name: str, kind: str) -> dict[str, Any]:
    return {"name": name} if name else {"generateName": f"{kind.lower()}-"}


class NoLayout(ValueError):
    """The kind lays out no job from parameters: it needs a manifest."""


def build(kind: JobKind, name: str, p: JobParameters) -> dict[str, Any]:
    """The job of ``kind`` the parameters describe, laid out as the kind lays out a job."""
    if kind.layout is None:
        raise NoLayout(f"{kind.kind} is launched from a manifest only")
    coordinator = replace(p, gpus=0, npus=0)

    def replica(replicas: int, accelerators: bool) -> dict[str, Any]:
        return _replica(kind, p if accelerators else coordinator, replicas)

    sizes = Parameters(p.replicas, p.min_replicas, p.max_replicas, p.nproc_per_node)
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": _metadata(name, kind.kind), "spec": kind.layout(sizes, replica)}
