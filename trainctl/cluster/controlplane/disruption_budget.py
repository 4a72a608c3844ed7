"""A PodDisruptionBudget's status, decided as kube-controller-manager's disruption controller
decides it (pure: the pods, the scales of their controllers and the time are passed in).

- ``expectedPods`` and ``desiredHealthy``: with an integer ``minAvailable``, the pods the
  budget covers and that number; with ``maxUnavailable`` or a percentage, the sum of the
  scales of the pods' controllers (any controller with a ``scale`` subresource, a PyTorchJob
  too), percentages rounded up. A pod without a controller does not count there; a controller
  whose scale cannot be read fails the pass safe (no disruption allowed, reason ``SyncFailed``).
- ``currentHealthy``: the covered pods that are Ready, not terminating, and not noted in
  ``disruptedPods`` by the Eviction API (a pod noted there is about to go; a note older than
  two minutes whose pod is still there is dropped, and the pod counts again).
- ``disruptionsAllowed``: ``currentHealthy - desiredHealthy``, never below 0, and 0 while no
  pod is expected; ``observedGeneration`` the budget's generation; the ``DisruptionAllowed``
  condition ``SufficientPods`` or ``InsufficientPods``.

Each pass also says what kube's controller says in Events: ``NoPods``, ``UnmanagedPods``
(pods without a controller under a budget that counts controllers' scales),
``CalculateExpectedPodCountFailed`` and, about a pod, ``NotDeleted``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Optional

from trainctl.cluster import disruption_budgets as budgets
from trainctl.cluster.controlplane.units import format_time, parse_time
from trainctl.cluster.label_selectors import selector_string
from trainctl.kube.events import Event

Obj = dict[str, Any]

DELETION_TIMEOUT = timedelta(minutes=2)


class ExpectedCountError(Exception):
    """The pods' expected count cannot be known (a controller without a readable scale)."""


@dataclass(frozen=True)
class Decision:
    status: Optional[Obj]  # the status to write; None when the stored one is current
    recheck_in: Optional[float] = None  # seconds until a disruptedPods note expires
    events: tuple[tuple[Obj, Event], ...] = ()  # (about, Event), as kube's controller records them each pass


def controller_uid(pod: Obj) -> Optional[str]:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid", ""))
    return None


def needs_scales(pdb: Obj) -> bool:
    """Whether the budget's numbers come from its pods' controllers' scales."""
    spec = pdb.get("spec") or {}
    return spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str)


def _scaled(value: Any, total: int) -> int:
    """kube's GetScaledValueFromIntOrPercent, rounding up."""
    if isinstance(value, str):
        return math.ceil(int(value.rstrip("%")) * total / 100)
    return int(value)


def unmanaged(pods: list[Obj]) -> list[str]:
    return [p["metadata"]["name"] for p in pods if controller_uid(p) is None]


def _expected_scale(pods: list[Obj], scales: Mapping[str, Optional[int]]) -> int:
    counted: dict[str, int] = {}
    for pod in pods:
        uid = controller_uid(pod)
        if uid is None or uid in counted:
            continue  # unmanaged pods do not count (kube warns about them)
        scale = scales.get(uid)
        if scale is None:
            raise ExpectedCountError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        counted[uid] = scale
    return sum(counted.values())


def expected_pods(pdb: Obj, pods: list[Obj], scales: Mapping[str, Optional[int]]) -> tuple[int, int]:
    """(expectedPods, desiredHealthy)."""
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        expected = _expected_scale(pods, scales)
        return expected, max(expected - _scaled(spec["maxUnavailable"], expected), 0)
    minimum = spec.get("minAvailable")
    if isinstance(minimum, int):
        return len(pods), minimum
    if isinstance(minimum, str):
        expected = _expected_scale(pods, scales)
        return expected, _scaled(minimum, expected)
    return 0, 0


def _disrupted(pdb: Obj, pods: list[Obj], now: datetime,
               events: list[tuple[Obj, Event]]) -> tuple[dict[str, str], Optional[float]]:
    """The notes still pending (pods the Eviction API is deleting), and when the first expires."""
    noted = (pdb.get("status") or {}).get("disruptedPods") or {}
    kept: dict[str, str] = {}
    recheck: Optional[float] = None
    for pod in pods:
        name = pod["metadata"]["name"]
        when = parse_time(noted.get(name))
        if pod["metadata"].get("deletionTimestamp") or when is None:
            continue
        expires = when + DELETION_TIMEOUT
        if expires < now:  # expected to be deleted by now and was not: it counts again
            meta = pdb["metadata"]
            events.append((pod, Event("Warning", "NotDeleted", f"Pod was expected by PDB {meta.get('namespace')}/"
                                                               f"{meta['name']} to be deleted but it wasn't")))
            continue
        kept[name] = noted[name]
        left = (expires - now).total_seconds()
        recheck = left if recheck is None else min(recheck, left)
    return kept, recheck


def _current(pdb: Obj, status: Obj) -> bool:
    old = pdb.get("status") or {}
    keys = ("currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed")
    if any(old.get(k) != status[k] for k in keys) or (old.get("disruptedPods") or {}) != status.get("disruptedPods", {}):
        return False
    if old.get("observedGeneration") != pdb["metadata"].get("generation"):
        return False
    condition = next((c for c in old.get("conditions") or [] if c.get("type") == budgets.DISRUPTION_ALLOWED), None)
    return condition is not None and condition.get("status") == ("True" if status["disruptionsAllowed"] > 0 else "False") \
        and condition.get("reason") != budgets.SYNC_FAILED


def decide(pdb: Obj, pods: list[Obj], scales: Mapping[str, Optional[int]], now: datetime) -> Decision:
    """The status of ``pdb`` over ``pods`` (those it covers)."""
    old = pdb.get("status") or {}
    stamp = format_time(now)
    events: list[tuple[Obj, Event]] = []
    if not pods:
        events.append((pdb, Event("Normal", "NoPods", "No matching pods found")))
    try:
        expected, desired = expected_pods(pdb, pods, scales)
    except ExpectedCountError as exc:
        events.append((pdb, Event("Warning", "CalculateExpectedPodCountFailed",
                                  f"Failed to calculate the number of expected pods: {exc}")))
        condition = {"type": budgets.DISRUPTION_ALLOWED, "status": "False", "reason": budgets.SYNC_FAILED,
                     "message": str(exc), "observedGeneration": old.get("observedGeneration")}
        failed = {**old, "disruptionsAllowed": 0,
                  "conditions": budgets.set_condition(list(old.get("conditions") or []), condition, stamp)}
        return Decision(None if failed == old else failed, events=tuple(events))
    if needs_scales(pdb) and unmanaged(pods):
        selector = selector_string((pdb.get("spec") or {}).get("selector") or {})
        events.append((pdb, Event("Warning", "UnmanagedPods",
                                  f"Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be "
                                  "unmanaged. As a result, the status of the PDB cannot be calculated correctly, which "
                                  "may result in undefined behavior. To account for these pods please set "
                                  '".spec.minAvailable" field of the PDB to an integer value.')))
    disrupted, recheck = _disrupted(pdb, pods, now, events)
    healthy = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp")
                  and p["metadata"]["name"] not in disrupted and budgets.is_ready(p))
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    status: Obj = {"observedGeneration": pdb["metadata"].get("generation", 1), "disruptionsAllowed": allowed,
                   "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected}
    if disrupted:
        status["disruptedPods"] = disrupted
    if _current(pdb, status):
        return Decision(None, recheck, tuple(events))
    status["conditions"] = list(old.get("conditions") or [])
    return Decision(budgets.with_allowed_condition(status, stamp), recheck, tuple(events))
