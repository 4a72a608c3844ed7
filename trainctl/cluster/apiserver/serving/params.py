"""Query parameters, parsed as kube-apiserver parses them, and the ``WriteOptions`` a write
request carries besides its body (``fieldValidation``, ``dryRun``, ``force``, ``fieldManager``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trainctl.cluster.apiserver.apimachinery import errors, selectors
from trainctl.cluster.apiserver.apimachinery.resource_types import ResourceType
from trainctl.cluster.apiserver.storage.writes import WriteOptions

Obj = dict[str, Any]
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_FIELD_VALIDATION = ("Ignore", "Warn", "Strict")
_MAX_MANAGER_LENGTH = 128


def go_bool(params: Mapping[str, str], name: str, default: bool = False) -> bool:
    """A boolean query parameter, parsed like Go's strconv.ParseBool."""
    value = params.get(name)
    if value is None or value == "":
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.bad_request(f'invalid boolean value "{value}" for parameter {name}')


def int_param(params: Mapping[str, str], name: str) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'invalid value "{value}" for parameter {name}: must be an integer') from None


def write_options(params: Any, *, patching: bool = False, user_agent: str = "") -> WriteOptions:
    """The options of a create, update or patch request (``params`` is a multidict);
    ``force`` is read for patches only. A write without ``fieldManager`` is recorded under
    its User-Agent's program name (``kubectl-edit/v1.32.0 (linux/amd64) ...`` -> ``kubectl-edit``)."""
    field_validation = params.get("fieldValidation") or "Warn"
    if field_validation not in _FIELD_VALIDATION:
        raise errors.bad_request(f'fieldValidation must be one of "Ignore", "Warn" or "Strict", got "{field_validation}"')
    return WriteOptions(field_validation=field_validation, dry_run=dry_run(params),
                        force=patching and go_bool(params, "force"),
                        field_manager=params.get("fieldManager") or "",
                        user_agent_manager=user_agent.split("/", 1)[0][:_MAX_MANAGER_LENGTH])


def dry_run(params: Any) -> bool:
    values = params.getall("dryRun", [])
    if any(v not in ("All", "") for v in values):
        raise errors.bad_request('dryRun must be "All"')
    return "All" in values


def matcher(params: Mapping[str, str], rtype: ResourceType) -> Callable[[Obj], bool]:
    """The label and field selectors of a list, watch or deletecollection request."""
    return selectors.combine(
        selectors.parse_label_selector(params.get("labelSelector")),
        selectors.parse_field_selector(params.get("fieldSelector"), rtype.plural, rtype.is_custom,
                                       rtype.conversion.field_labels if rtype.conversion else None),
    )


def table_include(accept: str, params: Mapping[str, str]) -> str | None:
    """The includeObject policy when the client asked for a Table, else None."""
    if "as=Table" not in accept:
        return None
    include = params.get("includeObject") or "Metadata"
    if include not in ("None", "Metadata", "Object"):
        raise errors.bad_request(f'includeObject must be one of "None", "Metadata", "Object", got "{include}"')
    return include


def delete_options(body: Any, params: Mapping[str, str]) -> Obj:
    """DeleteOptions from the body, overridden by the query parameters."""
    options: Obj = dict(body) if isinstance(body, dict) else {}
    grace = int_param(params, "gracePeriodSeconds")
    if grace is not None:
        options["gracePeriodSeconds"] = grace
    if params.get("propagationPolicy"):
        options["propagationPolicy"] = params["propagationPolicy"]
    if params.get("orphanDependents"):
        options["orphanDependents"] = go_bool(params, "orphanDependents")
    return options
