"""kube-apiserver's ``LimitRanger`` admission plugin: the LimitRanges of a namespace default
and bound what a new pod's containers ask for.

For each ``Container`` item of a LimitRange, a container that leaves a resource out gets the
item's ``default`` as its limit and ``defaultRequest`` as its request (noted in the pod's
``kubernetes.io/limit-ranger`` annotation, as kube notes it); then every ``Container`` item
bounds each container, and every ``Pod`` item the pod's total: ``min`` (a request must be
stated and be at least it, a stated limit too), ``max`` (a limit must be stated and be at most
it, a stated request too) and ``maxLimitRequestRatio``. A violation is a 403 with kube's
words. Defaulting happens before the quota is charged, so a defaulted request counts.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from trainctl.cluster import resource_quota
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.resource_types import requests_from_limits

Obj = dict[str, Any]

ANNOTATION = "kubernetes.io/limit-ranger"


def _items(limit_ranges: list[Obj], kind: str) -> list[Obj]:
    return [item for lr in limit_ranges for item in ((lr.get("spec") or {}).get("limits") or [])
            if isinstance(item, dict) and item.get("type") == kind]


def _containers(pod: Obj) -> list[Obj]:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    return [c for key in ("initContainers", "containers") for c in ((spec or {}).get(key) or []) if isinstance(c, dict)]


def default_pod(pod: Obj, limit_ranges: list[Obj]) -> None:
    """Fill in the requests and limits the ``Container`` items default (kube's
    defaultContainerResourceRequirements and mergeContainerResources)."""
    defaults: dict[str, dict[str, Any]] = {"limits": {}, "requests": {}}
    for item in _items(limit_ranges, "Container"):
        defaults["requests"].update(item.get("defaultRequest") or {})
        defaults["limits"].update(item.get("default") or {})
    if not defaults["requests"] and not defaults["limits"]:
        return
    notes = []
    for container in _containers(pod):
        resources = container.setdefault("resources", {})
        if not isinstance(resources, dict):
            continue
        for key, word in (("requests", "request"), ("limits", "limit")):
            found = resources.get(key)
            stated: dict[str, Any] = found if isinstance(found, dict) else {}
            added = {name: value for name, value in defaults[key].items() if name not in stated}
            if added:
                resources[key] = {**stated, **added}
                notes.append(f"{', '.join(sorted(added))} {word} for {'init container' if container in _init(pod) else 'container'} "
                             f"{container.get('name', '')}")
    if notes:
        pod["metadata"].setdefault("annotations", {})[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def _init(pod: Obj) -> list[Obj]:
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    return list((spec or {}).get("initContainers") or [])


def _values(resources: Any) -> dict[str, Decimal]:
    if not isinstance(resources, dict):
        return {}
    values = {name: resource_quota.parse(text) for name, text in resources.items()}
    return {name: value for name, value in values.items() if value is not None}


def _text(name: str, value: Decimal, written: Any = None) -> str:
    return written if isinstance(written, str) else resource_quota.format_quantity(value, resource_quota.is_binary(name, None))


def _violations(kind: str, item: Obj, requests: dict[str, Decimal], limits: dict[str, Decimal],
                written: dict[str, dict[str, Any]]) -> list[str]:
    """kube's minConstraint, maxConstraint and limitRequestRatioConstraint for one item."""
    problems = []
    for name, bound_text in (item.get("min") or {}).items():
        bound = resource_quota.parse(bound_text)
        if bound is None:
            continue
        if name not in requests:
            problems.append(f"minimum {name} usage per {kind} is {bound_text}.  No request is specified")
        elif requests[name] < bound:
            problems.append(f"minimum {name} usage per {kind} is {bound_text}, but request is "
                            f"{_text(name, requests[name], written['requests'].get(name))}")
        elif name in limits and limits[name] < bound:
            problems.append(f"minimum {name} usage per {kind} is {bound_text}, but limit is "
                            f"{_text(name, limits[name], written['limits'].get(name))}")
    for name, bound_text in (item.get("max") or {}).items():
        bound = resource_quota.parse(bound_text)
        if bound is None:
            continue
        if name not in limits:
            problems.append(f"maximum {name} usage per {kind} is {bound_text}.  No limit is specified")
        elif limits[name] > bound:
            problems.append(f"maximum {name} usage per {kind} is {bound_text}, but limit is "
                            f"{_text(name, limits[name], written['limits'].get(name))}")
        elif name in requests and requests[name] > bound:
            problems.append(f"maximum {name} usage per {kind} is {bound_text}, but request is "
                            f"{_text(name, requests[name], written['requests'].get(name))}")
    for name, bound_text in (item.get("maxLimitRequestRatio") or {}).items():
        bound = resource_quota.parse(bound_text)
        if bound is None:
            continue
        if not requests.get(name):
            problems.append(f"{name} max limit to request ratio per {kind} is {bound_text}, "
                            "but no request is specified or request is 0")
        elif not limits.get(name):
            problems.append(f"{name} max limit to request ratio per {kind} is {bound_text}, "
                            "but no limit is specified or limit is 0")
        elif limits[name] / requests[name] > bound:
            problems.append(f"{name} max limit to request ratio per {kind} is {bound_text}, "
                            f"but provided ratio is {float(limits[name] / requests[name]):f}")
    return problems


def validate_pod(pod: Obj, limit_ranges: list[Obj]) -> None:
    """403 when a container or the pod is outside a LimitRange's bounds."""
    problems = []
    for item in _items(limit_ranges, "Container"):
        for container in _containers(pod):
            resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
            written = {"requests": (resources or {}).get("requests") or {}, "limits": (resources or {}).get("limits") or {}}
            problems += _violations("Container", item, _values(written["requests"]), _values(written["limits"]), written)
    for item in _items(limit_ranges, "Pod"):
        usage = resource_quota.pod_usage({**pod, "status": {}})
        requests = {n[len("requests."):]: v for n, v in usage.items() if n.startswith("requests.")}
        limits = {n[len("limits."):]: v for n, v in usage.items() if n.startswith("limits.")}
        problems += _violations("Pod", item, requests, limits, {"requests": {}, "limits": {}})
    if problems:
        message = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        raise errors.forbidden("pods", "", pod["metadata"].get("name", ""), message)


def admit_pod(pod: Obj, limit_ranges: list[Obj]) -> None:
    """The plugin on a pod's create: defaults, then bounds."""
    if limit_ranges:
        for container in _containers(pod):
            requests_from_limits(container)  # kube's API defaulting comes before the plugin
        default_pod(pod, limit_ranges)
        validate_pod(pod, limit_ranges)
