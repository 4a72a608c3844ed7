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
backoffLimit leaves them out. Once the maximum is reached, OOMs count as any failure, except
for a replica that climbed there: OOMKilled at every rung up to the ceiling, it can never
fit, and restarting it in place at the same memory (OnFailure, no backoffLimit) would go on
for ever; the job fails saying it cannot get the memory it needs. So does such a replica
whose allocation is refused there instead (it exits, its log ending in a ``MemoryError`` or
the like, but is not OOMKilled): it is just as short of memory.

No rung asks for more than the largest node can give a pod (its allocatable memory): such a
pod would stay Pending for ever. A replica OOMKilled at that size is at its ceiling, as at
the maximum, and the failure says so. Annotations are the job author's: a value that is no
factor or no quantity is reported and the controller's setting used, never trusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterable, Optional

from trainctl.api import constants as c
from trainctl.api.quantity import parse_quantity

OOM_KILLED = "OOMKilled"
# The grace period of the OOMKilled pod's delete. What runs in it, if anything, is the
# kubelet's restart in place at the limit that just failed: nothing worth the pod's own grace
# period, and a launcher that handles SIGTERM late (torchrun in a rendezvous) must not hold
# the replacement up for it. The pod still goes only once the kubelet has stopped it.
RELAUNCH_GRACE_SECONDS = 1
_MI = 1024 * 1024
# A factor multiplies a replica's memory at each OOM kill: 1.5 or 2 is the usual ladder, and
# 16 (512Mi to 8Gi in one step) is far past any sensible one; a larger value is a typo.
MAX_FACTOR = 16.0
# Kubernetes reads a quantity's value as an int64: nothing larger is a memory size.
_MAX_BYTES = 2**63 - 1
FACTOR_RULE = f"a number above 1 and at most {MAX_FACTOR:g}"
MAXIMUM_RULE = "a positive memory quantity (such as 8Gi)"


def parse_memory(value: Any) -> Optional[int]:
    """Bytes of a memory quantity ("512Mi", "1G", 1048576), or None (also for inf, nan, and
    anything beyond an int64: "1e999999999" must not become a billion-digit integer)."""
    if value is None:
        return None
    try:
        amount = parse_quantity(value)
    except ValueError:
        return None
    return None if abs(amount) > _MAX_BYTES else math.ceil(amount)


def parse_factor(text: Any) -> float:
    """A factor (annotation or flag); ValueError when it is not ``FACTOR_RULE``."""
    try:
        factor = float(text)
    except (TypeError, ValueError):
        factor = math.nan
    if not (math.isfinite(factor) and 1 < factor <= MAX_FACTOR):
        raise ValueError(f"must be {FACTOR_RULE}")
    return factor


def parse_maximum(text: Any) -> int:
    """A maximum's bytes (annotation or flag); ValueError when it is not ``MAXIMUM_RULE``."""
    size = parse_memory(text)
    if size is None or size <= 0:
        raise ValueError(f"must be {MAXIMUM_RULE}")
    return size


def node_memory(node: dict[str, Any]) -> Optional[int]:
    """What ``node`` can give pods: its allocatable memory (else its capacity), in bytes."""
    status = node.get("status") or {}
    for key in ("allocatable", "capacity"):
        size = parse_memory((status.get(key) or {}).get("memory"))
        if size is not None and size > 0:
            return size
    return None


def largest_node_memory(nodes: Iterable[dict[str, Any]]) -> Optional[int]:
    """The most memory any of ``nodes`` can give one pod; None when no node says.

    Every node counts, Ready or not (one rebooting comes back); nodeSelectors, affinities
    and taints are the scheduler's, not this bound's."""
    return max((size for size in map(node_memory, nodes) if size is not None), default=None)


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
) -> tuple[Optional[Policy], list[str]]:
    """The job's OOM policy (None: not opted in) and the problems with its annotations.

    ``factor`` and ``maximum`` are the controller's (checked at its start); an annotation
    that breaks its rule is reported and the controller's setting applies instead."""
    problems = []
    factor_text = annotations.get(c.ANNOTATION_OOM_MEMORY_FACTOR)
    if factor_text is not None:
        try:
            factor = parse_factor(factor_text)
        except ValueError:
            fallback = "no OOM relaunch (the controller's --oom-memory-factor is not set)" if factor is None else (
                f"the controller's --oom-memory-factor {factor:g} applies")
            problems.append(f"annotation {c.ANNOTATION_OOM_MEMORY_FACTOR}={factor_text!r} is not {FACTOR_RULE}; {fallback}")
    max_text = annotations.get(c.ANNOTATION_OOM_MEMORY_MAX)
    if max_text is not None:
        try:
            parse_maximum(max_text)
            maximum = max_text
        except ValueError:
            fallback = ("no maximum but the largest node's memory (the controller's --oom-memory-max is not set)"
                        if maximum is None else f"the controller's --oom-memory-max {maximum} applies")
            problems.append(f"annotation {c.ANNOTATION_OOM_MEMORY_MAX}={max_text!r} is not {MAXIMUM_RULE}; {fallback}")
    if factor is None:
        return None, problems
    return Policy(factor, parse_maximum(maximum) if maximum is not None else None), problems


def oom_killed(pod: dict[str, Any], container: str) -> bool:
    """Whether the framework container last ended OOMKilled (its state, or lastState after a restart)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != container:
            continue
        for state in (cs.get("state"), cs.get("lastState")):
            if ((state or {}).get("terminated") or {}).get("reason") == OOM_KILLED:
                return True
    return False


# What a process says as it dies for want of host memory when the allocation is refused
# instead of the process being OOMKilled (Python, glibc's strerror(ENOMEM), torch's CPU
# allocator, C++): the end of its log, which the kubelet puts in the terminated state's message.
MEMORY_FAILURES = ("MemoryError", "Cannot allocate memory", "can't allocate memory", "std::bad_alloc")


def memory_failure(pod: dict[str, Any], container: str) -> Optional[int]:
    """The exit code of the framework container's last failure when its message says it ran
    out of memory without being OOMKilled (a refused allocation), else None."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != container:
            continue
        for state in (cs.get("state"), cs.get("lastState")):
            terminated = (state or {}).get("terminated") or {}
            code, message = terminated.get("exitCode"), str(terminated.get("message") or "")
            if code and terminated.get("reason") != OOM_KILLED and any(m in message for m in MEMORY_FAILURES):
                return int(code)
    return None


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


def _node_ceiling(node_bytes: int) -> int:
    """The most a rung may ask for on the largest node: its memory in whole MiB, rounded down."""
    return node_bytes // _MI * _MI


def grown(current: int, p: Policy, node_bytes: Optional[int]) -> int:
    """The next memory limit: ``current`` times the factor, in whole MiB, clamped to the
    maximum and to what the largest node (``node_bytes``, None: unknown) can hold."""
    size = int(math.ceil(Decimal(current) * Decimal(str(p.factor)) / _MI)) * _MI
    for ceiling in (p.max_bytes, None if node_bytes is None else _node_ceiling(node_bytes)):
        if ceiling is not None:
            size = min(size, ceiling)
    return size


def no_room(replica: str, limit: int, p: Policy, node_bytes: Optional[int], how: str = "was OOMKilled") -> str:
    """Why ``replica``, OOMKilled (or as ``how`` says) at ``limit``, gets no more memory
    (``grown`` did not grow)."""
    if node_bytes is None or p.max_bytes is not None and limit >= p.max_bytes:
        return f"replica {replica} {how} at the maximum memory {format_memory(limit)} ({c.ANNOTATION_OOM_MEMORY_MAX})"
    return (f"replica {replica} {how} at {format_memory(limit)} and no node can hold more than "
            f"{format_memory(_node_ceiling(node_bytes))}")


def climbed_to(entry: Optional[dict[str, Any]], limit: int) -> int:
    """How many relaunches with more memory brought a replica to ``limit`` (its
    ``status.oomMemory`` entry); 0 when it runs with its template's memory."""
    if not entry or parse_memory(entry.get("memory")) != limit:
        return 0
    return int(entry.get("relaunches") or 0)


def cannot_fit(at_ceiling: str, relaunched: int) -> str:
    """Why a job ends: a replica climbed the ladder to its ceiling (``at_ceiling``, from
    :func:`no_room`) and was OOMKilled there too."""
    times = "once" if relaunched == 1 else f"{relaunched} times"
    return f"{at_ceiling}, after it was relaunched with more memory {times}: it cannot get the memory it needs"


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


@dataclass
class Relaunches:
    """What one pass found about a job's OOMKilled replicas.

    ``memory`` is ``status.oomMemory`` as this pass leaves it; ``relaunch`` maps the uid of a
    pod to replace to (type, index, limit, new limit); ``replacing`` holds the uids of
    OOMKilled pods already being deleted for a relaunch; ``at_max`` says why memory ended a
    replica, for the failure message; ``cannot_fit`` the replicas that climbed the ladder to
    its ceiling and were OOMKilled there: the job ends, whatever its restart policy, as no
    restart can give them more.
    """

    memory: dict[str, dict[str, Any]] = field(default_factory=dict)
    relaunch: dict[str, tuple[str, int, int, int]] = field(default_factory=dict)
    replacing: set[str] = field(default_factory=set)
    at_max: list[str] = field(default_factory=list)
    cannot_fit: list[str] = field(default_factory=list)

    def handles(self, pod: dict[str, Any]) -> bool:
        """Whether ``pod`` is replaced for an OOM kill, in this pass or by a delete under way."""
        uid = (pod.get("metadata") or {}).get("uid")
        return uid in self.relaunch or uid in self.replacing

    def with_cause(self, message: str) -> str:
        return message + ("; " + "; ".join(self.at_max) if self.at_max else "")
