"""Which indices an elastic job's scaled replica type keeps: a chosen worker out, holes refilled.

A static job's ranks are its indices, so it keeps ``0 … replicas-1`` and a scale-down removes
the highest. An elastic job's agents take their ranks from the rendezvous, so any worker may
go: scaling in removes the pods with the lowest ``controller.kubernetes.io/pod-deletion-cost``
first (the annotation ReplicaSets honour; missing or not an integer: 0), ties going to the
highest index, so ``kubectl annotate pod J-worker-1 controller.kubernetes.io/pod-deletion-cost=-100``
followed by ``kubectl scale pytorchjob J --replicas=2`` keeps workers 0 and 2. An index that
holds no live pod (one being replaced) is given up before any running worker.

Indices stay stable: the survivors keep their names, and a later scale out fills the holes
first, lowest index first. What the job holds now is read from what is observed, never from
memory the core does not have: an index is a member while its pod or its Service is live (a
Service outlives its pod's restarts, so an index between restarts still counts).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from trainctl.controller.reconcile.children import is_terminating
from trainctl.controller.reconcile.state import Pass

ANNOTATION_POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def deletion_cost(pod: dict[str, Any]) -> int:
    """The pod's deletion cost; 0 when the annotation is missing or not an integer (as kube)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_POD_DELETION_COST)
    try:
        return int(str(value).strip()) if value is not None else 0
    except ValueError:
        return 0


def chosen_indices(pods: dict[int, dict[str, Any]], services: dict[int, dict[str, Any]], replicas: int) -> frozenset[int]:
    """The ``replicas`` indices an elastic replica type keeps, from its observed pods and Services.

    Members beyond the count go cheapest first: an index without a live pod, then the lowest
    deletion cost, then the highest index. Below the count, the lowest free indices are added.
    """
    live_pods = {index: pod for index, pod in pods.items() if not is_terminating(pod)}
    members = set(live_pods) | {index for index, service in services.items() if not is_terminating(service)}
    if len(members) > replicas:
        def removal_order(index: int) -> tuple[int, int, int]:
            pod = live_pods.get(index)
            return (0, 0, -index) if pod is None else (1, deletion_cost(pod), -index)

        members -= set(sorted(members, key=removal_order)[: len(members) - replicas])
    index = 0
    while len(members) < replicas:
        members.add(index)  # a no-op for a member; the loop ends once the count is reached
        index += 1
    return frozenset(members)


def kept(p: Pass, rtype: str) -> Collection[int]:
    """The indices of ``rtype`` this job keeps: chosen ones for an elastic job's scaled type,
    else ``0 … replicas-1``. Computed once per pass."""
    found = p.members.get(rtype)
    if found is None:
        replicas = p.specs[rtype].replicas or 0
        if rtype == p.framework.job_kind.scale_replica_type and p.framework.replaces_members_alone(p.job):
            found = chosen_indices(p.pods.slots(rtype), p.services.slots(rtype), replicas)
        else:
            found = range(replicas)
        p.members[rtype] = found
    return found
