"""Disrupted pods in a pass: evicted, preempted or on a reclaimed node, not failed.

``disruption`` tells which pods Kubernetes took away on purpose. Nothing in them failed, so
they count neither up nor failed:

- An elastic job shrinks: the survivors re-form the rendezvous at the smaller size, the
  pod's index is recreated once the pod is gone and waits, Pending, for capacity; when a
  node is schedulable again it joins and the job grows back to the size asked for. No
  restart is counted; an Event says which pod went and why, once while it holds.
- A static job's ranks cannot take a new member: its pods are restarted, once, as for a
  lost node (the replacements, newer than the disruption, are left alone), and the
  Restarting condition names the disruption.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.controller.frameworks.base import ConditionChange
from trainctl.controller.reconcile import members
from trainctl.controller.reconcile.children import is_terminating, parse_time
from trainctl.controller.reconcile.disruption import Disruption, disruption
from trainctl.controller.reconcile.plan import Event
from trainctl.controller.reconcile.state import Pass

REASON_SHRUNK = "ElasticShrink"


def find_disrupted(p: Pass) -> None:
    """Record the job's disrupted replica pods (not lost ones: those are the node's)."""
    for rtype in p.types:
        for pod in p.pods.slots(rtype).values():
            if p.is_lost(pod):
                continue
            found = disruption(pod, p.observed.nodes)
            if found is not None:
                p.disrupted[(pod.get("metadata") or {}).get("uid")] = found


def is_disrupted(p: Pass, pod: dict[str, Any]) -> bool:
    return bool(p.disrupted) and (pod.get("metadata") or {}).get("uid") in p.disrupted


def restart_for_disrupted(p: Pass) -> tuple[int, dict[str, ConditionChange]]:
    """Shrink an elastic job (no restart), or restart a static one; its restarts and, by
    replica type, the Restarting condition that names the disruption."""
    by_type: dict[str, list[Disruption]] = {}
    for rtype in p.types:
        kept = members.kept(p, rtype)
        for index, pod in sorted(p.pods.slots(rtype).items()):
            taken = p.disrupted.get((pod.get("metadata") or {}).get("uid"))
            if taken is not None and index in kept:
                by_type.setdefault(rtype, []).append(taken)
    if not by_type:
        return 0, {}
    if p.framework.replaces_members_alone(p.job):
        for rtype, found in by_type.items():
            for one in found:
                p.problems.append(Event("Normal", REASON_SHRUNK, (
                    f"{p.framework.kind} {p.name} continues without {rtype} {one.pod}: it was {one.why}; "
                    "it comes back when there is room for it")))
        return 0, {}
    disrupted = [one for found in by_type.values() for one in found]
    moments = [one.since for one in disrupted if one.since is not None]
    since = min(moments) if moments else None
    stale = [pod for pod in p.pods.replicas() if not is_terminating(pod) and not p.is_deleting(pod)
             and (is_disrupted(p, pod) or _created_by(pod, since))]
    if not stale:
        return 0, {}  # restarted already: the rest are the replacements
    for pod in stale:
        p.delete(pod, with_service=False, cause=f"restarting the static job: {disrupted[0].describe()}")
    return 1, {
        rtype: p.framework.change(c.CONDITION_RESTARTING, (
            f"{p.framework.kind} {p.name} is restarting because " + ", ".join(one.describe() for one in found) + "."),
            "Warning")
        for rtype, found in by_type.items()
    }


def _created_by(pod: dict[str, Any], moment: Optional[datetime]) -> bool:
    """Whether ``pod`` was created no later than ``moment`` (an unknown time or moment: yes)."""
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    return moment is None or created is None or created <= moment


def replace_failed(p: Pass, pod: dict[str, Any]) -> None:
    """A disrupted pod that ended Failed without a delete (its node shut down) is deleted, to be
    recreated when there is room: not a restart."""
    if (pod.get("status") or {}).get("phase") == "Failed":
        found = p.disrupted[(pod.get("metadata") or {}).get("uid")]
        p.delete(pod, with_service=False, cause=f"to be recreated: it was {found.why}")
