"""What a ResourceQuota's status should say, as kube-controller-manager's ``resourcequota``
controller decides it: ``status.hard`` is a copy of ``spec.hard`` and ``status.used`` the
namespace's use of each resource it names, counted by the same rules admission judges creates
by (``trainctl.cluster.resource_quota``), so a pod that has ended no longer counts and a
scoped quota counts only the pods its scopes take in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from trainctl.cluster import resource_quota

Obj = dict[str, Any]


def counted_keys(quota: Obj) -> set[str]:
    """The storage keys (``group/plural``) of the objects the quota's names count."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    keys = {resource_quota.storage_key_counted(name) or "/pods" for name in hard}
    if {"services.nodeports", "services.loadbalancers"} & set(hard):
        keys.add("/services")
    return keys


def status(quota: Obj, objects: Callable[[str], list[Obj]]) -> Obj:
    """The status the quota should have; ``objects(storage_key)`` lists its namespace's objects."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    used = resource_quota.used(resource_quota.hard_of(quota), resource_quota.scoped(quota, objects))
    return {"hard": dict(hard), "used": resource_quota.as_resource_list(used, hard)}


def decide(quota: Obj, objects: Callable[[str], list[Obj]]) -> Optional[Obj]:
    """The new status, or None when the stored one is already right."""
    wanted = status(quota, objects)
    return None if (quota.get("status") or {}) == wanted else wanted
