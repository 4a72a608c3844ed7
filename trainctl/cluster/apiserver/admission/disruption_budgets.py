"""The rules of a PodDisruptionBudget's spec that its schema cannot say, as kube-apiserver's
``ValidatePodDisruptionBudgetSpec`` words them.

``minAvailable`` and ``maxUnavailable`` are each an integer (at least 0) or a percentage
(``"50%"``, at most 100 %), and not both may be set; a budget with neither is valid, as on
kube. ``unhealthyPodEvictionPolicy`` is ``IfHealthyBudget`` or ``AlwaysAllow``.
"""

from __future__ import annotations

import re
from typing import Any

from trainctl.cluster.apiserver.apimachinery.errors import Cause

_PERCENT = re.compile(r"[0-9]+%")
_PERCENT_MESSAGE = ("a valid percent string must be a numeric string followed by an ending '%' "
                    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")
UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


def int_or_string(value: Any) -> str:
    """An IntOrString as Go's ``%#v`` prints it in a validation message."""
    if isinstance(value, str):
        return f'intstr.IntOrString{{Type:1, IntVal:0, StrVal:"{value}"}}'
    return f'intstr.IntOrString{{Type:0, IntVal:{value}, StrVal:""}}'


def _int_or_percent(value: Any, path: str) -> list[Cause]:
    """kube's ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return [Cause(path, "FieldValueInvalid", f"Invalid value: {value!r}: must be an integer or percentage (e.g '5%')")]
    if isinstance(value, int):
        if value < 0:
            return [Cause(path, "FieldValueInvalid", f"Invalid value: {value}: must be greater than or equal to 0")]
        return []
    if not _PERCENT.fullmatch(value):
        return [Cause(path, "FieldValueInvalid", f"Invalid value: {int_or_string(value)}: {_PERCENT_MESSAGE}")]
    if int(value[:-1]) > 100:
        return [Cause(path, "FieldValueInvalid", f"Invalid value: {int_or_string(value)}: must not be greater than 100%")]
    return []


def validate(obj: Any, _old: Any) -> list[Cause]:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if not isinstance(spec, dict):
        return []
    causes = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        causes.append(Cause("spec", "FieldValueInvalid", "Invalid value: policy.PodDisruptionBudgetSpec{...}: "
                                                         "minAvailable and maxUnavailable cannot be both set"))
    for key in ("minAvailable", "maxUnavailable"):
        if spec.get(key) is not None:
            causes += _int_or_percent(spec[key], f"spec.{key}")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in UNHEALTHY_POD_EVICTION_POLICIES)
        causes.append(Cause("spec.unhealthyPodEvictionPolicy", "FieldValueNotSupported",
                            f'Unsupported value: "{policy}": supported values: {supported}'))
    return causes
