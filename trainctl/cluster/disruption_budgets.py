"""What the Eviction API and the disruption controller both read and write on
PodDisruptionBudgets: which budgets cover a pod, whether a pod counts as healthy, and the
``DisruptionAllowed`` condition, as kube's ``pdb`` helpers decide them.

A budget covers the pods of its namespace its selector matches; a missing or empty selector
covers none (unlike other selectors: kube guards budgets against matching everything). A pod
is healthy when its ``Ready`` condition is ``True``.
"""

from __future__ import annotations

from typing import Any

from trainctl.cluster.label_selectors import selector_matches

Obj = dict[str, Any]

DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
DISRUPTION_TARGET = "DisruptionTarget"


def covers(pdb: Obj, pod: Obj) -> bool:
    """Whether ``pdb`` selects ``pod`` (same namespace, a non-empty selector that matches)."""
    if pdb["metadata"].get("namespace") != pod["metadata"].get("namespace"):
        return False
    selector = (pdb.get("spec") or {}).get("selector")
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    return selector_matches(selector, pod["metadata"].get("labels") or {})


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def set_condition(conditions: list[Obj], condition: Obj, now: str) -> list[Obj]:
    """``conditions`` with ``condition`` set, as ``meta.SetStatusCondition``: the transition
    time moves only when the status does."""
    previous = next((c for c in conditions if c.get("type") == condition["type"]), None)
    changed = previous is None or previous.get("status") != condition["status"]
    entry = {"type": condition["type"], "status": condition["status"],
             **({"observedGeneration": condition["observedGeneration"]} if condition.get("observedGeneration") else {}),
             "lastTransitionTime": now if changed or previous is None else previous.get("lastTransitionTime", now),
             "reason": condition["reason"], "message": condition.get("message", "")}
    return [entry if c is previous else c for c in conditions] if previous is not None else [*conditions, entry]


def with_allowed_condition(status: Obj, now: str) -> Obj:
    """``status`` with its ``DisruptionAllowed`` condition following ``disruptionsAllowed``."""
    allowed = (status.get("disruptionsAllowed") or 0) > 0
    condition = {"type": DISRUPTION_ALLOWED, "status": "True" if allowed else "False",
                 "reason": SUFFICIENT_PODS if allowed else INSUFFICIENT_PODS, "message": ""}
    return {**status, "conditions": set_condition(list(status.get("conditions") or []), condition, now)}
