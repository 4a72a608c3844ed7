"""Lost nodes in a pass: force-delete what no kubelet will confirm, and replace it.

``nodes`` decides which pods are lost from plain Node and Pod dicts (the manager's handlers
use it too); these are the steps of a pass that act on it: finding the job's lost pods,
force-deleting them and pods stuck terminating (kubeflow/training-operator#2072), and
counting the replacements, where a static job restarts all its pods (a trainctl extension,
docs/compatibility.md).
"""

from __future__ import annotations

from trainctl.controller.frameworks.base import ConditionChange
from trainctl.controller.reconcile import members, nodes
from trainctl.controller.reconcile.children import node_of, parse_time, rfc3339, typed_ref
from trainctl.controller.reconcile.plan import Event
from trainctl.controller.reconcile.state import Pass

# By replica type, the name of each pod lost with its node and the node's name.
LostByType = dict[str, list[tuple[str, str]]]


def find_lost_pods(p: Pass) -> None:
    """Record the pods lost with their node and when the next node-lost grace expires."""
    grace, problem = nodes.grace_seconds(p.annotations, p.config.node_lost_grace_seconds)
    if problem is not None:
        p.problems.append(Event("Warning", "InvalidNodeLostGrace", problem))
    p.lost, p.lost_waits = nodes.find_lost(p.observed.pods, p.observed.nodes, p.now, grace)
    p.lost_uids = {(lost.pod.get("metadata") or {}).get("uid") for lost in p.lost}


def forget_lost_pods(p: Pass) -> None:
    """A finished job replaces nothing: its pods follow cleanPodPolicy, stuck ones the rule below."""
    p.lost, p.lost_uids, p.lost_waits = [], set(), []


def force_delete_stuck_pods(p: Pass) -> None:
    """Pods terminating long past their deletionTimestamp sit on a lost node (#2072)."""
    grace = p.config.force_delete_grace_seconds
    for pod in p.observed.pods:
        if p.is_lost(pod):
            continue
        deleted_at = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
        if deleted_at is None:
            continue
        left = (deleted_at - p.now).total_seconds() + grace
        if left <= 0:
            cause = (
                f"force-deleted: on node {node_of(pod)}, still terminating "
                f"at least {grace:g}s after its deadline {rfc3339(deleted_at)}"
            )
            p.plan.deletes.append(typed_ref(pod, "Pod", force=True, cause=cause))
        else:
            p.requeue.append(left)


def force_delete_lost_pods(p: Pass) -> None:
    """Force-delete pods lost with their node, terminating ones too: no kubelet confirms it."""
    for lost in p.lost:
        p.plan.deletes.append(typed_ref(lost.pod, "Pod", force=True, cause=lost.cause))
    p.requeue.extend(p.lost_waits)  # look again the moment a grace expires


def restart_for_lost_pods(p: Pass) -> tuple[int, LostByType]:
    """Count the replacements of lost replicas; a static job restarts all its pods.

    The manager deletes conditionally and waits for its deletes to show in the cache, so
    a lost pod (one uid) is seen lost, and counted, in one pass only. An elastic job's
    survivors keep training at the smaller size and the replacement rejoins: one restart
    per lost pod. A static job's ranks cannot take a new member: every pod is deleted and
    recreated, one restart of the job. Returns the restarts and, by replica type, the
    lost pods and their nodes.
    """
    lost_by_type: LostByType = {}
    for rtype in p.types:
        kept = members.kept(p, rtype)
        for index, pod in sorted(p.pods.slots(rtype).items()):
            if index in kept and p.is_lost(pod):
                lost_by_type.setdefault(rtype, []).append((pod["metadata"].get("name", ""), node_of(pod)))
    if not lost_by_type:
        return 0, {}
    if p.framework.replaces_members_alone(p.job):
        return sum(len(pods) for pods in lost_by_type.values()), lost_by_type
    name, node = next(iter(lost_by_type.values()))[0]
    why = f"restarting the static job: {name} was lost with node {node}"
    for pod in p.pods.replicas():
        p.delete(pod, with_service=False, cause=why)
    return 1, lost_by_type


def restarting(p: Pass, rtype: str, lost: LostByType) -> ConditionChange:
    """The Restarting condition for ``rtype``: its pods lost with their node, if any, else failed."""
    if rtype in lost:
        return p.framework.restarting_lost(p.name, rtype, lost[rtype])
    return p.framework.restarting(p.name, rtype)
