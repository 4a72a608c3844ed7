"""Label selectors as every component reads them: a ``metav1.LabelSelector`` or a
NodeSelectorTerm's requirements against an object's labels.

One requirement rule serves both (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, and ``Gt``/``Lt``
which only node selectors allow). A missing ``LabelSelector`` selects nothing and an empty one
selects everything, as ``metav1.LabelSelectorAsSelector`` says. The scheduler matches pods and
nodes with it, the API server's Eviction API and the disruption controller the pods of a
PodDisruptionBudget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional

Obj = dict[str, Any]


def requirement_matches(requirement: Obj, values_of: Callable[[str], Optional[str]]) -> bool:
    key, operator = requirement.get("key", ""), requirement.get("operator")
    values = [str(v) for v in requirement.get("values") or []]
    actual = values_of(key)
    if operator == "In":
        return actual is not None and actual in values
    if operator == "NotIn":
        return actual is None or actual not in values
    if operator == "Exists":
        return actual is not None
    if operator == "DoesNotExist":
        return actual is None
    if operator in ("Gt", "Lt") and actual is not None and len(values) == 1:
        try:
            have, bound = int(actual), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def selector_matches(selector: Optional[Obj], labels: Mapping[str, str]) -> bool:
    """``labels`` against a LabelSelector: None selects nothing, ``{}`` everything."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    return all(requirement_matches(r, labels.get) for r in selector.get("matchExpressions") or [])


def selector_string(selector: Obj) -> str:
    """A LabelSelector as ``labels.Selector`` prints it (``app=web,tier in (a,b)``)."""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for requirement in selector.get("matchExpressions") or []:
        key, operator = requirement.get("key", ""), requirement.get("operator")
        values = ",".join(sorted(str(v) for v in requirement.get("values") or []))
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                      "DoesNotExist": f"!{key}"}.get(str(operator), key))
    return ",".join(sorted(parts))
