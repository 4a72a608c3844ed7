"""CustomResourceDefinitions: checking them, and turning each served version into a kind the
server serves (discovery, schema, subresources, printer columns), as
apiextensions-apiserver does the moment a CRD is Established.
"""

from __future__ import annotations

import re
from typing import Any

from trainctl.cluster.apiserver.admission import cel
from trainctl.cluster.apiserver.apimachinery import errors, jsonpath
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType

Obj = dict[str, Any]
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_crd(crd: Obj) -> list[Cause]:
    causes: list[Cause] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    plural = names.get("plural") or ""
    if not group:
        causes.append(Cause("spec.group", "FieldValueRequired", "Required value"))
    elif "." not in group:
        causes.append(Cause("spec.group", "FieldValueInvalid", f'Invalid value: "{group}": should be a domain with at least one dot'))
    if not plural:
        causes.append(Cause("spec.names.plural", "FieldValueRequired", "Required value"))
    elif not _DNS_LABEL.match(plural):
        causes.append(Cause("spec.names.plural", "FieldValueInvalid", f'Invalid value: "{plural}": a lowercase RFC 1123 label'))
    if not names.get("kind"):
        causes.append(Cause("spec.names.kind", "FieldValueRequired", "Required value"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(Cause("spec.scope", "FieldValueNotSupported",
                            f'Unsupported value: "{spec.get("scope", "")}": supported values: "Cluster", "Namespaced"'))
    name = crd.get("metadata", {}).get("name", "")
    if plural and group and name != f"{plural}.{group}":
        causes.append(Cause("metadata.name", "FieldValueInvalid",
                            f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(Cause("spec.versions", "FieldValueInvalid", "Invalid value: null: must have exactly one version marked as storage version"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(Cause("spec.versions", "FieldValueInvalid",
                            'Invalid value: "array": must have exactly one version marked as storage version'))
    for i, version in enumerate(versions):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if not version.get("name"):
            causes.append(Cause(f"spec.versions[{i}].name", "FieldValueRequired", "Required value"))
        if schema is None:
            causes.append(Cause(f"spec.versions[{i}].schema.openAPIV3Schema", "FieldValueRequired",
                                "Required value: schemas are required"))
        for j, column in enumerate(version.get("additionalPrinterColumns") or []):
            causes += _path_problems(column.get("jsonPath", ""), f"spec.versions[{i}].additionalPrinterColumns[{j}].jsonPath")
        scale = (version.get("subresources") or {}).get("scale") or {}
        for key in ("specReplicasPath", "statusReplicasPath", "labelSelectorPath"):
            if key in scale:
                causes += _path_problems(scale[key], f"spec.versions[{i}].subresources.scale.{key}", plain=True)
        if schema is not None:
            where = f"spec.versions[{i}].schema.openAPIV3Schema"
            malformed = _schema_problems(schema, where)
            causes += malformed or cel.compile_errors(schema, where)
    return causes


def _path_problems(path: str, field: str, plain: bool = False) -> list[Cause]:
    try:
        if plain:
            jsonpath.fields_of(path)
        else:
            jsonpath.parse(path)
    except errors.ApiError as exc:
        return [Cause(field, "FieldValueInvalid", f'Invalid value: "{path}": {exc.message}')]
    return []


_SCHEMA_LISTS = ("required", "enum", "x-kubernetes-validations", "allOf", "anyOf", "oneOf")


def _schema_problems(node: Any, path: str) -> list[Cause]:
    """Schema nodes of the wrong JSON type (which pruning and validation could not walk)."""
    if not isinstance(node, dict):
        return [Cause(path, "FieldValueInvalid", "Invalid value: must be an object")]
    problems: list[Cause] = []
    for key in _SCHEMA_LISTS:
        if key in node and not isinstance(node[key], list):
            problems.append(Cause(f"{path}.{key}", "FieldValueInvalid", "Invalid value: must be an array"))
    if "type" in node and node["type"] not in ("object", "array", "string", "integer", "number", "boolean"):
        problems.append(Cause(f"{path}.type", "FieldValueNotSupported",
                              f'Unsupported value: "{node["type"]}": supported values: "array", "boolean", "integer", '
                              '"number", "object", "string"'))
    properties = node.get("properties", {})
    if not isinstance(properties, dict):
        problems.append(Cause(f"{path}.properties", "FieldValueInvalid", "Invalid value: must be an object"))
    else:
        for key, sub in properties.items():
            problems += _schema_problems(sub, f"{path}.properties[{key}]")
    if "items" in node:
        problems += _schema_problems(node["items"], f"{path}.items")
    if "additionalProperties" in node and not isinstance(node["additionalProperties"], bool):
        problems += _schema_problems(node["additionalProperties"], f"{path}.additionalProperties")
    for key in ("allOf", "anyOf", "oneOf"):
        for j, sub in enumerate(node.get(key) or [] if isinstance(node.get(key), list) else []):
            problems += _schema_problems(sub, f"{path}.{key}[{j}]")
    for j, rule in enumerate(node.get("x-kubernetes-validations") or [] if isinstance(node.get("x-kubernetes-validations"), list) else []):
        if not isinstance(rule, dict):
            problems.append(Cause(f"{path}.x-kubernetes-validations[{j}]", "FieldValueInvalid", "Invalid value: must be an object"))
    return problems


def resource_types(crd: Obj) -> list[ResourceType]:
    spec = crd["spec"]
    names = spec["names"]
    types = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        subs = tuple(s for s in ("status", "scale") if s in subresources)
        scale = subresources.get("scale")
        types.append(ResourceType(
            group=spec["group"],
            version=version["name"],
            plural=names["plural"],
            kind=names["kind"],
            singular=names.get("singular") or names["kind"].lower(),
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            subresources=subs,
            status_on_create="status" in subs,
            crd_name=crd["metadata"]["name"],
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            printer_columns=list(version.get("additionalPrinterColumns") or []),
            scale=dict(scale) if isinstance(scale, dict) else None,
        ))
    return types


def established_status(crd: Obj, now: str) -> Obj:
    spec = crd["spec"]
    names = dict(spec["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", f"{names['kind']}List")
    stored = list((crd.get("status") or {}).get("storedVersions") or [])
    for version in spec.get("versions") or []:
        if version.get("storage") and version["name"] not in stored:
            stored.append(version["name"])
    previous = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}

    def condition(kind: str, reason: str, message: str) -> Obj:
        old = previous.get(kind)
        since = old["lastTransitionTime"] if old and old.get("status") == "True" else now
        return {"type": kind, "status": "True", "lastTransitionTime": since, "reason": reason, "message": message}

    return {
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": names,
        "storedVersions": stored,
    }


def crd_defaults(crd: Obj) -> None:
    spec = crd.setdefault("spec", {})
    names = spec.setdefault("names", {})
    if names.get("kind"):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})
    for version in spec.get("versions") or []:
        version.setdefault("served", True)
