"""kube-apiserver's ``ResourceQuota`` admission plugin: a create that would take a namespace
past a quota's ``spec.hard`` is refused (403 ``exceeded quota``), and a pod is refused when a
quota counts cpu or memory and a container does not state it (``must specify``).

The use a new object is judged against is counted from the stored objects at the moment of
the create (``trainctl.cluster.resource_quota``), not read from the quota's ``status.used``:
kube charges the status and lets a conflicting status write fail the second of two racing
creates; here the check and the store's write of the new object happen in one step of the
API server's single event loop, so a second create already sees the first one's object and
two creates racing for the last room cannot both pass. The quota controller then writes the
same count into ``status.used``. A scoped quota judges only the pods its scopes take in.
``validate_quota`` and ``validate_limit_range`` are kube's validation of the two kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from trainctl.api.quantity import QUANTITY_MESSAGE
from trainctl.cluster import resource_quota
from trainctl.cluster.apiserver.admission import builtin_rules
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause

Obj = dict[str, Any]


def _missing_requirements(pod: Obj, required: set[str]) -> str | None:
    """kube's pod evaluator Constraints: every container must state what a quota counts of
    cpu and memory; None when all do."""
    missing: dict[str, list[str]] = {}
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    for key in ("containers", "initContainers"):
        for container in (spec or {}).get(key) or []:
            resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
            stated = resource_quota.compute_names(
                {n: Decimal(0) for n in ((resources or {}).get("requests") or {})},
                {n: Decimal(0) for n in ((resources or {}).get("limits") or {})})
            for name in required - set(stated):
                missing.setdefault(name, []).append(str(container.get("name", "")))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


def check_create(plural: str, group: str, obj: Obj, quotas: list[Obj],
                 objects: Callable[[str], list[Obj]]) -> None:
    """403 if storing the new ``obj`` would exceed one of the namespace's ``quotas``;
    ``objects(storage_key)`` lists the namespace's stored objects of one resource."""
    storage_key = f"{group}/{plural}"
    requested = resource_quota.object_usage(storage_key, obj)
    name = obj["metadata"].get("name", "")
    for quota in sorted(quotas, key=lambda q: str(q["metadata"].get("name", ""))):
        if not resource_quota.in_scope(quota, storage_key, obj):
            continue
        hard = resource_quota.hard_of(quota)
        quota_name = quota["metadata"].get("name", "")
        if storage_key == "/pods" and not resource_quota.has_ended(obj):
            problem = _missing_requirements(obj, set(hard) & resource_quota.CONTAINER_CONSTRAINED)
            if problem:
                raise errors.forbidden(plural, group, name, f"failed quota: {quota_name}: {problem}")
        charged = {n: v for n, v in requested.items() if n in hard}
        if not charged:
            continue
        used = resource_quota.used(charged, resource_quota.scoped(quota, objects))
        exceeded = sorted(n for n, v in charged.items() if used[n] + v > hard[n])
        if exceeded:
            raise errors.forbidden(plural, group, name, (
                f"exceeded quota: {quota_name}, "
                f"requested: {resource_quota.resource_list({n: charged[n] for n in exceeded})}, "
                f"used: {resource_quota.resource_list({n: used[n] for n in exceeded})}, "
                f"limited: {resource_quota.resource_list({n: hard[n] for n in exceeded})}"))


def _quantity_causes(values: Any, path: str) -> list[Cause]:
    """Each value a quantity of at least 0 (kube's ValidateResourceQuantityValue)."""
    causes = []
    for name, text in (values or {}).items() if isinstance(values, dict) else ():
        value = resource_quota.parse(text)
        if value is None:
            causes.append(builtin_rules.invalid(f"{path}[{name}]", text, QUANTITY_MESSAGE))
        elif value < 0:
            causes.append(builtin_rules.invalid(f"{path}[{name}]", text, "must be greater than or equal to 0"))
    return causes


def validate_quota(obj: Obj) -> list[Cause]:
    """kube's ValidateResourceQuota for what is counted here: ``spec.hard`` quantities."""
    return _quantity_causes((obj.get("spec") or {}).get("hard"), "spec.hard")


def validate_limit_range(obj: Obj) -> list[Cause]:
    """kube's ValidateLimitRange: quantities, and min <= defaultRequest <= default <= max."""
    causes = []
    for index, item in enumerate((obj.get("spec") or {}).get("limits") or []):
        path = f"spec.limits[{index}]"
        if not isinstance(item, dict):
            continue
        fields = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")
        malformed = [c for key in fields for c in _quantity_causes(item.get(key), f"{path}.{key}")]
        if malformed:
            causes += malformed
            continue
        if item.get("type") == "Pod":
            causes += [Cause(f"{path}.{key}", "FieldValueForbidden", "Forbidden: may not be specified when `type` is 'Pod'")
                       for key in ("default", "defaultRequest") if item.get(key)]
        values = {key: {n: resource_quota.parse(v) for n, v in (item.get(key) or {}).items()} for key in fields}
        orderings = (("min", "max", "min value {} is greater than max value {}", "min"),
                     ("min", "defaultRequest", "min value {} is greater than default request value {}", "defaultRequest"),
                     ("defaultRequest", "max", "default request value {} is greater than max value {}", "defaultRequest"),
                     ("defaultRequest", "default", "default request value {} is greater than default limit value {}",
                      "defaultRequest"),
                     ("min", "default", "min value {} is greater than default value {}", "default"),
                     ("default", "max", "default value {} is greater than max value {}", "default"))
        for low, high, words, blamed in orderings:
            for name, low_value in values[low].items():
                high_value = values[high].get(name)
                if low_value is not None and high_value is not None and low_value > high_value:
                    shown = item[blamed][name]
                    causes.append(builtin_rules.invalid(f"{path}.{blamed}[{name}]", shown,
                                                        words.format(item[low][name], item[high][name])))
    return causes
