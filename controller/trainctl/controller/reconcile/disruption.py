"""Which pods Kubernetes took away on purpose, and why: from plain Pod and Node dicts.

A pod evicted, preempted or shut down with its node carries the ``DisruptionTarget``
condition (``EvictionByEvictionAPI`` for a drain, ``PreemptionByScheduler``,
``TerminationByKubelet`` for a node shutdown, ``DeletionByTaintManager`` for a NoExecute
taint); a pod on a node tainted for a spot reclaim (``trainctl.io/spot-reclaim``) that is
being deleted is one too, whatever wrote its condition. ``disrupted`` acts on it in a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.controller.reconcile.children import is_terminating, node_of, parse_time

DISRUPTION_TARGET = "DisruptionTarget"
# What each reason says happened to the pod, in a message.
_REASONS = {
    "EvictionByEvictionAPI": "evicted",
    "PreemptionByScheduler": "preempted by the scheduler",
    "PreemptionByKubeScheduler": "preempted by the scheduler",  # kube 1.26's spelling
    "TerminationByKubelet": "terminated by its kubelet (node shutdown)",
    "DeletionByTaintManager": "evicted by a NoExecute taint",
}


@dataclass(frozen=True)
class Disruption:
    """A pod taken away: its name, its node, why (a phrase for messages) and since when."""

    pod: str
    node: str
    why: str
    since: Optional[datetime]

    def describe(self) -> str:
        return f"pod {self.pod} was {self.why}"


def disruption(pod: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> Optional[Disruption]:
    """How ``pod`` was disrupted, or None when it was not (its node being reclaimed says most)."""
    meta = pod.get("metadata") or {}
    name, node, condition = meta.get("name", ""), node_of(pod), _condition(pod)
    since = parse_time((condition or {}).get("lastTransitionTime")) or _deletion_requested(meta)
    taints = ((nodes.get(node) or {}).get("spec") or {}).get("taints") or []
    if any(taint.get("key") == c.TAINT_SPOT_RECLAIM for taint in taints) and (is_terminating(pod) or condition):
        return Disruption(name, node, f"preempted: node {node} was reclaimed", since)
    if condition is None:
        return None
    return Disruption(name, node, f"{_REASONS.get(condition.get('reason') or '', 'disrupted')} on node {node}", since)


def _condition(pod: dict[str, Any]) -> Optional[dict[str, Any]]:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == DISRUPTION_TARGET and condition.get("status") == "True":
            return dict(condition)
    return None


def _deletion_requested(meta: dict[str, Any]) -> Optional[datetime]:
    """When the pod's delete was asked for: its deadline less its grace period."""
    deadline = parse_time(meta.get("deletionTimestamp"))
    return None if deadline is None else deadline - timedelta(seconds=meta.get("deletionGracePeriodSeconds") or 0)
