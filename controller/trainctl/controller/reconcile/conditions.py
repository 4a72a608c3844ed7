"""Job conditions, kept the way kubeflow's ``setCondition`` keeps them (spec §5.2).

The list order is part of the API: the ``State`` printer column shows the last entry, so a
changed condition moves to the end. Failed is sticky, Running and Restarting exclude each
other, and a terminal condition flips Running to False without touching its reason, message
or times (kubeflow's ``filterOutCondition``). trainctl adds one rule: a job that
Succeeded never also becomes Failed (the references can end with both).

The book remembers which event announces each change; the reconcile emits events and bumps
metrics only for conditions that really changed in the pass, so nothing repeats.
"""

from __future__ import annotations

from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.controller.frameworks.base import ConditionChange
from trainctl.controller.reconcile.plan import Event

TRUE, FALSE = "True", "False"
# Which counter a condition becoming True increments.
_METRICS = {
    c.CONDITION_CREATED: "created",
    c.CONDITION_SUCCEEDED: "succeeded",
    c.CONDITION_FAILED: "failed",
    c.CONDITION_RESTARTING: "restarted",
}


def find(conditions: list[dict[str, Any]], type_: str) -> Optional[dict[str, Any]]:
    for condition in conditions:
        if condition.get("type") == type_:
            return condition
    return None


def is_true(conditions: list[dict[str, Any]], type_: str) -> bool:
    condition = find(conditions, type_)
    return condition is not None and condition.get("status") == TRUE


class ConditionBook:
    """A job's conditions during one pass, and the events the changes call for."""

    def __init__(self, conditions: Optional[list[dict[str, Any]]], now: str):
        # A malformed stored status must not stop the job from being reported invalid.
        listed = conditions if isinstance(conditions, list) else []
        self.conditions = [dict(cond) for cond in listed if isinstance(cond, dict)]
        self._before = {cond.get("type"): (cond.get("status"), cond.get("reason")) for cond in self.conditions}
        self._now = now
        self._announced: dict[str, tuple[str, str, str]] = {}

    def is_true(self, type_: str) -> bool:
        return is_true(self.conditions, type_)

    def true_types(self) -> frozenset[str]:
        return frozenset(cond["type"] for cond in self.conditions if cond.get("status") == TRUE)

    def apply(self, change: ConditionChange, *, event: bool = True) -> bool:
        return self.set(change.type, TRUE, change.reason, change.message, change.event_type if event else None)

    def set(self, type_: str, status: str, reason: str, message: str, event_type: Optional[str] = "Normal") -> bool:
        """Set a condition as kubeflow does; returns whether anything changed."""
        if self.is_true(c.CONDITION_FAILED):
            return False
        if type_ == c.CONDITION_FAILED and status == TRUE and self.is_true(c.CONDITION_SUCCEEDED):
            return False
        existing = find(self.conditions, type_)
        if existing is not None and existing.get("status") == status and existing.get("reason") == reason:
            return False
        new = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastUpdateTime": self._now,
            "lastTransitionTime": self._now,
        }
        if existing is not None and existing.get("status") == status:
            new["lastTransitionTime"] = existing.get("lastTransitionTime", self._now)
        kept = []
        for cond in self.conditions:
            other = cond.get("type")
            if other == type_:
                continue
            if {type_, other} == {c.CONDITION_RUNNING, c.CONDITION_RESTARTING}:
                continue
            if type_ in (c.CONDITION_SUCCEEDED, c.CONDITION_FAILED) and other == c.CONDITION_RUNNING:
                # Only the status flips: reason, message and both times stay as they were.
                cond = {**cond, "status": FALSE}
            kept.append(cond)
        kept.append(new)
        self.conditions = kept
        if event_type is not None:
            self._announced[type_] = (event_type, reason, message)
        return True

    def changes(self) -> tuple[list[Event], list[str]]:
        """Events and metric names for the conditions that differ from the pass's start."""
        events: list[Event] = []
        metrics: list[str] = []
        for cond in self.conditions:
            type_ = cond["type"]
            state = (cond.get("status"), cond.get("reason"))
            if self._before.get(type_) == state:
                continue
            announced = self._announced.get(type_)
            if announced is not None and announced[1] == cond.get("reason"):
                events.append(Event(announced[0], announced[1], announced[2]))
            if cond.get("status") == TRUE and type_ in _METRICS:
                was_true = self._before.get(type_, (None,))[0] == TRUE
                if not was_true:
                    metrics.append(_METRICS[type_])
        return events, metrics
