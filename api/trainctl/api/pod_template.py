"""A replica's pod template checked as kube-apiserver will check the pods made from it.

The job's CRD keeps pod templates as they are written (``x-kubernetes-preserve-unknown-fields``),
so the API server accepts a job whose template no pod can be made from: ``cpu: lots`` is found
only when the controller creates the first pod, as a ``FailedCreatePod`` Event, and the job sits
with no pods. Checking the template with the rules the API server applies to Pods
(``trainctl.api.pod_rules``) finds it before the job is submitted, at the job's own field path:
``spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].resources.limits[cpu]``.

The walk follows only the part of Kubernetes' Pod schema those rules reach (``_REACHES``):
containers, their ports, environment and resources, volumes and the pod's metadata. A value of
the wrong type where the walk expects an object or a list is reported; elsewhere a rule skips a
value of the wrong type, as the server's schema reports it as a type error when the pod is made.
"""

from __future__ import annotations

from typing import Any, Literal

from trainctl.api import pod_rules
from trainctl.api.errors import FieldError, json_type
from trainctl.api.pod_rules import CORE, META, QUANTITY

Shape = Literal["object", "list", "map"]

_TEMPLATE = CORE + "PodTemplateSpec"
_CONTAINER = CORE + "Container"
_RESOURCES = CORE + "ResourceRequirements"
# definition -> property -> (the property's definition, how it holds values of it): the part of
# the Pod schema the pod rules guard.
_REACHES: dict[str, dict[str, tuple[str, Shape]]] = {
    _TEMPLATE: {"metadata": (META + "ObjectMeta", "object"), "spec": (CORE + "PodSpec", "object")},
    CORE + "PodSpec": {
        "containers": (_CONTAINER, "list"),
        "initContainers": (_CONTAINER, "list"),
        "volumes": (CORE + "Volume", "list"),
        "resources": (_RESOURCES, "object"),
    },
    _CONTAINER: {
        "ports": (CORE + "ContainerPort", "list"),
        "env": (CORE + "EnvVar", "list"),
        "resources": (_RESOURCES, "object"),
    },
    _RESOURCES: {"limits": (QUANTITY, "map"), "requests": (QUANTITY, "map")},
}
# definition -> the fields Kubernetes' Pod schema requires of it.
_REQUIRED: dict[str, tuple[str, ...]] = {
    _CONTAINER: ("name",),
    CORE + "ContainerPort": ("containerPort",),
    CORE + "EnvVar": ("name",),
    CORE + "Volume": ("name",),
}


def validate_pod_template(template: Any, path: str) -> list[FieldError]:
    """Every problem the API server would find in a pod made from ``template`` (at ``path``)."""
    return _check(_TEMPLATE, template, path)


def _check(definition: str, value: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    rule = pod_rules.DEFINITION_RULES.get(definition)
    if rule is not None:
        errors += rule(value, path)
    if not isinstance(value, dict):
        return errors
    for field in _REQUIRED.get(definition, ()):
        if value.get(field) is None or value.get(field) == "":
            errors.append(FieldError(f"{path}.{field}", "Required", "Required value"))
    reaches = _REACHES.get(definition, {})
    for key, child in value.items():
        if child is None:
            continue
        here = f"{path}.{key}"
        rule = pod_rules.PROPERTY_RULES.get((definition, key))
        if rule is not None:
            errors += rule(child, here)
        if key in reaches:
            errors += _members(*reaches[key], child, here)
    return errors


def _members(definition: str, shape: Shape, value: Any, path: str) -> list[FieldError]:
    """The values a property holds, each checked as ``definition``."""
    entries: list[tuple[Any, Any]]
    if shape == "list":
        if not isinstance(value, list):
            return [FieldError(path, "TypeInvalid", f"must be an array, not {json_type(value)}")]
        entries = list(enumerate(value))
    elif not isinstance(value, dict):
        return [FieldError(path, "TypeInvalid", f"must be an object, not {json_type(value)}")]
    elif shape == "object":
        return _check(definition, value, path)
    else:
        entries = list(value.items())
    return [error for key, item in entries for error in _check(definition, item, f"{path}[{key}]")]
