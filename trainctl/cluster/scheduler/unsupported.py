"""The pod fields that decide placement in kube-scheduler and that this scheduler does not
implement: a pod that uses one stays Pending and says which, instead of being placed as if
the field were not there.

- ``spec.resourceClaims``: dynamic resource allocation (no ResourceClaims here);
- ``spec.volumes[i].persistentVolumeClaim`` / ``.ephemeral``: volume binding and volume
  topology (no PersistentVolumes here);
- ``spec.resources``: pod-level requests and limits (requests here are the containers').

Preemption (``spec.priority`` above the priority of pods in the way) is implemented
(:mod:`.preemption`). ``spec.schedulingGates`` is honoured: a gated pod is not scheduled
until its gates are removed.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

NOT_IMPLEMENTED = "is not implemented by this scheduler"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def unsupported_fields(pod: Obj) -> list[str]:
    """The paths of the placement fields ``pod`` sets that this scheduler cannot honour."""
    spec = pod.get("spec") or {}
    found = [name for name in ("resourceClaims", "resources") if spec.get(name)]
    paths = [f"spec.{name}" for name in found]
    for i, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, dict):
            paths += [f"spec.volumes[{i}].{source}" for source in ("persistentVolumeClaim", "ephemeral") if volume.get(source)]
    return paths


def refusal(paths: list[str]) -> str:
    """kube-scheduler's PreFilter message for them: ``spec.x is not implemented by this scheduler``."""
    return ", ".join(f"{path} {NOT_IMPLEMENTED}" for path in paths)


def is_gated(pod: Obj) -> bool:
    """``spec.schedulingGates`` not empty: kube-scheduler does not try to place the pod."""
    return bool((pod.get("spec") or {}).get("schedulingGates"))
