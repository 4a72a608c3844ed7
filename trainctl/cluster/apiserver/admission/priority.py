"""PriorityClasses and kube-apiserver's ``Priority`` admission plugin.

A pod names a class (``spec.priorityClassName``); on create the plugin resolves it to
``spec.priority`` and ``spec.preemptionPolicy``, the scheduler's inputs: the class named, or
else the ``globalDefault`` class, or else priority 0. A class that does not exist is a 403, and
so is a pod that states a priority (or a preemption policy) other than its class gives. An
update keeps what the create resolved. At most one class is ``globalDefault``; a class's
``value`` and ``preemptionPolicy`` never change; names starting ``system-`` are kube's two
built-in classes only, which every cluster has from its start (``SYSTEM_PRIORITY_CLASSES``),
and no user-defined class may rank above 1000000000.
"""

from __future__ import annotations

from typing import Any

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause

Obj = dict[str, Any]

GROUP = "scheduling.k8s.io"
STORAGE_KEY = f"{GROUP}/priorityclasses"
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PREFIX = "system-"
PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")
_SYSTEM = {
    "system-node-critical": (SYSTEM_CRITICAL_PRIORITY + 1000,
                             "Used for system critical pods that must not be moved from their current node."),
    "system-cluster-critical": (SYSTEM_CRITICAL_PRIORITY,
                                "Used for system critical pods that must run in the cluster, but can be moved to "
                                "another node if necessary."),
}


def system_priority_classes() -> list[Obj]:
    """kube's built-in classes, as kube-apiserver creates them at its start."""
    return [{"apiVersion": f"{GROUP}/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
             "description": description, "preemptionPolicy": "PreemptLowerPriority"}
            for name, (value, description) in _SYSTEM.items()]


def _system_class_problem(name: str, value: Any, global_default: bool) -> str | None:
    known = _SYSTEM.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if value != known[0]:
        return f"value of {name} PriorityClass must be {known[0]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return None


def validate_class(obj: Any, old: Any) -> list[Cause]:
    """kube's ValidatePriorityClass and ValidatePriorityClassUpdate."""
    if not isinstance(obj, dict):
        return []
    causes = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    value = obj.get("value")
    if name.startswith(SYSTEM_PREFIX):
        problem = _system_class_problem(name, value, bool(obj.get("globalDefault")))
        if problem:
            causes.append(Cause("metadata.name", "FieldValueForbidden",
                                f"Forbidden: priority class names with '{SYSTEM_PREFIX}' prefix are reserved for "
                                f"system use only. error: {problem}"))
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        causes.append(Cause("value", "FieldValueForbidden",
                            f"Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"))
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        causes.append(Cause("preemptionPolicy", "FieldValueNotSupported",
                            f'Unsupported value: "{policy}": supported values: "Never", "PreemptLowerPriority"'))
    if isinstance(old, dict):
        if value != old.get("value"):
            causes.append(Cause("value", "FieldValueForbidden", "Forbidden: may not be changed in an update."))
        if policy != old.get("preemptionPolicy"):
            causes.append(Cause("preemptionPolicy", "FieldValueInvalid", f'Invalid value: "{policy}": field is immutable'))
    return causes


def check_default(new: Obj, classes: list[Obj]) -> None:
    """At most one class is ``globalDefault``: 403 for a second."""
    if not new.get("globalDefault"):
        return
    name = new["metadata"]["name"]
    for other in classes:
        if other.get("globalDefault") and other["metadata"]["name"] != name:
            raise errors.forbidden("priorityclasses", GROUP, name,
                                   f"PriorityClass {other['metadata']['name']} is already marked as default. "
                                   "Only one default can exist")


def admit_pod(pod: Obj, classes: list[Obj]) -> None:
    """A new pod's ``spec.priority`` and ``spec.preemptionPolicy`` from its class."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    name = pod["metadata"].get("name", "")
    class_name = spec.get("priorityClassName")
    if class_name:
        found = next((c for c in classes if c["metadata"]["name"] == class_name), None)
        if found is None:
            raise errors.forbidden("pods", "", name, f"no PriorityClass with name {class_name} was found")
    else:
        found = next((c for c in classes if c.get("globalDefault")), None)
        if found is not None:
            spec["priorityClassName"] = found["metadata"]["name"]
    priority = found.get("value", 0) if found is not None else 0
    stated = spec.get("priority")
    if stated is not None and stated != priority:
        raise errors.forbidden("pods", "", name, f"the integer value of priority ({stated}) must not be provided in "
                               f"pod spec; priority admission controller computed {priority} from the given PriorityClass name")
    spec["priority"] = priority
    policy = found.get("preemptionPolicy") if found is not None else None
    if policy is not None:
        if spec.get("preemptionPolicy") not in (None, policy):
            raise errors.forbidden("pods", "", name, f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) "
                                   f"must not be provided in pod spec; priority admission controller computed {policy} "
                                   "from the given PriorityClass name")
        spec["preemptionPolicy"] = policy


def keep_on_update(pod: Obj, old: Obj) -> None:
    """What the create resolved stays when an update leaves it out."""
    spec, old_spec = pod.get("spec"), old.get("spec") or {}
    if not isinstance(spec, dict):
        return
    for key in ("priority", "preemptionPolicy"):
        if spec.get(key) is None and old_spec.get(key) is not None:
            spec[key] = old_spec[key]
