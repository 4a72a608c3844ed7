"""Label and field selectors, parsed like the API server parses ``labelSelector`` and
``fieldSelector`` query parameters.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``
(exists) and ``!k``, comma-separated (AND). Field selectors: ``=``, ``==``, ``!=`` on the
fields each kind supports (``metadata.name`` and ``metadata.namespace`` everywhere; pods add
``status.phase``, ``spec.nodeName`` ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from trainctl.cluster.apiserver.apimachinery import errors

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]
Requirement = Callable[[dict[str, str]], bool]

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<notexists>!\s*(?P<nkey>[^\s,!=()]+))
      | (?P<key>[^\s,!=()<>]+)\s*(?:
            (?P<setop>in|notin)\s*\((?P<values>[^)]*)\)
          | (?P<op>==|=|!=)\s*(?P<value>[^\s,()]*)
          | (?P<gt>>|<)\s*(?P<num>-?\d+)
        )?
    )\s*(?:,|$)""",
    re.VERBOSE,
)

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")


def _check_value(key: str, value: str) -> str:
    if not _LABEL_VALUE.match(value):
        raise errors.bad_request(
            f"unable to parse requirement: values[0][{key}]: Invalid value: {value!r}: a valid label must be an empty "
            "string or consist of at most 63 alphanumeric characters, '-', '_' or '.', and must start and end with "
            "an alphanumeric character")
    return value


def parse_label_selector(text: str | None) -> Predicate | None:
    if not text or not text.strip():
        return None
    requirements: list[Requirement] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise errors.bad_request(f"unable to parse requirement: invalid label selector: {text!r}")
        pos = match.end()
        requirements.append(_requirement(match))

    def matches(obj: Obj) -> bool:
        labels = obj["metadata"].get("labels") or {}
        return all(req(labels) for req in requirements)

    return matches


def _requirement(match: re.Match[str]) -> Requirement:
    """One requirement of a label selector, as a test of an object's labels."""
    if match.group("notexists"):
        key = match.group("nkey")
        if not _LABEL_KEY.match(key):
            raise errors.bad_request(f"unable to parse requirement: invalid label key {key!r}")
        return lambda labels: key not in labels
    key = match.group("key")
    if not _LABEL_KEY.match(key):
        raise errors.bad_request(f"unable to parse requirement: invalid label key {key!r}")
    if match.group("setop"):
        values = frozenset(_check_value(key, v.strip()) for v in match.group("values").split(",") if v.strip())
        if match.group("setop") == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match.group("op"):
        value = _check_value(key, match.group("value"))
        if match.group("op") == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match.group("gt"):
        bound = int(match.group("num"))
        greater = match.group("gt") == ">"
        return lambda labels: _compare(labels.get(key), bound, greater)
    return lambda labels: key in labels


def _compare(value: str | None, bound: int, greater: bool) -> bool:
    try:
        number = int(value or "")
    except ValueError:
        return False
    return number > bound if greater else number < bound


_COMMON_FIELDS = {"metadata.name", "metadata.namespace"}
_KIND_FIELDS = {
    "pods": {"status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
             "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
    "secrets": {"type"},
    "namespaces": {"status.phase"},
    "nodes": {"spec.unschedulable"},
    "services": {"spec.clusterIP", "spec.type"},
}


def _field_value(obj: Obj, path: str) -> str:
    if path == "source" and "involvedObject" in obj:  # an Event's source is its component, as kube selects it
        return str((obj.get("source") or {}).get("component") or obj.get("reportingComponent") or "")
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(text: str | None, plural: str, custom: bool,
                         labels: Mapping[str, str] | None = None) -> Predicate | None:
    """``labels``: for a version stored in another's form, its labels and the stored fields
    they select on."""
    if not text or not text.strip():
        return None
    allowed = set(labels or ()) or _COMMON_FIELDS | (set() if custom else _KIND_FIELDS.get(plural, set()))
    requirements: list[tuple[str, bool, str]] = []
    for term in text.split(","):
        term = term.strip()
        if not term:
            continue
        match = re.fullmatch(r"([^!=]+)(==|=|!=)(.*)", term)
        if not match:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        name, op, value = match.group(1).strip(), match.group(2), match.group(3).strip()
        if name not in allowed:
            raise errors.bad_request(f'field label not supported: {name}')
        requirements.append(((labels or {}).get(name, name), op == "!=", value))

    def matches(obj: Obj) -> bool:
        return all((_field_value(obj, name) == value) != negate for name, negate, value in requirements)

    return matches


def combine(*predicates: Predicate | None) -> Predicate:
    active = [p for p in predicates if p is not None]
    if not active:
        return lambda obj: True
    if len(active) == 1:
        return active[0]
    return lambda obj: all(p(obj) for p in active)
