"""Taints and tolerations: which taints a pod tolerates, and for how long.

The matching rule is the API's (``Toleration.ToleratesTaint``): an empty effect matches every
effect, an empty key with ``Exists`` matches every taint, ``Equal`` (the default operator)
compares values. The node lifecycle controller uses it for NoExecute eviction; a scheduler's
taint predicate is the same rule applied to NoSchedule taints.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

Obj = dict[str, Any]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
PID_PRESSURE = "node.kubernetes.io/pid-pressure"
NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"

NO_EXECUTE = "NoExecute"
NO_SCHEDULE = "NoSchedule"


def tolerates(toleration: Obj, taint: Obj) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def matching_tolerations(taints: Iterable[Obj], tolerations: Iterable[Obj]) -> Optional[list[Obj]]:
    """The toleration used for each taint, or None when some taint is not tolerated."""
    candidates = list(tolerations)
    used: list[Obj] = []
    for taint in taints:
        match = next((t for t in candidates if tolerates(t, taint)), None)
        if match is None:
            return None
        used.append(match)
    return used


def toleration_seconds(used: list[Obj]) -> Optional[float]:
    """How long a pod may stay: the smallest ``tolerationSeconds`` (0 or less: none), None for ever."""
    if not used:
        return 0.0
    bounds = [t["tolerationSeconds"] for t in used if t.get("tolerationSeconds") is not None]
    if not bounds:
        return None
    return max(0.0, float(min(bounds)))


def same_taint(a: Obj, b: Obj) -> bool:
    """Taints are identified by key and effect."""
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")
