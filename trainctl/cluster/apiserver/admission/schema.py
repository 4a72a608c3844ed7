"""A CRD's structural schema applied to custom objects: pruning, defaulting, validation.

These follow apiextensions-apiserver, not JSON Schema: ``nullable``,
``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields`` and
``x-kubernetes-embedded-resource`` change what a value may be and what is kept, and every
problem is reported with a Kubernetes field path (``spec.pytorchReplicaSpecs[Master].replicas``)
so that one 422 lists them all. On updates, values equal to the stored ones are not checked
again (ratcheting), which also keeps status writes from re-running the spec's rules.
``x-kubernetes-validations`` (CEL) rules are compiled once per CRD by ``cel`` and evaluated
here, as apiextensions-apiserver does: only once the whole object has passed the schema's
type, required, enum and size checks, since a rule handed a value of the wrong type could only
fail with an evaluation error; otherwise, if the schema has rules, one cause says they were
not checked.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from trainctl.cluster.apiserver.admission import cel
from trainctl.cluster.apiserver.apimachinery.errors import Cause

Obj = dict[str, Any]
_ROOT_KEPT = ("apiVersion", "kind", "metadata")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _index(path: str, key: Any) -> str:
    return f"{path}[{key}]"


def _schema_type(schema: Obj) -> str | None:
    return schema.get("type")


def _keeps_unknown(schema: Obj) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


# --- pruning and defaulting -----------------------------------------------------------


def prune(value: Any, schema: Obj, path: str = "", root: bool = True) -> list[str]:
    """Drop fields the schema does not know, in place; returns the dropped paths."""
    dropped: list[str] = []
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        embedded = root or schema.get("x-kubernetes-embedded-resource")
        for key in list(value):
            if embedded and key in _ROOT_KEPT:
                continue
            child_path = _join(path, key)
            if properties is not None and key in properties:
                dropped += prune(value[key], properties[key], child_path, root=False)
            elif isinstance(additional, dict):
                dropped += prune(value[key], additional, _index(path, key), root=False)
            elif additional is True or _keeps_unknown(schema):
                continue
            elif properties is None and _schema_type(schema) != "object" and not root:
                continue  # not an object schema: type validation reports it
            else:
                del value[key]
                dropped.append(child_path)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            dropped += prune(item, schema["items"], _index(path, i), root=False)
    return dropped


def apply_defaults(value: Any, schema: Obj) -> None:
    """Fill ``default`` values for absent (or null, non-nullable) properties, in place."""
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if "default" in sub and (key not in value or (value[key] is None and not sub.get("nullable"))):
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                apply_defaults(value[key], sub)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for key in value:
                if key not in (schema.get("properties") or {}):
                    apply_defaults(value[key], additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


# --- validation -----------------------------------------------------------------------

_TYPE_NAMES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


def _describe(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return f'"{_TYPE_NAMES[type(value)]}"'
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _type_ok(value: Any, expected: str) -> bool:
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


# Schema problems after which the CEL rules are not run (apiextensions-apiserver's "blocking" errors).
_BLOCKING = frozenset({"FieldValueTypeInvalid", "FieldValueRequired", "FieldValueNotSupported",
                       "FieldValueTooLong", "FieldValueTooMany"})
RULES_NOT_CHECKED = Cause("<nil>", "FieldValueInvalid",
                          'Invalid value: "null": some validation rules were not checked because the object was '
                          "invalid; correct the existing errors to complete validation")


def validate(value: Any, schema: Obj, old: Any = None, path: str = "", root: bool = True) -> list[Cause]:
    """Every schema problem of ``value`` with field paths, then, when there is none that blocks
    them, every CEL rule's."""
    causes = _schema_causes(value, schema, old, path, root)
    if any(cause.reason in _BLOCKING for cause in causes):
        return [*causes, RULES_NOT_CHECKED] if cel.has_rules(schema) else causes
    _rules(value, schema, old, path, causes, root)
    return causes


def _schema_causes(value: Any, schema: Obj, old: Any, path: str, root: bool) -> list[Cause]:
    causes: list[Cause] = []
    _validate(value, schema, old, path, causes, root)
    return causes


def _wrong_type(path: str, value: Any, expected: str) -> Cause:
    """kube-openapi's words: the value's JSON type, never the value (``Invalid value: "string"``)."""
    found = "null" if value is None else _TYPE_NAMES.get(type(value), type(value).__name__)
    return Cause(path, "FieldValueTypeInvalid",
                 f'Invalid value: "{found}": {path or "body"} in body must be of type {expected}: "{found}"')


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause(path, "FieldValueInvalid", f"Invalid value: {_describe(value)}: {detail}")


def _validate(value: Any, schema: Obj, old: Any, path: str, causes: list[Cause], root: bool) -> None:
    if not root and old is not None and value == old:
        return  # unchanged since it was stored: not checked again (Kubernetes' validation ratcheting)
    where = path or "body"
    if value is None:
        if not schema.get("nullable") and not root:
            expected = _schema_type(schema)
            if expected:
                causes.append(_wrong_type(path, value, expected))
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
            causes.append(_wrong_type(path, value, "integer,string"))
            return
    elif (expected := _schema_type(schema)) and not _type_ok(value, expected):
        causes.append(_wrong_type(path, value, expected))
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_describe(v) for v in schema["enum"])
        causes.append(Cause(path, "FieldValueNotSupported", f"Unsupported value: {_describe(value)}: supported values: {supported}"))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append(Cause(path, "FieldValueTooLong", f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            causes.append(_invalid(path, value, f"{where} in body should be at least {schema['minLength']} chars long"))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            causes.append(_invalid(path, value, f"{where} in body should match '{schema['pattern']}'"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema:
            low = schema["minimum"]
            if value < low or (schema.get("exclusiveMinimum") is True and value == low):
                op = "greater than" if schema.get("exclusiveMinimum") is True else "greater than or equal to"
                causes.append(_invalid(path, value, f"{where} in body should be {op} {low}"))
        if "maximum" in schema:
            high = schema["maximum"]
            if value > high or (schema.get("exclusiveMaximum") is True and value == high):
                op = "less than" if schema.get("exclusiveMaximum") is True else "less than or equal to"
                causes.append(_invalid(path, value, f"{where} in body should be {op} {high}"))
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append(Cause(path, "FieldValueTooMany", f"Too many: {len(value)}: must have at most {schema['maxItems']} items"))
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append(_invalid(path, value, f"{where} in body should have at least {schema['minItems']} items"))
    if isinstance(value, dict):
        for key in schema.get("required") or []:
            if key not in value:
                causes.append(Cause(_join(path, key), "FieldValueRequired", "Required value"))
    for child, child_schema, old_child, child_path in _children(value, schema, old, path, root):
        _validate(child, child_schema, old_child, child_path, causes, False)
    if isinstance(value, dict) and "maxProperties" in schema and len(value) > schema["maxProperties"]:
        causes.append(Cause(path, "FieldValueTooMany", f"Too many: {len(value)}: must have at most {schema['maxProperties']} items"))
    for sub in schema.get("allOf") or []:
        _validate(value, sub, old, path, causes, root)
    if schema.get("anyOf") and not any(not _schema_causes(value, s, old, path, root) for s in schema["anyOf"]):
        causes.append(_invalid(path, value, f"{where} in body must match at least one schema in anyOf"))
    if schema.get("oneOf") and sum(not _schema_causes(value, s, old, path, root) for s in schema["oneOf"]) != 1:
        causes.append(_invalid(path, value, f"{where} in body must match exactly one schema in oneOf"))


def _rules(value: Any, schema: Obj, old: Any, path: str, causes: list[Cause], root: bool) -> None:
    """The CEL rules of every schema node ``value`` reaches, with the same ratcheting."""
    if value is None or (not root and old is not None and value == old):
        return
    if schema.get("x-kubernetes-validations"):
        causes += cel.check(schema, value, old, path)
    for child, child_schema, old_child, child_path in _children(value, schema, old, path, root):
        _rules(child, child_schema, old_child, child_path, causes, False)
    for sub in schema.get("allOf") or []:
        _rules(value, sub, old, path, causes, root)


def _children(value: Any, schema: Obj, old: Any, path: str, root: bool) -> Iterator[tuple[Any, Obj, Any, str]]:
    """(value, schema, stored value, path) of each list item and object field the schema describes."""
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        old_items = old if isinstance(old, list) else []
        for i, item in enumerate(value):
            yield item, items, old_items[i] if i < len(old_items) else None, _index(path, i)
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, child in value.items():
            if root and key in _ROOT_KEPT:
                continue
            if key in properties:
                yield child, properties[key], old_map.get(key), _join(path, key)
            elif isinstance(additional, dict):
                yield child, additional, old_map.get(key), _index(path, key)
