"""The rules of kube-apiserver's validation that a schema cannot express, in one table.

Kubernetes' published schemas say which types and fields an object has; its Go validation
adds what they only document: DNS-1123 names, port ranges, quantities, label syntax and
enumerations. Each rule here is keyed by the schema definition and property it guards
(``PROPERTY_RULES``) or by the definition whose every value it checks (``DEFINITION_RULES``),
so ``builtin_validation`` applies it wherever that type appears; rules between fields of one
kind, which may depend on the stored object, are keyed by the kind (``OBJECT_RULES``).
Messages follow kube-apiserver's wording. The rules for a Pod's values are
``trainctl.api.pod_rules``', which ``trainctl validate`` applies to a job's pod templates too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from trainctl.api import pod_rules
from trainctl.api.errors import FieldError
from trainctl.cluster.apiserver.admission import disruption_budgets, priority
from trainctl.cluster.apiserver.apimachinery.errors import Cause

Rule = Callable[[Any, str], list[Cause]]

_DNS_LABEL = pod_rules.DNS_LABEL
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
quoted = pod_rules.quoted


def invalid(path: str, value: Any, detail: str) -> Cause:
    return _cause(pod_rules.invalid(path, value, detail))


def _cause(error: FieldError) -> Cause:
    """A pod rule's problem as a ``details.causes`` entry: ``Invalid`` is ``FieldValueInvalid``."""
    return Cause(error.path, "FieldValue" + error.type, error.detail)


def _causes(rule: pod_rules.Rule) -> Rule:
    """A pod rule as the schema walk calls it."""
    def check(value: Any, path: str) -> list[Cause]:
        errors = rule(value, path)
        return [_cause(error) for error in errors] if errors else []
    return check


_DNS_LABEL_MESSAGE = pod_rules.DNS_LABEL_MESSAGE
_DNS_1035_LABEL_MESSAGE = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
                           "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
                           "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def _port_or_name(value: Any, path: str) -> list[FieldError]:
    return pod_rules.port_name(value, path) if isinstance(value, str) else pod_rules.port_number(value, path)


def _config_keys(value: Any, path: str) -> list[Cause]:
    causes = []
    for key in (value if isinstance(value, dict) else ()):
        if len(key) > 253 or not _CONFIG_KEY.fullmatch(key):
            causes.append(invalid(f"{path}[{key}]", key, "a valid config key must consist of alphanumeric "
                                   "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
                                   "regex used for validation is '[-._a-zA-Z0-9]+')"))
    return causes


_CORE = pod_rules.CORE
# (definition, property) -> the rule for that property's value, wherever the definition is used:
# the pod rules (shared with ``trainctl validate``) and those of the other kinds.
PROPERTY_RULES: dict[tuple[str, str], Rule] = {
    **{key: _causes(rule) for key, rule in pod_rules.PROPERTY_RULES.items()},
    (_CORE + "ServicePort", "port"): _causes(pod_rules.port_number),
    (_CORE + "ServicePort", "targetPort"): _causes(_port_or_name),
    (_CORE + "ServicePort", "nodePort"): _causes(pod_rules.host_port),
    (_CORE + "ServicePort", "name"): _causes(pod_rules.dns_label),
    (_CORE + "ServicePort", "protocol"): _causes(pod_rules.PROTOCOL),
    (_CORE + "ServiceSpec", "type"): _causes(pod_rules.one_of("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")),
    (_CORE + "ServiceSpec", "sessionAffinity"): _causes(pod_rules.one_of("ClientIP", "None")),
    (_CORE + "EndpointPort", "port"): _causes(pod_rules.port_number),
    (_CORE + "ConfigMap", "data"): _config_keys,
    (_CORE + "ConfigMap", "binaryData"): _config_keys,
    (_CORE + "Secret", "data"): _config_keys,
    (_CORE + "Secret", "stringData"): _config_keys,
}
# definition -> the rule for every value of that type.
DEFINITION_RULES: dict[str, Rule] = {key: _causes(rule) for key, rule in pod_rules.DEFINITION_RULES.items()}


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
    ("policy", "PodDisruptionBudget"): disruption_budgets.validate,
    ("scheduling.k8s.io", "PriorityClass"): priority.validate_class,
}
# (group, kind) -> (message, pattern, length limit) for metadata.name where it is not a DNS-1123 subdomain.
NAME_RULES: dict[tuple[str, str], tuple[str, re.Pattern[str], int]] = {
    ("", "Namespace"): (_DNS_LABEL_MESSAGE, _DNS_LABEL, 63),
    ("", "Service"): (_DNS_1035_LABEL_MESSAGE, _DNS_1035_LABEL, 63),
}
