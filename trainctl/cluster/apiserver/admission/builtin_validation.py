"""Validation of built-in objects against Kubernetes' own schemas, plus the rules they cannot say.

kube-apiserver decodes a built-in object into its Go type (wrong JSON types, unknown fields)
and then runs the kind's validation (names, ports, quantities, required fields). Here both
come from one walk over the object, guided by the kind's published schema
(``builtin_schemas``), compiled once per kind into ``_Node`` trees:

* types and required fields, from the schema;
* unknown fields are dropped, as Go decoding drops them, and reported as warnings, or as a 400
  under ``fieldValidation=Strict``;
* the rules a schema cannot express (DNS-1123 names, port ranges, quantities, label syntax,
  enumerations the Go types only document) come from the tables of ``builtin_rules``, keyed
  by the schema definition and property they guard, or by the kind for rules between fields.

Every problem becomes one ``Cause`` with the Kubernetes field path and message wording, and
one 422 lists them all. On updates, values equal to the stored ones are not checked again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from trainctl.cluster.apiserver.admission import builtin_rules, builtin_schemas
from trainctl.cluster.apiserver.admission.builtin_rules import Rule
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType, builtin_types

Obj = dict[str, Any]

# --- schemas compiled once per kind ----------------------------------------------------------

# The exact Python types JSON decoding gives each JSON type (bool is not an integer here).
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "object": (dict,),
    "array": (list,),
}


class _Node:
    """One schema position: what a value there may be, and how to walk into it."""

    __slots__ = ("additional", "exact", "items", "plain", "properties", "required", "rule", "rules", "type_names")

    def __init__(self) -> None:
        self.type_names: list[str] = []
        self.exact: frozenset[type] = frozenset()
        self.properties: dict[str, _Node] | None = None
        self.rules: dict[str, Rule] = {}
        self.additional: _Node | None = None
        self.items: _Node | None = None
        self.required: tuple[str, ...] = ()
        self.rule: Rule | None = None
        # property -> its exact types, for the properties that are plain scalars without rules
        # (filled on first use: while compiling, referenced definitions may be incomplete).
        self.plain: dict[str, frozenset[type]] | None = None

    def plain_properties(self) -> dict[str, frozenset[type]]:
        if self.plain is None:
            self.plain = {
                key: sub.exact for key, sub in (self.properties or {}).items()
                if sub.exact and not sub.exact & {dict, list} and sub.rule is None and key not in self.rules}
        return self.plain


_ANY = _Node()


@functools.cache
def _compiled() -> dict[str, _Node]:
    return {}


def _definition(name: str) -> _Node:
    nodes = _compiled()
    node = nodes.get(name)
    if node is None:
        node = nodes[name] = _Node()  # registered first: definitions refer to themselves
        _fill(node, builtin_schemas.definitions()[name], name)
        node.rule = builtin_rules.DEFINITION_RULES.get(name)
    return node


def _node(schema: Any) -> _Node:
    if not isinstance(schema, dict):
        return _ANY
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _definition(builtin_schemas.ref_name(ref))
    node = _Node()
    _fill(node, schema, None)
    return node


def _fill(node: _Node, schema: Obj, name: str | None) -> None:
    alternatives = [schema, *(s for s in schema.get("oneOf") or [] if isinstance(s, dict))]
    for alternative in alternatives:
        declared = alternative.get("type")
        for type_name in declared if isinstance(declared, list) else [declared] if declared else []:
            if type_name in _JSON_TYPES and type_name not in node.type_names:
                node.type_names.append(type_name)
    node.exact = frozenset(t for n in node.type_names for t in _JSON_TYPES[n])
    if isinstance(schema.get("properties"), dict):
        node.properties = {key: _node(sub) for key, sub in schema["properties"].items()}
        if name is not None:
            node.rules = {key: rule for (owner, key), rule in builtin_rules.PROPERTY_RULES.items() if owner == name}
    if isinstance(schema.get("additionalProperties"), dict):
        node.additional = _node(schema["additionalProperties"])
    if isinstance(schema.get("items"), dict):
        node.items = _node(schema["items"])
    node.required = tuple(schema.get("required") or ())


# --- the walk ---------------------------------------------------------------------------------


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return builtin_rules.quoted(value)


def _no_old(_key: Any) -> None:
    return None


class _Walk:
    """One object's walk. Scalars whose position has no rule are type-checked inline, and
    field paths are formatted only where a rule runs or a problem is found: most of a valid
    object costs a type lookup per field."""

    __slots__ = ("causes", "unknown")

    def __init__(self) -> None:
        self.causes: list[Cause] = []
        self.unknown: list[str] = []

    def _wrong_type(self, node: _Node, value: Any, path: str) -> None:
        expected = ",".join(node.type_names)
        self.causes.append(Cause(path, "FieldValueTypeInvalid",
                                 f"Invalid value: {_describe(value)}: {path} in body must be of type {expected}: "
                                 f"{_describe(value)}"))

    def check(self, node: _Node, value: Any, old: Any, path: str) -> None:
        if value is None or (old is not None and value == old):
            return  # null decodes to the zero value; unchanged values are not checked again
        kind = type(value)
        if node.exact and kind not in node.exact:
            self._wrong_type(node, value, path)
            return
        if node.rule is not None:
            self.causes += node.rule(value, path)
        if kind is dict:
            self._object(node, value, old if type(old) is dict else None, path)
        elif kind is list and node.items is not None:
            olds = old if type(old) is list else ()
            self._members(node.items, enumerate(value), lambda i: olds[i] if i < len(olds) else None, path)

    def _members(self, node: _Node, entries: Any, old_of: Callable[[Any], Any], path: str) -> None:
        """List items or map values, all of schema ``node``, at ``path[key]``."""
        for key, item in entries:
            kind = type(item)
            if kind is not dict and kind is not list and node.rule is None:
                if item is not None and node.exact and kind not in node.exact:
                    self._wrong_type(node, item, f"{path}[{key}]")
                continue
            self.check(node, item, old_of(key), f"{path}[{key}]")

    def _object(self, node: _Node, value: Obj, old: Obj | None, path: str) -> None:
        prefix = f"{path}." if path else ""
        for key in node.required:
            if value.get(key) is None and (old is None or old.get(key) is not None):  # missing before: not new
                self.causes.append(Cause(prefix + key, "FieldValueRequired", "Required value"))
        properties = node.properties
        if properties is None:
            if node.additional is not None:
                self._members(node.additional, value.items(), old.get if old else _no_old, path)
            return
        rules = node.rules
        plain = node.plain if node.plain is not None else node.plain_properties()
        unknown = None
        for key, child in value.items():
            exact = plain.get(key)
            if exact is not None:
                if type(child) not in exact and child is not None and (old is None or child != old.get(key)):
                    self._wrong_type(properties[key], child, prefix + key)
                continue
            sub = properties.get(key)
            if sub is None:
                if node.additional is not None:
                    self.check(node.additional, child, old.get(key) if old else None, f"{path}[{key}]")
                else:
                    unknown = [*(unknown or []), key]
                continue
            kind = type(child)
            if kind is not dict and kind is not list and sub.rule is None and key not in rules:
                if child is not None and sub.exact and kind not in sub.exact and (old is None or child != old.get(key)):
                    self._wrong_type(sub, child, prefix + key)
                continue
            if child is None:
                continue
            rule = rules.get(key)
            if rule is not None and (old is None or child != old.get(key)):
                self.causes += rule(child, prefix + key)
            self.check(sub, child, old.get(key) if old else None, prefix + key)
        for key in unknown or ():
            del value[key]  # as decoding into the Go type drops it
            self.unknown.append(prefix + key)


@functools.cache
def _root(group: str, version: str, kind: str) -> _Node | None:
    name = builtin_schemas.name_for(group, version, kind)
    return _definition(name) if name is not None else None


def check(rtype: ResourceType, obj: Obj, old: Obj | None) -> tuple[list[Cause], list[str]]:
    """The problems of a built-in object, and the unknown fields it had (now removed)."""
    root = _root(rtype.group, rtype.version, rtype.kind)
    if root is None:
        return [], []
    walk = _Walk()
    walk.check(root, obj, old, "")
    object_rule = builtin_rules.OBJECT_RULES.get((rtype.group, rtype.kind))
    if object_rule is not None:
        walk.causes += object_rule(obj, old)
    name_rule = builtin_rules.NAME_RULES.get((rtype.group, rtype.kind))
    name = obj.get("metadata", {}).get("name")
    if name_rule is not None and isinstance(name, str) and name and (old is None or name != old["metadata"].get("name")):
        detail, pattern, limit = name_rule
        if len(name) > limit:
            walk.causes.append(builtin_rules.invalid("metadata.name", name, f"must be no more than {limit} characters"))
        elif not pattern.fullmatch(name):
            walk.causes.append(builtin_rules.invalid("metadata.name", name, detail))
    return walk.causes, walk.unknown


def admit(rtype: ResourceType, obj: Obj, old: Obj | None, field_validation: str) -> list[str]:
    """Validate a new state of a built-in object (422 with every problem), drop its unknown
    fields (400 under ``fieldValidation=Strict``); returns the warnings to send."""
    causes, unknown = check(rtype, obj, old)
    if unknown and field_validation == "Strict":
        listed = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise errors.bad_request(f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
                                 f"strict decoding error: {listed}")
    if causes:
        raise errors.invalid(rtype.kind, rtype.group, obj.get("metadata", {}).get("name", ""), causes)
    return [f'unknown field "{p}"' for p in unknown] if field_validation != "Ignore" else []


def _prepare() -> None:
    for rtype in builtin_types():
        _root(rtype.group, rtype.version, rtype.kind)


# Compiled when the server imports this module (about 15 ms), so that the schemas are among the
# long-lived objects the server moves out of the cycle collector's way before serving.
_prepare()
