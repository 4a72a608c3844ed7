"""Every rule a training job must satisfy, each problem reported with its field path.

``validate`` works on the raw wire dict, before defaulting, as the reference webhook does,
and reports every problem at once (``check`` also hands back the job it parsed on the way):
type errors from parsing (``trainctl.api.loader``), the rules every kind shares (here: names,
run policy, the scaled replica count, updates), the kind's own rules (``JobKind.validator``,
in the kind's module: training-operator's validating webhook, ms-operator's log-only
validation) and the gaps the references leave open (docs/compatibility.md lists them). It
never raises: the rules read the dict defensively (``trainctl.api.rules``) and skip a value
whose type is wrong, since parsing has reported it.

The controller calls this on every job it sees, so the rules are plain dict lookups.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Optional

from pydantic import BaseModel

from trainctl.api import kinds
from trainctl.api.common import Job
from trainctl.api.errors import FieldError, json_type, show
from trainctl.api.loader import job_kind, parse_structure
from trainctl.api.pod_template import validate_pod_template
from trainctl.api.rules import dict_at, int_or_none

# A Service name, hence every replica's name, must be a DNS-1035 label.
DNS1035_MAX = 63
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_PREFIX = re.compile(r"^[a-z][-a-z0-9]*$")
_DNS1035_HELP = "must consist of lower case letters, digits or '-', start with a letter and end with a letter or digit"
# The API server appends this many random characters to metadata.generateName.
_GENERATED_SUFFIX = 5


def check(obj: Any, old: Any = None, *, pod_templates: bool = False) -> tuple[Optional[Job], list[FieldError]]:
    """The typed job (None when its types are wrong) and every problem, parsing it once.

    With ``old``, the problems of the update from ``old`` to ``obj`` are included. A job
    comes back even when rules fail, so a caller that needs both parses nothing twice.
    With ``pod_templates``, the problems the API server will find in the pods made from the
    templates are included too: a check before submitting asks for them; the controller does
    not, and, as the reference, reports a pod the server refuses as a ``FailedCreatePod`` Event.
    """
    kind, errors = job_kind(obj)
    if kind is None:
        return None, errors
    errors = _validate_metadata(obj, kind)
    job, type_errors = parse_structure(obj)
    errors += type_errors
    errors += _unsupported_run_policy(obj, kind)
    errors += kind.validator(obj)
    errors += _validate_scaled_replicas(obj, kind)
    if pod_templates:
        errors += _validate_pod_templates(obj, kind)
    if isinstance(old, dict) and old.get("kind") == kind.kind:
        errors += _validate_update(obj, old)
    return job, _unique(errors)


def validate(obj: Any, old: Any = None, *, pod_templates: bool = False) -> list[FieldError]:
    """Every problem of a job (and, with ``old``, of the update from ``old`` to it; see ``check``)."""
    return check(obj, old, pod_templates=pod_templates)[1]


def warnings(obj: Any, job: Optional[Job] = None) -> list[str]:
    """Things that work but should change, one line each: deprecated and unknown fields."""
    return deprecations(obj) + unknown_fields(obj, job)


def deprecations(obj: Any) -> list[str]:
    """The deprecated fields and values the job uses, one line each."""
    kind = kinds.of(obj)
    return [] if kind is None else kind.deprecations(obj)


def unknown_fields(obj: Any, job: Optional[Job] = None) -> list[str]:
    """The fields the job's schema does not have, one line each, with the known field meant.

    An unknown field is most often a typo (``backofLimit``): the API server refuses it under
    ``kubectl apply``'s default strict field validation, and prunes it otherwise, so the job
    would silently run without it. Pod templates keep unknown fields (the CRD preserves them),
    so none is reported there. ``job``: ``obj`` already parsed (by ``check``).
    """
    if job is None:
        job, _ = parse_structure(obj)
    if not isinstance(job, BaseModel):
        return []
    return [_unknown_line(path, key, known) for path, key, known in _unknown_fields(job, "")]


def _unknown_line(path: str, key: str, known: list[str]) -> str:
    line = f'unknown field "{path}"'
    lowered = {name.lower(): name for name in known}
    meant = difflib.get_close_matches(key.lower(), list(lowered), n=1)
    return f'{line}; did you mean "{lowered[meant[0]]}"?' if meant else line


def _unknown_fields(model: BaseModel, path: str) -> list[tuple[str, str, list[str]]]:
    """(path, key, the fields known there) of each field parsing kept without knowing it (``extra="allow"``)."""
    fields = type(model).model_fields
    known = [field.alias or name for name, field in fields.items()]
    found = [(f"{path}.{key}" if path else key, key, known) for key in (model.model_extra or {})]
    for name, field in fields.items():
        if name not in model.model_fields_set:
            continue
        value = getattr(model, name)
        alias = field.alias or name
        here = f"{path}.{alias}" if path else alias
        if isinstance(value, BaseModel):
            found += _unknown_fields(value, here)
        elif isinstance(value, dict):
            found += [p for k, v in value.items() if isinstance(v, BaseModel) for p in _unknown_fields(v, f"{here}[{k}]")]
        elif isinstance(value, list):
            found += [p for i, v in enumerate(value) if isinstance(v, BaseModel) for p in _unknown_fields(v, f"{here}[{i}]")]
    return found


# --- helpers --------------------------------------------------------------------------------


def _unique(errors: list[FieldError]) -> list[FieldError]:
    seen: set[FieldError] = set()
    out = []
    for error in errors:
        if error not in seen:
            seen.add(error)
            out.append(error)
    return out


# --- metadata -------------------------------------------------------------------------------


def _validate_metadata(obj: dict[str, Any], kind: kinds.JobKind) -> list[FieldError]:
    metadata = dict_at(obj, "metadata")
    name, generate_name = metadata.get("name"), metadata.get("generateName")
    if name is None and generate_name is None:
        return [FieldError("metadata.name", "Required", "name or generateName is required")]
    if name is not None:
        if not isinstance(name, str):
            return [FieldError("metadata.name", "TypeInvalid", f"must be a string, not {json_type(name)} {show(name)}")]
        if not _DNS1035.match(name):
            return [FieldError("metadata.name", "Invalid", f"invalid value {show(name)}: a DNS-1035 label {_DNS1035_HELP}")]
        return _validate_name_length(obj, kind, "metadata.name", name)
    if not isinstance(generate_name, str):
        return [FieldError("metadata.generateName", "TypeInvalid", f"must be a string, not {json_type(generate_name)}")]
    if not _DNS1035_PREFIX.match(generate_name):
        return [FieldError("metadata.generateName", "Invalid", f"invalid value {show(generate_name)}: a DNS-1035 label prefix {_DNS1035_HELP}")]
    return _validate_name_length(obj, kind, "metadata.generateName", generate_name + "x" * _GENERATED_SUFFIX)


def _validate_name_length(obj: dict[str, Any], kind: kinds.JobKind, path: str, name: str) -> list[FieldError]:
    """Each replica gets a Service ``<job>-<type>-<index>``, which must also be a DNS-1035 label."""
    spec = dict_at(obj, "spec")
    specs = dict_at(spec, kind.replica_specs_field)
    longest = ""
    for rtype, rspec in specs.items():
        if not isinstance(rtype, str) or not isinstance(rspec, dict):
            continue
        replicas = int_or_none(rspec.get("replicas"))
        count = 1 if replicas is None else replicas
        if rtype == kind.scale_replica_type:
            # The HPA may scale it up to maxReplicas.
            count = max(count, int_or_none(dict_at(spec, "elasticPolicy").get("maxReplicas")) or 0)
        child = f"{name}-{rtype.lower()}-{max(count - 1, 0)}"
        if len(child) > len(longest):
            longest = child
    if len(longest) <= DNS1035_MAX:
        return []
    allowed = DNS1035_MAX - (len(longest) - len(name))
    if path == "metadata.generateName":
        allowed -= _GENERATED_SUFFIX
    return [
        FieldError(
            path,
            "Invalid",
            f"must be no more than {allowed} characters: the Service {show(longest)} must be a DNS-1035 label "
            f"of at most {DNS1035_MAX} characters",
        )
    ]


def _unsupported_run_policy(obj: dict[str, Any], kind: kinds.JobKind) -> list[FieldError]:
    """RunPolicy fields the kind's API version does not have (MSJob: suspend, managedBy)."""
    run_policy = dict_at(dict_at(obj, "spec"), "runPolicy")
    return [
        FieldError(f"spec.runPolicy.{field}", "Forbidden", f"not supported by {kind.kind} ({kind.api_version})")
        for field in kind.unsupported_run_policy
        if run_policy.get(field) is not None
    ]


def _validate_pod_templates(obj: dict[str, Any], kind: kinds.JobKind) -> list[FieldError]:
    specs = dict_at(dict_at(obj, "spec"), kind.replica_specs_field)
    return [
        error
        for rtype, rspec in specs.items()
        if isinstance(rspec, dict) and rspec.get("template") is not None
        for error in validate_pod_template(rspec["template"], f"{kind.replica_path(str(rtype))}.template")
    ]


# --- the scaled replica count ---------------------------------------------------------------


def scaled_replicas_path(kind: kinds.JobKind) -> Optional[str]:
    """The field the kind's scale subresource writes, as problems name it (None: no scale)."""
    rtype = kind.scale_replica_type
    return None if rtype is None else f"{kind.replica_path(rtype)}.replicas"


def replica_bounds(obj: Any) -> Optional[tuple[int, Optional[int]]]:
    """The counts the scaled replica type may take, (low, high) with high None for no bound.

    PyTorchJob's Worker: at least 1, and within ``elasticPolicy``'s range as defaulting fills
    it (a missing bound takes the other's value; with neither, any count is the range). None
    when the kind has no scale subresource or the range itself is invalid (reported elsewhere).
    """
    kind, _ = job_kind(obj)
    if kind is None or kind.scale_replica_type is None:
        return None
    elastic = dict_at(dict_at(obj, "spec"), "elasticPolicy")
    low, high = int_or_none(elastic.get("minReplicas")), int_or_none(elastic.get("maxReplicas"))
    if (low is not None and low < 1) or (high is not None and high < 1) or (low is not None and high is not None and low > high):
        return None  # parsing or the elastic rules reported it
    low, high = low if low is not None else high, high if high is not None else low
    return low or 1, high


def _validate_scaled_replicas(obj: dict[str, Any], kind: kinds.JobKind) -> list[FieldError]:
    """The scaled replica count (the one ``kubectl scale`` and the HPA write) within its bounds."""
    path = scaled_replicas_path(kind)
    rspec = dict_at(dict_at(obj, "spec"), kind.replica_specs_field).get(kind.scale_replica_type or "")
    if path is None or not isinstance(rspec, dict):
        return []
    replicas = rspec.get("replicas")
    count = 1 if replicas is None else int_or_none(replicas)
    if count is None:
        return []  # parsing reported it
    if count < 1:
        return [FieldError(path, "Forbidden", "must be at least 1")]
    bounds = replica_bounds(obj)
    if bounds is not None and not bounds[0] <= count <= (bounds[1] or count):
        # The CRD's rule says this of the spec object (kube: 'Invalid value: "object"'); here, of the count.
        detail = f"must be between minReplicas ({bounds[0]}) and maxReplicas ({bounds[1]}), not {count}"
        return [FieldError(path, "Invalid", f"Invalid value: {count}: {detail}")]
    return []


# --- updates --------------------------------------------------------------------------------


def _validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    new_policy, old_policy = dict_at(dict_at(new, "spec"), "runPolicy"), dict_at(dict_at(old, "spec"), "runPolicy")
    errors = []
    # The reference meant this check but compares the new object with itself; we compare old and new.
    if new_policy.get("managedBy") != old_policy.get("managedBy"):
        errors.append(FieldError("spec.runPolicy.managedBy", "Invalid", "field is immutable"))
    # As the CRD's transition rule: only when both versions have a queue.
    new_queue = dict_at(new_policy, "schedulingPolicy").get("queue")
    old_queue = dict_at(old_policy, "schedulingPolicy").get("queue")
    if new_queue is not None and old_queue is not None and new_queue != old_queue:
        errors.append(FieldError("spec.runPolicy.schedulingPolicy.queue", "Invalid", "spec.runPolicy.schedulingPolicy.queue is immutable"))
    return errors

