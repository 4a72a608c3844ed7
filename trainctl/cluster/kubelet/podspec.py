"""Can the kubelet run this pod spec? The fields it reads, checked before it acts on them.

The API server is meant to reject malformed pods, but the kubelet cannot rely on it (old
data, a server without validation): a pod it cannot read must fail alone, with a reason
and the field at fault, instead of raising in the loop that serves every pod. So the
kubelet checks every field it reads for its type and range before scheduling or
admission, in kube-apiserver's words (``spec.containers[0].ports[0].containerPort:
Invalid value: 99999: must be between 1 and 65535, inclusive``). Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from trainctl.api.quantity import parse_quantity

Obj = dict[str, Any]
Problems = list[str]

INVALID_SPEC = "InvalidSpec"
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_SCALAR = (str, int, float)  # YAML turns an unquoted `1` in args into a number; the kubelet str()s it


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _invalid(path: str, value: Any, why: str) -> str:
    return f"{path}: Invalid value: {value!r}: {why}"


def _list_of(path: str, value: Any, item_ok: Callable[[Any], bool], what: str, problems: Problems) -> list[Any]:
    """``value`` when it is a list whose items pass ``item_ok``; else a problem and []."""
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(_invalid(path, value, f"must be a list of {what}"))
        return []
    for i, item in enumerate(value):
        if not item_ok(item):
            problems.append(_invalid(f"{path}[{i}]", item, f"must be {what}"))
            return []
    return value


def _dict(path: str, value: Any, problems: Problems) -> Obj:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(_invalid(path, value, "must be an object"))
        return {}
    return value


def _port(path: str, value: Any, problems: Problems, *, optional: bool = False) -> None:
    if optional and value in (None, 0):
        return
    if not _is_int(value) or not 1 <= value <= 65535:
        problems.append(_invalid(path, value, "must be between 1 and 65535, inclusive"))


def _quantities(path: str, value: Any, problems: Problems) -> None:
    for name, amount in _dict(path, value, problems).items():
        try:
            parse_quantity(amount)
        except ValueError:
            problems.append(_invalid(f"{path}[{name}]", amount, "must be a quantity such as 500m or 1Gi"))


def _env(path: str, value: Any, problems: Problems) -> None:
    for i, entry in enumerate(_list_of(path, value, lambda e: isinstance(e, dict), "objects", problems)):
        if not isinstance(entry.get("name"), str) or not entry["name"]:
            problems.append(_invalid(f"{path}[{i}].name", entry.get("name"), "must be a non-empty string"))
        if entry.get("value") is not None and not isinstance(entry["value"], _SCALAR):
            problems.append(_invalid(f"{path}[{i}].value", entry["value"], "must be a string"))
        source = _dict(f"{path}[{i}].valueFrom", entry.get("valueFrom"), problems)
        for kind, ref in source.items():
            _dict(f"{path}[{i}].valueFrom.{kind}", ref, problems)


def _container(path: str, container: Obj, problems: Problems) -> None:
    name = container.get("name")
    if not isinstance(name, str) or not _DNS1123_LABEL.match(name) or len(name) > 63:
        problems.append(_invalid(f"{path}.name", name, "a lowercase RFC 1123 label must consist of lower case "
                                 "alphanumeric characters or '-', and must start and end with an alphanumeric character"))
    for field in ("command", "args"):
        _list_of(f"{path}.{field}", container.get(field), lambda part: isinstance(part, _SCALAR), "strings", problems)
    if container.get("workingDir") is not None and not isinstance(container["workingDir"], str):
        problems.append(_invalid(f"{path}.workingDir", container["workingDir"], "must be a string"))
    _env(f"{path}.env", container.get("env"), problems)
    sources = _list_of(f"{path}.envFrom", container.get("envFrom"), lambda e: isinstance(e, dict), "objects", problems)
    for i, source in enumerate(sources):
        for kind, ref in source.items():
            if kind != "prefix":
                _dict(f"{path}.envFrom[{i}].{kind}", ref, problems)
    ports = _list_of(f"{path}.ports", container.get("ports"), lambda p: isinstance(p, dict), "objects", problems)
    for i, port in enumerate(ports):
        _port(f"{path}.ports[{i}].containerPort", port.get("containerPort"), problems)
        _port(f"{path}.ports[{i}].hostPort", port.get("hostPort"), problems, optional=True)
        if port.get("protocol") is not None and port["protocol"] not in _PROTOCOLS:
            problems.append(_invalid(f"{path}.ports[{i}].protocol", port["protocol"], "must be TCP, UDP or SCTP"))
    resources = _dict(f"{path}.resources", container.get("resources"), problems)
    for kind in ("limits", "requests"):
        _quantities(f"{path}.resources.{kind}", resources.get(kind), problems)


def addressable(pod: Any) -> bool:
    """Has the pod a name and uid to act on (and to write a status to)?"""
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    return isinstance(meta, dict) and all(isinstance(meta.get(k), str) and meta[k] for k in ("name", "uid"))


def well_formed(pod: Obj) -> bool:
    """Are the pod's spec and status objects, so that its fields can be looked up at all?"""
    return isinstance(pod.get("spec"), dict) and isinstance(pod.get("status") or {}, dict)


def problems(pod: Obj) -> Problems:
    """What in ``pod`` the kubelet cannot act on, one line per field; empty when it can."""
    found: Problems = []
    meta = _dict("metadata", pod.get("metadata"), found)
    for field in ("name", "uid"):
        if not isinstance(meta.get(field), str) or not meta[field]:
            found.append(_invalid(f"metadata.{field}", meta.get(field), "must be a non-empty string"))
    for field in ("labels", "annotations"):
        if any(not isinstance(v, str) for v in _dict(f"metadata.{field}", meta.get(field), found).values()):
            found.append(_invalid(f"metadata.{field}", meta[field], "values must be strings"))
    _list_of("metadata.ownerReferences", meta.get("ownerReferences"), lambda r: isinstance(r, dict), "objects", found)
    _dict("status", pod.get("status"), found)
    spec = _dict("spec", pod.get("spec"), found)
    if not spec.get("containers"):
        found.append("spec.containers: Required value")
    containers = _list_of("spec.containers", spec.get("containers"), lambda c: isinstance(c, dict), "objects", found)
    inits = _list_of("spec.initContainers", spec.get("initContainers"), lambda c: isinstance(c, dict), "objects", found)
    names: set[Any] = set()
    for field, group in (("initContainers", inits), ("containers", containers)):
        for i, container in enumerate(group):
            _container(f"spec.{field}[{i}]", container, found)
            if container.get("name") in names:
                found.append(f"spec.{field}[{i}].name: Duplicate value: {container.get('name')!r}")
            names.add(container.get("name"))
    if spec.get("restartPolicy") is not None and spec["restartPolicy"] not in _RESTART_POLICIES:
        found.append(_invalid("spec.restartPolicy", spec["restartPolicy"], "must be Always, OnFailure or Never"))
    for field in ("activeDeadlineSeconds", "terminationGracePeriodSeconds"):
        if spec.get(field) is not None and (not _is_int(spec[field]) or spec[field] < 0):
            found.append(_invalid(f"spec.{field}", spec[field], "must be a non-negative integer"))
    selector = _dict("spec.nodeSelector", spec.get("nodeSelector"), found)
    if any(not isinstance(v, str) for v in selector.values()):
        found.append(_invalid("spec.nodeSelector", selector, "values must be strings"))
    for field in ("nodeName", "schedulerName"):
        if spec.get(field) is not None and not isinstance(spec[field], str):
            found.append(_invalid(f"spec.{field}", spec[field], "must be a string"))
    return found
