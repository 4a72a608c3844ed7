"""The ``pods/ephemeralcontainers`` subresource's rules, as kube-apiserver's
``ValidatePodEphemeralContainersUpdate`` judges them.

An ephemeral container is a debugging process added to a running pod (``kubectl debug``).
It is only ever added: one already there may be neither changed nor removed. Its name is
unique among all of the pod's containers; it has an image; it names, in
``targetContainerName``, a container of the pod if any; and it has none of what a container
is managed by (ports, probes, lifecycle hooks, resources, a restart policy), since it is
never restarted, probed or reached. A pod cannot be created with one, and an update of the
pod itself keeps the ones it has (``keep_on_update``): the subresource, which RBAC grants
apart (``pods/ephemeralcontainers``), is the only way in.
"""

from __future__ import annotations

import re
from typing import Any

from trainctl.cluster.apiserver.apimachinery.errors import Cause

Obj = dict[str, Any]
SUBRESOURCE = "ephemeralcontainers"
FORBIDDEN_FIELDS = ("ports", "lifecycle", "livenessProbe", "readinessProbe", "startupProbe", "resources",
                    "resizePolicy", "restartPolicy")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _containers(spec: Obj, key: str) -> list[Obj]:
    value = spec.get(key)
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def keep_on_update(new: Obj, old: Obj, subresource: str | None) -> None:
    """The state a write of ``subresource`` (None: the pod itself) stores: the subresource
    changes the ephemeral containers and nothing else; any other write keeps them."""
    new_spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
    if subresource == SUBRESOURCE:
        added = new_spec.get("ephemeralContainers")
        new["spec"] = {k: v for k, v in old_spec.items() if k != "ephemeralContainers"}
        if added is not None:
            new["spec"]["ephemeralContainers"] = added
        new["metadata"] = {**old["metadata"], "resourceVersion": new["metadata"].get("resourceVersion")}
        if "status" in old:
            new["status"] = old["status"]
        return
    if not isinstance(new_spec, dict):
        return
    if "ephemeralContainers" in old_spec:
        new_spec["ephemeralContainers"] = old_spec["ephemeralContainers"]
    else:
        new_spec.pop("ephemeralContainers", None)


def validate_create(pod: Obj) -> list[Cause]:
    spec = pod.get("spec") or {}
    if isinstance(spec, dict) and spec.get("ephemeralContainers"):
        return [Cause("spec.ephemeralContainers", "FieldValueForbidden", "Forbidden: cannot be set on create")]
    return []


def validate_update(new: Obj, old: Obj) -> list[Cause]:
    """What is wrong with ``new``'s ephemeral containers, written through the subresource."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    path = "spec.ephemeralContainers"
    if not isinstance(spec.get("ephemeralContainers", []), list):
        return [Cause(path, "FieldValueTypeInvalid", "Invalid value: must be a list")]
    ephemeral = _containers(spec, "ephemeralContainers")
    by_name = {c.get("name"): c for c in ephemeral}
    causes: list[Cause] = []
    for i, before in enumerate(_containers(old_spec, "ephemeralContainers")):
        name = before.get("name")
        if name not in by_name:
            causes.append(Cause(path, "FieldValueForbidden",
                                f'Forbidden: existing ephemeral containers "{name}" may not be removed'))
        elif by_name[name] != before:
            causes.append(Cause(f"{path}[{i}]", "FieldValueForbidden",
                                f'Forbidden: existing ephemeral containers "{name}" may not be changed'))
    regular = _containers(spec, "containers") + _containers(spec, "initContainers")
    seen = {c.get("name") for c in regular}
    targets = seen.copy()
    for i, container in enumerate(ephemeral):
        at, name = f"{path}[{i}]", container.get("name")
        if not name:
            causes.append(Cause(f"{at}.name", "FieldValueRequired", "Required value"))
        elif not isinstance(name, str) or len(name) > 63 or not _DNS_LABEL.match(name):
            causes.append(Cause(f"{at}.name", "FieldValueInvalid",
                                f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower case '
                                "alphanumeric characters or '-', and must start and end with an alphanumeric character"))
        elif name in seen:
            causes.append(Cause(f"{at}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        seen.add(name)
        if not container.get("image"):
            causes.append(Cause(f"{at}.image", "FieldValueRequired", "Required value"))
        target = container.get("targetContainerName")
        if target and target not in targets:
            causes.append(Cause(f"{at}.targetContainerName", "FieldValueNotFound", f'Not found: "{target}"'))
        for key in FORBIDDEN_FIELDS:
            if container.get(key):
                causes.append(Cause(f"{at}.{key}", "FieldValueForbidden",
                                    "Forbidden: cannot be set for an Ephemeral Container"))
        for j, mount in enumerate(container.get("volumeMounts") or []):
            if isinstance(mount, dict) and mount.get("subPath"):
                causes.append(Cause(f"{at}.volumeMounts[{j}].subPath", "FieldValueForbidden",
                                    "Forbidden: cannot be set for an Ephemeral Container"))
    return causes
