"""Out-of-memory relaunch: a replica killed as OOMKilled comes back with more memory.

A trainctl extension, opt-in per job (annotations ``trainctl.io/oom-memory-factor`` and
``trainctl.io/oom-memory-max``) or for every job (controller flags). The pod that ran out of
memory is replaced (whatever the restart policy: the kubelet would restart the container in
place with the same limit) by one whose framework container's memory limit and request are
multiplied by the factor, never above the maximum.

The job's spec is not the controller's to edit, so the memory each replica runs with lives in
the job's status (``status.oomMemory``, keyed like ``Worker-1``): the replacement is created
in a later pass, once the old pod is gone, and a controller restart must not forget it.
The new value is computed from the OOMKilled pod's own limit, so seeing that pod again in
another pass decides the same value: nothing grows twice for one kill.

A relaunch is a restart of the replica (``status.restartCount``), but OOM kills a relaunch
handles must not fail the job: the status counts the relaunches per replica, and
backoffLimit leaves them out. Once the maximum is reached, OOMs count as any failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

from trainctl.api import constants as c

OOM_KILLED = "OOMKilled"
# The grace period of the OOMKilled pod's delete. What runs in it, if anything, is the
# kubelet's restart in place at the limit that just failed: nothing worth the pod's own grace
# period, and a launcher that handles SIGTERM late (torchrun in a rendezvous) must not hold
# the replacement up for it. The pod still goes only once the kubelet has stopped it.
RELAUNCH_GRACE_SECONDS = 1
_MI = 1024 * 1024


def parse_memory(value: Any) -> Optional[int]:
    """Bytes of a memory quantity ("512Mi", "1G", 1048576), or None."""
    from kubernetes.utils.quantity import parse_quantity  # heavy import, only needed here

    if value is None:
        return None
    try:
        return int(math.ceil(parse_quantity(value)))
    except (ValueError, TypeError, ArithmeticError):
        return None


def format_memory(size: int) -> str:
    """A quantity for ``size`` bytes: Gi or Mi when exact, else bytes."""
    for unit, factor in (("Gi", 1024 * _MI), ("Mi", _MI)):
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


@dataclass(frozen=True)
class Policy:
    factor: float
    max_bytes: Optional[int]


def policy(
    annotations: dict[str, Any], factor: Optional[float], maximum: Optional[str]
) -> tuple[Optional[Policy], Optional[str]]:
    """The job's OOM policy (None: not opted in) and a problem with its annotations, if any."""
    factor_text = annotations.get(c.ANNOTATION_OOM_MEMORY_FACTOR)
    max_text = annotations.get(c.ANNOTATION_OOM_MEMORY_MAX, maximum)
    if factor_text is not None:
        try:
            factor = float(factor_text)
        except ValueError:
            return None, f"annotation {c.ANNOTATION_OOM_MEMORY_FACTOR}={factor_text!r} is not a number"
    if factor is None:
        return None, None
    if not factor > 1:
        return None, f"{c.ANNOTATION_OOM_MEMORY_FACTOR} must be above 1, got {factor:g}"
    max_bytes = parse_memory(max_text) if max_text is not None else None
    if max_text is not None and max_bytes is None:
        return None, f"annotation {c.ANNOTATION_OOM_MEMORY_MAX}={max_text!r} is not a quantity"
    return Policy(factor, max_bytes), None


def oom_killed(pod: dict[str, Any], container: str) -> bool:
    """Whether the framework container last ended OOMKilled (its state, or lastState after a restart)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != container:
            continue
        for state in (cs.get("state"), cs.get("lastState")):
            if ((state or {}).get("terminated") or {}).get("reason") == OOM_KILLED:
                return True
    return False


def relaunches(oom_memory: dict[str, dict[str, Any]]) -> int:
    """How many relaunches with more memory ``status.oomMemory`` records, over all replicas."""
    return sum(int((entry or {}).get("relaunches") or 0) for entry in oom_memory.values())


def memory_limit(pod_or_template_spec: dict[str, Any], container: str) -> Optional[int]:
    """The framework container's memory limit (else its request), in bytes."""
    for ctr in pod_or_template_spec.get("containers") or []:
        if ctr.get("name") == container:
            resources = ctr.get("resources") or {}
            return parse_memory((resources.get("limits") or {}).get("memory") or (resources.get("requests") or {}).get("memory"))
    return None


def grown(current: int, p: Policy) -> int:
    """The next memory limit: ``current`` times the factor, in whole MiB, clamped to the maximum."""
    size = int(math.ceil(Decimal(current) * Decimal(str(p.factor)) / _MI)) * _MI
    return min(size, p.max_bytes) if p.max_bytes is not None else size


def with_memory(pod: dict[str, Any], container: str, memory: str, previous: str) -> dict[str, Any]:
    """``pod`` (a new object) whose framework container runs with ``memory``; request scaled alike."""
    new_bytes = parse_memory(memory) or 0
    spec = dict(pod["spec"])
    containers = []
    for ctr in spec["containers"]:
        if ctr.get("name") == container:
            resources = {k: dict(v) for k, v in (ctr.get("resources") or {}).items() if isinstance(v, dict)}
            limits, requests = resources.setdefault("limits", {}), resources.setdefault("requests", {})
            old_limit = parse_memory(limits.get("memory")) or parse_memory(requests.get("memory"))
            if "memory" in requests and old_limit:
                request = parse_memory(requests["memory"]) or 0
                requests["memory"] = format_memory(min(new_bytes, int(math.ceil(request * new_bytes / old_limit / _MI)) * _MI))
            else:
                requests.pop("memory", None)
                if not requests:
                    del resources["requests"]
            limits["memory"] = memory
            ctr = {**ctr, "resources": resources}
        containers.append(ctr)
    spec["containers"] = containers
    meta = dict(pod["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), c.ANNOTATION_OOM_MEMORY: f"{previous} -> {memory}"}
    return {**pod, "metadata": meta, "spec": spec}
