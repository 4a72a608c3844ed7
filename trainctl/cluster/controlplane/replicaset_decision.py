"""What kube's ReplicaSet controller does next for one apps/v1 ReplicaSet, from it and its pods.

A TensorBoard or a small model server beside a training job runs as a Deployment, whose
ReplicaSets keep a number of identical pods alive. This module is the ReplicaSet's rules,
with no I/O and no clock (``now`` is passed in):

- claim the pods: those with the ReplicaSet's controller reference, and orphans its selector
  matches (adopted); an owned pod the selector stopped matching is released;
- create pods from the template, or delete the surplus, choosing which as kube does:
  unscheduled before scheduled, Pending before Unknown before Running, not ready before
  ready, a lower ``controller.kubernetes.io/pod-deletion-cost`` first, pods doubled up on a
  node first, then the most recently ready, the most restarted and the newest;
- the status: ``replicas``, ``fullyLabeledReplicas``, ``readyReplicas``,
  ``availableReplicas`` (ready for ``minReadySeconds``), ``observedGeneration``, and the
  ``ReplicaFailure`` condition while the API server refuses its pods.

The loop in :mod:`replicaset_controller` applies what it returns.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

from trainctl.cluster.controlplane import controller_ref
from trainctl.cluster.controlplane.units import format_time, parse_time
from trainctl.cluster.podutil import int_annotation, is_terminal, metadata

Obj = dict[str, Any]

API_VERSION, KIND = "apps/v1", "ReplicaSet"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}
_LONG_AGO = datetime(1970, 1, 1, tzinfo=timezone.utc)  # a Ready condition without its time


@dataclass
class ReplicaSetDecision:
    create: list[Obj] = field(default_factory=list)  # pods to create
    delete: list[str] = field(default_factory=list)  # names of pods to delete, in kube's order
    rewrite: list[Obj] = field(default_factory=list)  # pods adopted or released (their ownerReferences changed)
    status: Optional[Obj] = None  # the new status, when it changed
    requeue_after: Optional[float] = None  # when a ready pod becomes available


def ready_since(pod: Obj) -> Optional[datetime]:
    """When the pod became Ready, or None while it is not."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            return parse_time(c.get("lastTransitionTime")) or _LONG_AGO
    return None


def available_in(pod: Obj, min_ready_seconds: int, now: datetime) -> Optional[float]:
    """Seconds until a ready pod is available (0: it is); None while it is not ready."""
    since = ready_since(pod)
    if since is None:
        return None
    if min_ready_seconds <= 0:
        return 0.0
    return max((since - now).total_seconds() + min_ready_seconds, 0.0)


def count_ready(pods: list[Obj], min_ready_seconds: int, now: datetime) -> tuple[int, int, Optional[float]]:
    """How many of ``pods`` are ready, how many available, and when the next one becomes available."""
    ready = available = 0
    soonest: Optional[float] = None
    for pod in pods:
        wait = available_in(pod, min_ready_seconds, now)
        if wait is None:
            continue
        ready += 1
        if wait <= 0:
            available += 1
        elif soonest is None or wait < soonest:
            soonest = wait
    return ready, available, soonest


def _deletion_cost(pod: Obj) -> int:
    return int_annotation(pod, DELETION_COST)


def _restarts(pod: Obj) -> int:
    return sum(int(cs.get("restartCount") or 0) for cs in (pod.get("status") or {}).get("containerStatuses") or [])


def _stamp(when: datetime) -> float:
    return when.timestamp()


def deletion_order(pods: list[Obj], related: Optional[list[Obj]] = None) -> list[Obj]:
    """``pods`` in the order kube's ReplicaSet controller deletes them (first: deleted first).

    ``related``: the pods "doubled up" is counted among (the pods of every ReplicaSet of the
    same Deployment), ``pods`` by default.
    """
    on_node = Counter((pod.get("spec") or {}).get("nodeName") for pod in (pods if related is None else related))

    def key(pod: Obj) -> tuple[Any, ...]:
        node = (pod.get("spec") or {}).get("nodeName")
        since = ready_since(pod)
        created = parse_time(metadata(pod).get("creationTimestamp"))
        return (1 if node else 0,
                _PHASE_ORDER.get(str((pod.get("status") or {}).get("phase") or "Pending"), 0),
                0 if since is None else 1,
                _deletion_cost(pod),
                -(on_node[node] if node else 0),
                -_stamp(since) if since is not None else float("-inf"),
                -_restarts(pod),
                -_stamp(created) if created is not None else float("-inf"))

    return sorted(pods, key=key)


def pod_for(replicaset: Obj, owner: tuple[str, str] = (API_VERSION, KIND)) -> Obj:
    """A pod of ``replicaset``, as kube's ReplicaSet controller makes it; ``owner``: the
    (apiVersion, kind) its controller reference names."""
    meta, template = metadata(replicaset), (replicaset.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    pod_meta: Obj = {"generateName": f"{meta.get('name')}-", "namespace": meta.get("namespace"),
                     "labels": dict(tmeta.get("labels") or {}),
                     "ownerReferences": [controller_ref.owner_reference(replicaset, *owner)]}
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": dict(template.get("spec") or {})}


def decide(replicaset: Obj, pods: list[Obj], now: datetime, related: Optional[list[Obj]] = None,
           failure: Optional[tuple[str, str]] = None, owner: tuple[str, str] = (API_VERSION, KIND)) -> ReplicaSetDecision:
    """``pods``: the pods of the ReplicaSet's namespace (its own and candidates for adoption);
    ``related``: the live pods of its sibling ReplicaSets (same controller), its own included;
    ``failure``: (reason, message) of the pods the API server refused in the last pass;
    ``owner``: the (apiVersion, kind) of the object the ReplicaSet stands for (a
    ReplicationController's pods name it)."""
    spec = replicaset.get("spec") or {}
    decision = ReplicaSetDecision()
    claimed = controller_ref.claim(replicaset, *owner, [p for p in pods if not is_terminal(p)])
    decision.rewrite = claimed.adopt + claimed.release
    active = [p for p in claimed.owned if not metadata(p).get("deletionTimestamp")]
    replicas = int(spec.get("replicas", 1))
    if not metadata(replicaset).get("deletionTimestamp"):
        if len(active) < replicas:
            decision.create = [pod_for(replicaset, owner) for _ in range(replicas - len(active))]
        elif len(active) > replicas:
            decision.delete = [metadata(p)["name"] for p in deletion_order(active, related)[:len(active) - replicas]]

    min_ready = int(spec.get("minReadySeconds") or 0)
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    ready, available, decision.requeue_after = count_ready(active, min_ready, now)
    fully_labeled = sum(1 for p in active if all((metadata(p).get("labels") or {}).get(k) == v for k, v in template_labels.items()))
    old: Obj = replicaset.get("status") or {}
    status: Obj = {**old, "replicas": len(active), "fullyLabeledReplicas": fully_labeled, "readyReplicas": ready,
                   "availableReplicas": available, "observedGeneration": metadata(replicaset).get("generation", 1)}
    for key in ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
        if not status[key]:
            status.pop(key)  # omitted when zero, as kube writes them
    conditions = [c for c in old.get("conditions") or [] if c.get("type") != "ReplicaFailure"]
    current = next((c for c in old.get("conditions") or [] if c.get("type") == "ReplicaFailure"), None)
    if failure is not None:
        conditions.append(current if current is not None else {
            "type": "ReplicaFailure", "status": "True", "lastTransitionTime": format_time(now),
            "reason": failure[0], "message": failure[1]})
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    if status != old:
        decision.status = status
    return decision
