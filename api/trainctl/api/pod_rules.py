"""kube-apiserver's rules for the values of a pod that a schema cannot express, in kube's words.

Kubernetes' published schemas say which types and fields a Pod has; its Go validation adds what
they only document: DNS-1123 names, port ranges, quantities, label syntax, environment variable
names and enumerations. The rules live here, in the API package, because two checks need the
same ones: the embedded API server applies them to every Pod it is asked to create
(``trainctl.cluster.apiserver.admission.builtin_rules`` keys them into its schema walk), and
``trainctl validate`` applies them to a job's pod templates (``trainctl.api.pod_template``), so
a template the server would refuse at pod creation is refused before the job is submitted.

Each rule takes a value and its field path and returns ``FieldError``\\ s whose detail is
kube-apiserver's message (``Invalid value: "lots": quantities must match …``). The tables key
each rule by the OpenAPI definition and property it guards, as the schemas name them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from trainctl.api import quantity as quantity_parser
from trainctl.api.errors import FieldError

Rule = Callable[[Any, str], list[FieldError]]

CORE = "io.k8s.api.core.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MESSAGE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                     "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
                     "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_IANA_SVC_NAME = re.compile(r"[-a-z0-9]+")



def quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, "Invalid", f"Invalid value: {quoted(value)}: {detail}")


def _label_problem(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not DNS_LABEL.fullmatch(value):
        return DNS_LABEL_MESSAGE
    return None


def dns_label(value: Any, path: str) -> list[FieldError]:
    if not isinstance(value, str) or not value:
        return []  # absent: "required" reports it
    problem = _label_problem(value)
    return [invalid(path, value, problem)] if problem else []


def port_number(value: Any, path: str, *, allow_zero: bool = False) -> list[FieldError]:
    if not isinstance(value, int) or isinstance(value, bool) or (allow_zero and value == 0):
        return []
    if not 1 <= value <= 65535:
        return [invalid(path, value, "must be between 1 and 65535, inclusive")]
    return []


def host_port(value: Any, path: str) -> list[FieldError]:
    return port_number(value, path, allow_zero=True)


def port_name(value: Any, path: str) -> list[FieldError]:
    if not isinstance(value, str) or not value:
        return []
    if len(value) > 15:
        return [invalid(path, value, "must be no more than 15 characters")]
    if not _IANA_SVC_NAME.fullmatch(value) or not re.search("[a-z]", value) or "--" in value \
            or value.startswith("-") or value.endswith("-"):
        return [invalid(path, value, "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-), "
                         "contain at least one letter (a-z), and hyphens cannot be adjacent to other hyphens")]
    return []


def one_of(*allowed: str) -> Rule:
    supported = ", ".join(f'"{a}"' for a in allowed)

    def check(value: Any, path: str) -> list[FieldError]:
        if isinstance(value, str) and value not in allowed:
            return [FieldError(path, "NotSupported", f'Unsupported value: "{value}": supported values: {supported}')]
        return []
    return check


def env_name(value: Any, path: str) -> list[FieldError]:
    if isinstance(value, str) and value and (not value.isascii() or not value.isprintable() or "=" in value):
        return [invalid(path, value, "a valid environment variable name must consist only of printable ASCII "
                         "characters other than '='")]
    return []


def parse_quantity(value: Any) -> Decimal | None:
    """A quantity's value, or None where :func:`trainctl.api.quantity.parse_quantity` refuses
    it: a rule reports a bad quantity once, under its own field, and compares only good ones."""
    try:
        return quantity_parser.parse_quantity(value)
    except ValueError:
        return None


def quantity(value: Any, path: str) -> list[FieldError]:
    if value is None or parse_quantity(value) is not None:
        return []
    return [invalid(path, value, quantity_parser.QUANTITY_MESSAGE)]


def resource_list(value: Any, path: str) -> list[FieldError]:
    errors = []
    for name, amount in (value or {}).items() if isinstance(value, dict) else ():
        parsed = parse_quantity(amount)
        if parsed is not None and parsed < 0:
            errors.append(invalid(f"{path}[{name}]", amount, "must be greater than or equal to 0"))
    return errors


def resource_requirements(value: Any, path: str) -> list[FieldError]:
    if not isinstance(value, dict) or not isinstance(value.get("limits"), dict) or not isinstance(value.get("requests"), dict):
        return []
    errors = []
    for name, request in value["requests"].items():
        wanted, limit = parse_quantity(request), parse_quantity(value["limits"].get(name))
        if wanted is not None and limit is not None and wanted > limit:
            errors.append(invalid(f"{path}.requests[{name}]", request,
                                  f"must be less than or equal to {name} limit of {value['limits'][name]}"))
    return errors


def label_map(value: Any, path: str) -> list[FieldError]:
    errors = []
    for key, label in (value.items() if isinstance(value, dict) else ()):
        errors += _qualified_key(key, path)
        if isinstance(label, str) and (len(label) > 63 or not _LABEL_VALUE.fullmatch(label)):
            errors.append(invalid(path, label, "a valid label must be an empty string or consist of alphanumeric "
                                  "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                                  "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                                  "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"))
    return errors


def annotation_map(value: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in (value if isinstance(value, dict) else ()):
        errors += _qualified_key(key, path)
    return errors


def _qualified_key(key: Any, path: str) -> list[FieldError]:
    key = str(key)  # a YAML key 1 reaches the server as JSON's "1"
    prefix, _, name = key.rpartition("/")
    if ("/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix))) \
            or not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return [invalid(path, key, "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                        "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                        "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
                        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")]
    return []


PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_HTTP_HEADER_NAME = re.compile(r"[-A-Za-z0-9!#$%&'*+.^_`|~]+")


def _nonnegative(value: Any, path: str) -> list[FieldError]:
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []


def port_or_name(value: Any, path: str) -> list[FieldError]:
    return port_name(value, path) if isinstance(value, str) else port_number(value, path)


def _probe_handler(probe: dict[str, Any], path: str) -> list[FieldError]:
    """Exactly one handler, each with what it needs (kube's ``validateHandler``)."""
    errors: list[FieldError] = []
    given = [name for name in PROBE_HANDLERS if probe.get(name) is not None]
    if not given:
        return [FieldError(path, "Required", "Required value: must specify a handler type")]
    errors += [FieldError(f"{path}.{name}", "Forbidden", "Forbidden: may not specify more than 1 handler type")
               for name in given[1:]]
    name = given[0]
    action = probe[name] if isinstance(probe[name], dict) else {}
    where = f"{path}.{name}"
    if name == "exec" and not action.get("command"):
        errors.append(FieldError(f"{where}.command", "Required", "Required value"))
    if name in ("httpGet", "tcpSocket"):
        errors += port_or_name(action.get("port"), f"{where}.port")
    if name == "httpGet":
        errors += one_of("HTTP", "HTTPS")(action.get("scheme"), f"{where}.scheme")
        for i, header in enumerate(action.get("httpHeaders") or []):
            header_name = header.get("name") if isinstance(header, dict) else None
            if isinstance(header_name, str) and not _HTTP_HEADER_NAME.fullmatch(header_name):
                errors.append(invalid(f"{where}.httpHeaders[{i}].name", header_name,
                                      "a valid HTTP header must consist of alphanumeric characters or '-' "
                                      "(e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')"))
    if name == "grpc":
        errors += port_number(action.get("port"), f"{where}.port")
    return errors


def probe(kind: str) -> Rule:
    """The rule for a container's ``livenessProbe``, ``readinessProbe`` or ``startupProbe``
    (kube's ``validateProbe`` and the kind's own rule)."""
    def check(value: Any, path: str) -> list[FieldError]:
        if not isinstance(value, dict):
            return []
        errors = _probe_handler(value, path)
        for name in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
            errors += _nonnegative(value.get(name), f"{path}.{name}")
        grace = value.get("terminationGracePeriodSeconds")
        if kind == "readiness" and grace is not None:
            errors.append(invalid(f"{path}.terminationGracePeriodSeconds", grace,
                                  "must not be set for readinessProbes"))
        elif isinstance(grace, int) and not isinstance(grace, bool) and grace <= 0:
            errors.append(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than 0"))
        success = value.get("successThreshold")
        if kind != "readiness" and isinstance(success, int) and success not in (0, 1):  # 0 is defaulted to 1
            errors.append(invalid(f"{path}.successThreshold", success, "must be 1"))
        return errors
    return check


def init_container_probes(value: Any, path: str) -> list[FieldError]:
    """Init containers run to completion: only sidecars (``restartPolicy: Always``) are probed."""
    errors = []
    for i, container in enumerate(value if isinstance(value, list) else []):
        if not isinstance(container, dict) or container.get("restartPolicy") == "Always":
            continue
        for field in ("livenessProbe", "readinessProbe", "startupProbe"):
            if container.get(field) is not None:
                errors.append(FieldError(f"{path}[{i}].{field}", "Forbidden",
                                         "Forbidden: may not be set for init containers without restartPolicy=Always"))
    return errors


PROTOCOL = one_of("SCTP", "TCP", "UDP")
# (definition, property) -> the rule for that property's value in a Pod, wherever the definition is used.
PROPERTY_RULES: dict[tuple[str, str], Rule] = {
    (META + "ObjectMeta", "labels"): label_map,
    (META + "ObjectMeta", "annotations"): annotation_map,
    (CORE + "Container", "name"): dns_label,
    (CORE + "Container", "imagePullPolicy"): one_of("Always", "IfNotPresent", "Never"),
    (CORE + "Container", "terminationMessagePolicy"): one_of("FallbackToLogsOnError", "File"),
    (CORE + "Container", "resources"): resource_requirements,
    (CORE + "Container", "livenessProbe"): probe("liveness"),
    (CORE + "Container", "readinessProbe"): probe("readiness"),
    (CORE + "Container", "startupProbe"): probe("startup"),
    (CORE + "PodSpec", "initContainers"): init_container_probes,
    (CORE + "ContainerPort", "containerPort"): port_number,
    (CORE + "ContainerPort", "hostPort"): host_port,
    (CORE + "ContainerPort", "name"): port_name,
    (CORE + "ContainerPort", "protocol"): PROTOCOL,
    (CORE + "EnvVar", "name"): env_name,
    (CORE + "Volume", "name"): dns_label,
    (CORE + "ResourceRequirements", "requests"): resource_list,
    (CORE + "ResourceRequirements", "limits"): resource_list,
    (CORE + "PodSpec", "restartPolicy"): one_of("Always", "OnFailure", "Never"),
    (CORE + "PodSpec", "dnsPolicy"): one_of("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"),
}
# definition -> the rule for every value of that type.
DEFINITION_RULES: dict[str, Rule] = {
    QUANTITY: quantity,
}
