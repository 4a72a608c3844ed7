"""Validation of built-in objects against Kubernetes' own schemas, plus the rules they cannot say.

kube-apiserver decodes a built-in object into its Go type (wrong JSON types, unknown fields)
and then runs the kind's validation (names, ports, quantities, required fields). Here both
come from one walk over the object, guided by the kind's published schema
(``builtin_schemas``), compiled once per kind into ``_Node`` trees:

* types and required fields, from the schema;
* unknown fields are dropped, as Go decoding drops them, and reported as warnings, or as a 400
  under ``fieldValidation=Strict``;
* the rules a schema cannot express (DNS-1123 names, port ranges, quantities, label syntax,
  enumerations the Go types only document) come from the ``_PROPERTY_RULES`` and
  ``_DEFINITION_RULES`` tables below, keyed by the schema definition and property they guard,
  so that they apply wherever that type appears.

Every problem becomes one ``Cause`` with the Kubernetes field path and message wording, and
one 422 lists them all. On updates, values equal to the stored ones are not checked again.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from . import builtin_schemas, errors
from .errors import Cause
from .registry import ResourceType, builtin_types

Obj = dict[str, Any]
Rule = Callable[[Any, str], list[Cause]]

# --- the rules schemas cannot express ---------------------------------------------------------

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_IANA_SVC_NAME = re.compile(r"[-a-z0-9]+")
_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?")
_QUANTITY_HINT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_SUFFIX_FACTORS = {"": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
                   "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
                   "P": Decimal("1e15"), "E": Decimal("1e18"), "Ki": Decimal(2**10), "Mi": Decimal(2**20),
                   "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60)}


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause(path, "FieldValueInvalid", f"Invalid value: {_quoted(value)}: {detail}")


_DNS_LABEL_MESSAGE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                      "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
                      "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_DNS_1035_LABEL_MESSAGE = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
                           "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
                           "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def _label_problem(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS_LABEL.fullmatch(value):
        return _DNS_LABEL_MESSAGE
    return None


def _dns_label(value: Any, path: str) -> list[Cause]:
    if not isinstance(value, str) or not value:
        return []  # absent: "required" reports it
    problem = _label_problem(value)
    return [_invalid(path, value, problem)] if problem else []


def _port_number(value: Any, path: str, *, allow_zero: bool = False) -> list[Cause]:
    if not isinstance(value, int) or isinstance(value, bool) or (allow_zero and value == 0):
        return []
    if not 1 <= value <= 65535:
        return [_invalid(path, value, "must be between 1 and 65535, inclusive")]
    return []


def _host_port(value: Any, path: str) -> list[Cause]:
    return _port_number(value, path, allow_zero=True)


def _port_name(value: Any, path: str) -> list[Cause]:
    if not isinstance(value, str) or not value:
        return []
    if len(value) > 15:
        return [_invalid(path, value, "must be no more than 15 characters")]
    if not _IANA_SVC_NAME.fullmatch(value) or not re.search("[a-z]", value) or "--" in value \
            or value.startswith("-") or value.endswith("-"):
        return [_invalid(path, value, "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), "
                         "contain at least one letter (a-z), and hyphens cannot be adjacent to other hyphens")]
    return []


def _port_or_name(value: Any, path: str) -> list[Cause]:
    return _port_name(value, path) if isinstance(value, str) else _port_number(value, path)


def _one_of(*allowed: str) -> Rule:
    supported = ", ".join(f'"{a}"' for a in allowed)

    def check(value: Any, path: str) -> list[Cause]:
        if isinstance(value, str) and value not in allowed:
            return [Cause(path, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {supported}')]
        return []
    return check


def _env_name(value: Any, path: str) -> list[Cause]:
    if isinstance(value, str) and value and (not value.isascii() or not value.isprintable() or "=" in value):
        return [_invalid(path, value, "a valid environment variable name must consist only of printable ASCII "
                         "characters other than '='")]
    return []


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity's value, or None if it does not follow the quantity grammar."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    return _parse_quantity_text(value)


@functools.lru_cache(maxsize=4096)  # a cluster uses few distinct quantities ("500m", "1Gi")
def _parse_quantity_text(value: str) -> Decimal | None:
    match = _QUANTITY.fullmatch(value)
    if match is None:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E"):
            return Decimal(number) * Decimal(10) ** int(suffix[1:])
        return Decimal(number) * _SUFFIX_FACTORS[suffix]
    except (InvalidOperation, OverflowError):
        return None


def _quantity(value: Any, path: str) -> list[Cause]:
    if value is None or parse_quantity(value) is not None:
        return []
    return [_invalid(path, value, _QUANTITY_HINT)]


def _resource_list(value: Any, path: str) -> list[Cause]:
    causes = []
    for name, quantity in (value or {}).items() if isinstance(value, dict) else ():
        parsed = parse_quantity(quantity)
        if parsed is not None and parsed < 0:
            causes.append(_invalid(f"{path}[{name}]", quantity, "must be greater than or equal to 0"))
    return causes


def _resource_requirements(value: Any, path: str) -> list[Cause]:
    if not isinstance(value, dict) or not isinstance(value.get("limits"), dict) or not isinstance(value.get("requests"), dict):
        return []
    causes = []
    for name, request in value["requests"].items():
        wanted, limit = parse_quantity(request), parse_quantity(value["limits"].get(name))
        if wanted is not None and limit is not None and wanted > limit:
            causes.append(_invalid(f"{path}.requests[{name}]", request,
                                   f"must be less than or equal to {name} limit of {value['limits'][name]}"))
    return causes


def _label_map(value: Any, path: str) -> list[Cause]:
    causes = []
    for key, label in (value.items() if isinstance(value, dict) else ()):
        causes += _qualified_key(key, path)
        if isinstance(label, str) and (len(label) > 63 or not _LABEL_VALUE.fullmatch(label)):
            causes.append(_invalid(path, label, "a valid label must be an empty string or consist of alphanumeric "
                                   "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                                   "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                                   "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"))
    return causes


def _annotation_map(value: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for key in (value if isinstance(value, dict) else ()):
        causes += _qualified_key(key, path)
    return causes


def _qualified_key(key: str, path: str) -> list[Cause]:
    prefix, _, name = key.rpartition("/")
    if ("/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix))) \
            or not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return [_invalid(path, key, "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                         "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                         "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
                         "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")]
    return []


def _config_keys(value: Any, path: str) -> list[Cause]:
    causes = []
    for key in (value if isinstance(value, dict) else ()):
        if len(key) > 253 or not _CONFIG_KEY.fullmatch(key):
            causes.append(_invalid(f"{path}[{key}]", key, "a valid config key must consist of alphanumeric "
                                   "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
                                   "regex used for validation is '[-._a-zA-Z0-9]+')"))
    return causes


_CORE = "io.k8s.api.core.v1."
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_PROTOCOL = _one_of("SCTP", "TCP", "UDP")
# (definition, property) -> the rule for that property's value, wherever the definition is used.
_PROPERTY_RULES: dict[tuple[str, str], Rule] = {
    (_META + "ObjectMeta", "labels"): _label_map,
    (_META + "ObjectMeta", "annotations"): _annotation_map,
    (_CORE + "Container", "name"): _dns_label,
    (_CORE + "Container", "imagePullPolicy"): _one_of("Always", "IfNotPresent", "Never"),
    (_CORE + "Container", "terminationMessagePolicy"): _one_of("FallbackToLogsOnError", "File"),
    (_CORE + "Container", "resources"): _resource_requirements,
    (_CORE + "ContainerPort", "containerPort"): _port_number,
    (_CORE + "ContainerPort", "hostPort"): _host_port,
    (_CORE + "ContainerPort", "name"): _port_name,
    (_CORE + "ContainerPort", "protocol"): _PROTOCOL,
    (_CORE + "EnvVar", "name"): _env_name,
    (_CORE + "Volume", "name"): _dns_label,
    (_CORE + "ResourceRequirements", "requests"): _resource_list,
    (_CORE + "ResourceRequirements", "limits"): _resource_list,
    (_CORE + "PodSpec", "restartPolicy"): _one_of("Always", "OnFailure", "Never"),
    (_CORE + "PodSpec", "dnsPolicy"): _one_of("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"),
    (_CORE + "ServicePort", "port"): _port_number,
    (_CORE + "ServicePort", "targetPort"): _port_or_name,
    (_CORE + "ServicePort", "nodePort"): _host_port,
    (_CORE + "ServicePort", "name"): _dns_label,
    (_CORE + "ServicePort", "protocol"): _PROTOCOL,
    (_CORE + "ServiceSpec", "type"): _one_of("ClusterIP", "ExternalName", "LoadBalancer", "NodePort"),
    (_CORE + "ServiceSpec", "sessionAffinity"): _one_of("ClientIP", "None"),
    (_CORE + "EndpointPort", "port"): _port_number,
    (_CORE + "ConfigMap", "data"): _config_keys,
    (_CORE + "ConfigMap", "binaryData"): _config_keys,
    (_CORE + "Secret", "data"): _config_keys,
    (_CORE + "Secret", "stringData"): _config_keys,
}
# definition -> the rule for every value of that type.
_DEFINITION_RULES: dict[str, Rule] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": _quantity,
}
# metadata.name of kinds whose names are not DNS-1123 subdomains (checked by the caller).
_NAME_RULES: dict[tuple[str, str], tuple[str, re.Pattern[str], int]] = {
    ("", "Namespace"): (_DNS_LABEL_MESSAGE, _DNS_LABEL, 63),
    ("", "Service"): (_DNS_1035_LABEL_MESSAGE, _DNS_1035_LABEL, 63),
}

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
        node.rule = _DEFINITION_RULES.get(name)
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
            node.rules = {key: rule for (owner, key), rule in _PROPERTY_RULES.items() if owner == name}
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
    return _quoted(value)


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
            if value.get(key) is None:
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
    name_rule = _NAME_RULES.get((rtype.group, rtype.kind))
    name = obj.get("metadata", {}).get("name")
    if name_rule is not None and isinstance(name, str) and name and (old is None or name != old["metadata"].get("name")):
        detail, pattern, limit = name_rule
        if len(name) > limit:
            walk.causes.append(_invalid("metadata.name", name, f"must be no more than {limit} characters"))
        elif not pattern.fullmatch(name):
            walk.causes.append(_invalid("metadata.name", name, detail))
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
