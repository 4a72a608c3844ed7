"""The building blocks of validation rules: defensive reads of a wire dict, the pod-template rules.

Rules run on the raw dict before (or without) a successful parse, so a value may have any
type; these reads return an empty dict or None for a wrong one, which parsing reports. Each
kind's own rules (in its module) and the rules every kind shares (``trainctl.api.validation``)
are written with them.
"""

from __future__ import annotations

from typing import Any, Optional

from trainctl.api.errors import FieldError, json_type


def dict_at(obj: Any, key: str) -> dict[str, Any]:
    """``obj[key]`` when both are objects, else an empty dict."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def int_or_none(value: Any) -> Optional[int]:
    """An integer field's value, or None when unset or of the wrong type (bool is not an int)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def validate_template(path: str, rspec: dict[str, Any], container_name: str) -> list[FieldError]:
    """The reference webhook's container rules, plus the types the model leaves to us."""
    template = rspec.get("template")
    containers_path = f"{path}.template.spec.containers"
    if template is not None and not isinstance(template, dict):
        return []  # parsing reported it
    pod_spec = (template or {}).get("spec")
    if pod_spec is not None and not isinstance(pod_spec, dict):
        return [FieldError(f"{path}.template.spec", "TypeInvalid", f"must be an object, not {json_type(pod_spec)}")]
    containers = (pod_spec or {}).get("containers")
    if containers is not None and not isinstance(containers, list):
        return [FieldError(containers_path, "TypeInvalid", f"must be an array, not {json_type(containers)}")]
    errors = []
    if not containers:
        errors.append(FieldError(containers_path, "Required", "must be specified" + _misplaced_containers(path, rspec)))
    found = False
    for i, container in enumerate(containers or ()):
        cpath = f"{containers_path}[{i}]"
        if not isinstance(container, dict):
            errors.append(FieldError(cpath, "TypeInvalid", f"must be an object, not {json_type(container)}"))
            continue
        name, image = container.get("name"), container.get("image")
        if name is None or name == "":
            errors.append(FieldError(f"{cpath}.name", "Required", "Required value"))
        elif not isinstance(name, str):
            errors.append(FieldError(f"{cpath}.name", "TypeInvalid", f"must be a string, not {json_type(name)}"))
        found = found or name == container_name
        if image is None or image == "":
            errors.append(FieldError(f"{cpath}.image", "Required", "must be required"))
        elif not isinstance(image, str):
            errors.append(FieldError(f"{cpath}.image", "TypeInvalid", f"must be a string, not {json_type(image)}"))
    if not found:
        errors.append(FieldError(containers_path, "Required", f"must have at least one container with name {container_name}"))
    return errors


def _misplaced_containers(path: str, rspec: dict[str, Any]) -> str:
    """Where a ``containers`` list written one or two levels too shallow was found, as a hint."""
    template = rspec.get("template")
    for where, holder in ((f"{path}.template", template), (path, rspec)):
        if isinstance(holder, dict) and "containers" in holder:
            return f"; found `containers` at {where}.containers; it belongs under template.spec"
    return ""
