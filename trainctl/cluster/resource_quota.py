"""What a ResourceQuota counts, read by both its admission (``apiserver.admission.resource_quotas``)
and the quota controller (``controlplane.resourcequota_decision``), so the two never disagree.

A quota's ``spec.hard`` names resources as kube does: compute resources a pod requests
(``requests.cpu``, the bare ``cpu`` and ``memory`` meaning the same, ``limits.memory``,
``requests.nvidia.com/gpu``), object counts (``pods``, ``services``, ``configmaps``,
``secrets``, and ``count/<plural>.<group>`` for any kind, ``count/pods`` for core ones). A pod
that has ended (``Succeeded`` or ``Failed``) uses nothing, as in kube's pod evaluator. A pod's
compute use is what it holds while it runs: the sum over its containers, or its largest init
container if that is more (kube's ``PodRequests``). A quota with scopes (``BestEffort``,
``NotBestEffort``, ``Terminating``, ``NotTerminating``, and ``PriorityClass`` in a
``scopeSelector``) counts only the pods they take in. Quantities are ``Decimal`` values,
printed back as kube prints a ``Quantity``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from trainctl.api import quantity

Obj = dict[str, Any]
Usage = dict[str, Decimal]

# The resources whose bare name means the request (kube's legacy quota names).
_BARE_REQUESTS = ("cpu", "memory", "ephemeral-storage")
# Resources a quota may not count unless every container states them (kube's
# "BACKWARD COMPATIBILITY REQUIREMENT" in its pod evaluator).
CONTAINER_CONSTRAINED = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
# Object-count names kube had before ``count/``: name -> storage key.
_LEGACY_COUNTS = {"pods": "/pods", "services": "/services", "configmaps": "/configmaps", "secrets": "/secrets",
                  "resourcequotas": "/resourcequotas", "replicationcontrollers": "/replicationcontrollers",
                  "persistentvolumeclaims": "/persistentvolumeclaims"}
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def parse(value: Any) -> Decimal | None:
    try:
        return quantity.parse_quantity(value)
    except ValueError:
        return None


def format_quantity(value: Decimal, binary: bool = False) -> str:
    """``value`` as kube's ``Quantity.String`` prints it: ``500m``, ``2``, ``1Gi``, ``3k``."""
    if value != value.to_integral_value():
        milli = value * 1000
        return f"{int(milli)}m" if milli == milli.to_integral_value() else str(value)
    whole = int(value)
    if whole == 0:
        return "0"
    for suffix, factor in (*_BINARY, *_DECIMAL) if binary else _DECIMAL:
        if whole % factor == 0:
            return f"{whole // factor}{suffix}"
    return str(whole)


def is_binary(name: str, text: Any) -> bool:
    """Whether a quantity of ``name`` prints in binary suffixes (memory, or written with one)."""
    return (isinstance(text, str) and text.endswith("i")) or name.endswith(("memory", "ephemeral-storage"))


def resource_list(values: Mapping[str, Decimal]) -> str:
    """``cpu=2,memory=1Gi``: kube's prettyPrint of a ResourceList in quota messages."""
    return ",".join(f"{name}={format_quantity(values[name], is_binary(name, None))}" for name in sorted(values))


def storage_key_counted(name: str) -> str | None:
    """The storage key (``group/plural``) whose objects ``name`` counts, or None for a compute name."""
    if name in _LEGACY_COUNTS:
        return _LEGACY_COUNTS[name]
    if name.startswith("count/"):
        plural, _, group = name[len("count/"):].partition(".")
        return f"{group}/{plural}"
    return None


def has_ended(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _container_list(container: Obj, key: str) -> Mapping[str, Any]:
    resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    values = (resources or {}).get(key)
    return values if isinstance(values, dict) else {}


def _pod_total(pod: Obj, key: str) -> Usage:
    """The pod's ``requests`` or ``limits``: the containers' sum, or an init container's if larger."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    total: Usage = {}
    for container in (spec or {}).get("containers") or []:
        for name, text in _container_list(container, key).items():
            value = parse(text)
            if value is not None:
                total[name] = total.get(name, Decimal(0)) + value
    for container in (spec or {}).get("initContainers") or []:
        for name, text in _container_list(container, key).items():
            value = parse(text)
            if value is not None and value > total.get(name, Decimal(0)):
                total[name] = value
    return total


def compute_names(requests: Mapping[str, Decimal], limits: Mapping[str, Decimal]) -> Usage:
    """Quota names of a set of requests and limits (kube's podComputeUsageHelper, without the counts)."""
    usage: Usage = {}
    for name, value in requests.items():
        usage[f"requests.{name}"] = value
        if name in _BARE_REQUESTS:
            usage[name] = value
    for name, value in limits.items():
        if name in ("cpu", "memory", "ephemeral-storage"):
            usage[f"limits.{name}"] = value
    return usage


def pod_usage(pod: Obj) -> Usage:
    """What ``pod`` counts against a quota: nothing once it has ended."""
    if has_ended(pod):
        return {}
    usage = compute_names(_pod_total(pod, "requests"), _pod_total(pod, "limits"))
    usage["pods"] = usage["count/pods"] = Decimal(1)
    return usage


def object_usage(storage_key: str, obj: Obj) -> Usage:
    """What one object stored under ``storage_key`` counts against a quota."""
    if storage_key == "/pods":
        return pod_usage(obj)
    group, _, plural = storage_key.partition("/")
    usage: Usage = {f"count/{plural}.{group}" if group else f"count/{plural}": Decimal(1)}
    legacy = next((n for n, key in _LEGACY_COUNTS.items() if key == storage_key), None)
    if legacy is not None:
        usage[legacy] = Decimal(1)
    if storage_key == "/services":
        kind = (obj.get("spec") or {}).get("type")
        if kind in ("NodePort", "LoadBalancer"):
            usage["services.nodeports"] = Decimal(len((obj.get("spec") or {}).get("ports") or []))
        if kind == "LoadBalancer":
            usage["services.loadbalancers"] = Decimal(1)
    return usage


def used(names: Iterable[str], objects: Callable[[str], list[Obj]]) -> Usage:
    """The namespace's use of each quota name in ``names``; ``objects(storage_key)`` lists the
    namespace's objects of one resource."""
    wanted = set(names)
    keys = {"/pods" if storage_key_counted(n) is None else storage_key_counted(n) for n in wanted}
    if wanted & {"services.nodeports", "services.loadbalancers"}:
        keys.add("/services")
    total: Usage = dict.fromkeys(wanted, Decimal(0))
    for key in sorted(k for k in keys if k is not None):
        for obj in objects(key):
            for name, value in object_usage(key, obj).items():
                if name in wanted:
                    total[name] += value
    return total


def hard_of(quota: Obj) -> Usage:
    """The quota's ``spec.hard`` as values (a malformed quantity is left out)."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    values = {name: parse(text) for name, text in hard.items()} if isinstance(hard, dict) else {}
    return {name: value for name, value in values.items() if value is not None}


def as_resource_list(values: Mapping[str, Decimal], like: Mapping[str, Any] | None = None) -> dict[str, str]:
    """``values`` as a ResourceList of strings (binary where ``like``'s quantity was written binary)."""
    like = like or {}
    return {name: format_quantity(value, is_binary(name, like.get(name))) for name, value in sorted(values.items())}


def _best_effort(pod: Obj) -> bool:
    qos = (pod.get("status") or {}).get("qosClass")
    if qos:
        return bool(qos == "BestEffort")
    return not _pod_total(pod, "requests") and not _pod_total(pod, "limits")


def _scope_matches(scope: str, operator: str, values: list[Any], pod: Obj) -> bool:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    if scope in ("Terminating", "NotTerminating"):
        terminating = (spec or {}).get("activeDeadlineSeconds") is not None
        return terminating == (scope == "Terminating")
    if scope in ("BestEffort", "NotBestEffort"):
        return _best_effort(pod) == (scope == "BestEffort")
    if scope == "PriorityClass":
        name = (spec or {}).get("priorityClassName")
        if operator == "Exists":
            return bool(name)
        if operator == "DoesNotExist":
            return not name
        return (name in values) == (operator != "NotIn")
    return False  # CrossNamespacePodAffinity: no pod here asks for it


def in_scope(quota: Obj, storage_key: str, obj: Obj) -> bool:
    """Whether ``quota``'s scopes (``spec.scopes``, ``spec.scopeSelector``) take in ``obj``: a
    quota without scopes takes in everything; a scoped one only the pods matching every scope."""
    spec = quota.get("spec") or {}
    scopes: list[tuple[str, str, list[Any]]] = [(str(s), "Exists", []) for s in spec.get("scopes") or []]
    scopes += [(str(e.get("scopeName", "")), str(e.get("operator", "In")), list(e.get("values") or []))
               for e in ((spec.get("scopeSelector") or {}).get("matchExpressions") or []) if isinstance(e, dict)]
    if not scopes:
        return True
    return storage_key == "/pods" and all(_scope_matches(s, op, values, obj) for s, op, values in scopes)


def scoped(quota: Obj, objects: Callable[[str], list[Obj]]) -> Callable[[str], list[Obj]]:
    """``objects`` narrowed to what ``quota``'s scopes take in."""
    return lambda key: [obj for obj in objects(key) if in_scope(quota, key, obj)]
