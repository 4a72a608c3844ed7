"""The rules of kube-apiserver's validation that a schema cannot express, in one table.

Kubernetes' published schemas say which types and fields an object has; its Go validation
adds what they only document: DNS-1123 names, port ranges, quantities, label syntax and
enumerations. Each rule here is keyed by the schema definition and property it guards
(``PROPERTY_RULES``) or by the definition whose every value it checks (``DEFINITION_RULES``),
so ``builtin_validation`` applies it wherever that type appears; rules between fields of one
kind, which may depend on the stored object, are keyed by the kind (``OBJECT_RULES``).
Messages follow kube-apiserver's wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from trainctl.api.quantity import QUANTITY_MESSAGE, parse_quantity

from .errors import Cause

Rule = Callable[[Any, str], list[Cause]]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_IANA_SVC_NAME = re.compile(r"[-a-z0-9]+")


def quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause(path, "FieldValueInvalid", f"Invalid value: {quoted(value)}: {detail}")


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
    return [invalid(path, value, problem)] if problem else []


def _port_number(value: Any, path: str, *, allow_zero: bool = False) -> list[Cause]:
    if not isinstance(value, int) or isinstance(value, bool) or (allow_zero and value == 0):
        return []
    if not 1 <= value <= 65535:
        return [invalid(path, value, "must be between 1 and 65535, inclusive")]
    return []


def _host_port(value: Any, path: str) -> list[Cause]:
    return _port_number(value, path, allow_zero=True)


def _port_name(value: Any, path: str) -> list[Cause]:
    if not isinstance(value, str) or not value:
        return []
    if len(value) > 15:
        return [invalid(path, value, "must be no more than 15 characters")]
    if not _IANA_SVC_NAME.fullmatch(value) or not re.search("[a-z]", value) or "--" in value \
            or value.startswith("-") or value.endswith("-"):
        return [invalid(path, value, "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), "
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
        return [invalid(path, value, "a valid environment variable name must consist only of printable ASCII "
                         "characters other than '='")]
    return []


def quantity_or_none(value: Any) -> Decimal | None:
    """A quantity's value, or None when it is outside the grammar (the quantity rule reports that)."""
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def _quantity(value: Any, path: str) -> list[Cause]:
    if value is None or quantity_or_none(value) is not None:
        return []
    return [invalid(path, value, QUANTITY_MESSAGE)]


def _resource_list(value: Any, path: str) -> list[Cause]:
    causes = []
    for name, quantity in (value or {}).items() if isinstance(value, dict) else ():
        parsed = quantity_or_none(quantity)
        if parsed is not None and parsed < 0:
            causes.append(invalid(f"{path}[{name}]", quantity, "must be greater than or equal to 0"))
    return causes


def _resource_requirements(value: Any, path: str) -> list[Cause]:
    if not isinstance(value, dict) or not isinstance(value.get("limits"), dict) or not isinstance(value.get("requests"), dict):
        return []
    causes = []
    for name, request in value["requests"].items():
        wanted, limit = quantity_or_none(request), quantity_or_none(value["limits"].get(name))
        if wanted is not None and limit is not None and wanted > limit:
            causes.append(invalid(f"{path}.requests[{name}]", request,
                                   f"must be less than or equal to {name} limit of {value['limits'][name]}"))
    return causes


def _label_map(value: Any, path: str) -> list[Cause]:
    causes = []
    for key, label in (value.items() if isinstance(value, dict) else ()):
        causes += _qualified_key(key, path)
        if isinstance(label, str) and (len(label) > 63 or not _LABEL_VALUE.fullmatch(label)):
            causes.append(invalid(path, label, "a valid label must be an empty string or consist of alphanumeric "
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
        return [invalid(path, key, "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                         "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                         "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
                         "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")]
    return []


def _config_keys(value: Any, path: str) -> list[Cause]:
    causes = []
    for key in (value if isinstance(value, dict) else ()):
        if len(key) > 253 or not _CONFIG_KEY.fullmatch(key):
            causes.append(invalid(f"{path}[{key}]", key, "a valid config key must consist of alphanumeric "
                                   "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
                                   "regex used for validation is '[-._a-zA-Z0-9]+')"))
    return causes


_CORE = "io.k8s.api.core.v1."
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_PROTOCOL = _one_of("SCTP", "TCP", "UDP")
# (definition, property) -> the rule for that property's value, wherever the definition is used.
PROPERTY_RULES: dict[tuple[str, str], Rule] = {
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
DEFINITION_RULES: dict[str, Rule] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": _quantity,
}
def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _hpa_replicas(obj: Any, old: Any) -> list[Cause]:
    """kube-apiserver's HorizontalPodAutoscaler bounds: minReplicas >= 1 (0 only with the alpha
    HPAScaleToZero gate, off, or on an HPA already stored with 0), maxReplicas >= 1, min <= max."""
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if not isinstance(spec, dict):
        return []
    low, high = _int(spec.get("minReplicas")), _int(spec.get("maxReplicas"))
    old_spec = old.get("spec") if isinstance(old, dict) else None
    floor = 0 if isinstance(old_spec, dict) and _int(old_spec.get("minReplicas")) == 0 else 1
    causes = []
    if low is not None and low < floor:
        causes.append(invalid("spec.minReplicas", low, f"must be greater than or equal to {floor}"))
    if high is not None and high < 1:
        causes.append(invalid("spec.maxReplicas", high, "must be greater than 0"))
    if low is not None and high is not None and high < low:
        causes.append(invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    return causes


# (group, kind) -> the rule for a new state of the whole object, given the stored one (None on create).
def _role_ref_unchanged(obj: Any, old: Any) -> list[Cause]:
    """A binding's roleRef never changes (kube: delete and recreate the binding instead)."""
    if old is None or obj.get("roleRef") == old.get("roleRef"):
        return []
    return [Cause("roleRef", "FieldValueInvalid", f"Invalid value: {obj.get('roleRef')}: cannot change roleRef")]


OBJECT_RULES: dict[tuple[str, str], Callable[[Any, Any], list[Cause]]] = {
    ("autoscaling", "HorizontalPodAutoscaler"): _hpa_replicas,
    ("rbac.authorization.k8s.io", "RoleBinding"): _role_ref_unchanged,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _role_ref_unchanged,
}
# (group, kind) -> (message, pattern, length limit) for metadata.name where it is not a DNS-1123 subdomain.
NAME_RULES: dict[tuple[str, str], tuple[str, re.Pattern[str], int]] = {
    ("", "Namespace"): (_DNS_LABEL_MESSAGE, _DNS_LABEL, 63),
    ("", "Service"): (_DNS_1035_LABEL_MESSAGE, _DNS_1035_LABEL, 63),
}
