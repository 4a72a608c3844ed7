"""What kube's StatefulSet controller does next for one apps/v1 StatefulSet, from it, its pods
and its ControllerRevisions.

A parameter server, a database or a rendezvous store beside a training job wants stable
names: pod ``<set>-0`` is always the first, whatever restarts. This module is the
StatefulSet's rules, with no I/O and no clock (``now`` is passed in):

- pods are named ``<set>-<ordinal>`` for ordinals ``start .. start+replicas-1``, labelled
  ``statefulset.kubernetes.io/pod-name``, ``apps.kubernetes.io/pod-index`` and
  ``controller-revision-hash`` (the name of their template's ControllerRevision), with
  ``hostname`` the pod's name and ``subdomain`` the ``serviceName``;
- ``OrderedReady`` (the default) creates one pod at a time in ordinal order, each Running and
  Ready (and available after ``minReadySeconds``) before the next, and scales down from the
  highest ordinal, one at a time, only while every kept pod is healthy; ``Parallel`` creates
  and deletes them all at once;
- ``RollingUpdate`` deletes pods of an older revision from the highest ordinal down to
  ``partition``, at most ``maxUnavailable`` (1 by default) unavailable at a time, and the pod is
  recreated from the new template; ordinals below ``partition`` are recreated from the current
  revision; ``OnDelete`` replaces a pod with the new template only once someone deletes it;
- a failed or succeeded pod is deleted and recreated under the same name;
- the status kubectl reads: ``replicas``, ``readyReplicas``, ``currentReplicas``,
  ``updatedReplicas``, ``availableReplicas``, ``currentRevision``, ``updateRevision``,
  ``observedGeneration``, ``collisionCount``; a rolling update whose pods are all updated and
  ready makes the update revision the current one.

The revisions themselves are :mod:`controller_history`'s; the loop in
:mod:`statefulset_controller` applies what this returns.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from trainctl.cluster.controlplane import controller_history, controller_ref
from trainctl.cluster.controlplane.deployment_decision import resolve
from trainctl.cluster.controlplane.replicaset_decision import available_in, count_ready
from trainctl.cluster.podutil import is_terminal, metadata, phase

Obj = dict[str, Any]

API_VERSION, KIND = "apps/v1", "StatefulSet"
REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


@dataclass
class StatefulSetDecision:
    create: list[Obj] = field(default_factory=list)  # pods to create
    delete: list[str] = field(default_factory=list)  # names of pods to delete
    rewrite: list[Obj] = field(default_factory=list)  # pods adopted or released
    revisions: controller_history.RevisionWrites = field(default_factory=controller_history.RevisionWrites)
    status: Optional[Obj] = None
    requeue_after: Optional[float] = None  # when a ready pod becomes available


def ordinal_of(statefulset_name: str, pod: Obj) -> Optional[int]:
    """The ordinal in a pod's name when the pod is named as a member of the set, else None."""
    match = re.fullmatch(rf"{re.escape(statefulset_name)}-(0|[1-9][0-9]*)", str(metadata(pod).get("name") or ""))
    return int(match.group(1)) if match else None


def pod_for(statefulset: Obj, ordinal: int, revision: Obj) -> Obj:
    """Pod ``<set>-<ordinal>`` from the template ``revision`` holds, as kube's controller makes it."""
    meta, spec = metadata(statefulset), statefulset.get("spec") or {}
    template = copy.deepcopy(controller_history.template_of(revision))
    tmeta = template.get("metadata") or {}
    name = f"{meta.get('name')}-{ordinal}"
    pod_spec = template.get("spec") or {}
    pod_spec["hostname"] = name
    if spec.get("serviceName"):
        pod_spec["subdomain"] = spec["serviceName"]
    pod_meta: Obj = {"name": name, "namespace": meta.get("namespace"),
                     "labels": {**(tmeta.get("labels") or {}), POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal),
                                REVISION_LABEL: metadata(revision)["name"]},
                     "ownerReferences": [controller_ref.owner_reference(statefulset, API_VERSION, KIND)]}
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def _revision_of(pod: Obj) -> Optional[str]:
    return (metadata(pod).get("labels") or {}).get(REVISION_LABEL)


def _terminating(pod: Obj) -> bool:
    return bool(metadata(pod).get("deletionTimestamp"))


def _healthy(pod: Obj, min_ready: int, now: datetime) -> bool:
    """Running, Ready, available after ``minReadySeconds``, and not going away."""
    wait = available_in(pod, min_ready, now)
    return phase(pod) == "Running" and not _terminating(pod) and wait is not None and wait <= 0


def _rolling(spec: Obj) -> Optional[Obj]:
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None
    return strategy.get("rollingUpdate") or {}


class _Pass:
    """One pass over the set's ordinals: the pods to create and delete, in kube's order."""

    def __init__(self, statefulset: Obj, now: datetime, current: Obj, update: Obj) -> None:
        spec = statefulset.get("spec") or {}
        self.statefulset, self.now, self.current, self.update = statefulset, now, current, update
        self.monotonic = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        self.min_ready = int(spec.get("minReadySeconds") or 0)
        self.rolling = _rolling(spec)
        self.partition = int((self.rolling or {}).get("partition") or 0)
        self.create: list[Obj] = []
        self.delete: list[str] = []

    def healthy(self, pod: Obj) -> bool:
        return _healthy(pod, self.min_ready, self.now)

    def revision_for(self, ordinal: int, start: int) -> Obj:
        below_partition = self.rolling is not None and ordinal < start + self.partition
        return self.current if below_partition else self.update

    def members(self, replicas: dict[int, Optional[Obj]], start: int) -> bool:
        """Create missing members and replace finished ones; False when an ordered set must wait."""
        for ordinal, pod in sorted(replicas.items()):
            if pod is not None and is_terminal(pod) and not _terminating(pod):
                self.delete.append(metadata(pod)["name"])  # recreated under its name once gone
                if self.monotonic:
                    return False
                continue
            if pod is None:
                self.create.append(pod_for(self.statefulset, ordinal, self.revision_for(ordinal, start)))
                if self.monotonic:
                    return False
                continue
            if self.monotonic and not self.healthy(pod):
                return False
        return True

    def condemned(self, pods: list[Obj]) -> bool:
        """Delete members beyond the replica count, highest ordinal first; False when waiting."""
        first_unhealthy = next((p for p in pods if not self.healthy(p)), None)
        for pod in pods:
            if _terminating(pod):
                if self.monotonic:
                    return False
                continue
            if self.monotonic and not self.healthy(pod) and pod is not first_unhealthy:
                return False
            self.delete.append(metadata(pod)["name"])
            if self.monotonic:
                return False
        return True

    def roll(self, replicas: dict[int, Optional[Obj]], start: int, replica_count: int) -> None:
        """Replace pods of an older revision from the highest ordinal down to the partition."""
        if self.rolling is None:
            return
        budget = max(resolve(self.rolling.get("maxUnavailable", 1), replica_count, round_up=False), 1)
        unavailable = 0
        update_name = metadata(self.update)["name"]
        for ordinal in sorted(replicas, reverse=True):
            if ordinal < start + self.partition or unavailable >= budget:
                return
            pod = replicas[ordinal]
            if pod is None:
                unavailable += 1
                continue
            if _revision_of(pod) != update_name and not _terminating(pod):
                self.delete.append(metadata(pod)["name"])
                unavailable += 1
            elif not self.healthy(pod):
                unavailable += 1


def decide(statefulset: Obj, pods: list[Obj], revisions: list[Obj], now: datetime) -> StatefulSetDecision:
    """``pods`` and ``revisions``: those of the StatefulSet's namespace (its own and candidates
    for adoption)."""
    meta, spec = metadata(statefulset), statefulset.get("spec") or {}
    name, uid = str(meta.get("name")), meta.get("uid")
    decision = StatefulSetDecision()

    history = controller_history.plan(statefulset, API_VERSION, KIND, revisions)
    update = history.update
    status_in = statefulset.get("status") or {}
    by_name = {metadata(r).get("name"): r for r in history.revisions}
    current = by_name.get(status_in.get("currentRevision")) or update

    members = [p for p in pods if ordinal_of(name, p) is not None or (controller_ref.controller_of(p) or {}).get("uid") == uid]
    claimed = controller_ref.claim(statefulset, API_VERSION, KIND, members)
    decision.rewrite = claimed.adopt + claimed.release
    owned = [p for p in claimed.owned if ordinal_of(name, p) is not None]
    replica_count = int(spec.get("replicas", 1))
    start = int((spec.get("ordinals") or {}).get("start") or 0)
    replicas: dict[int, Optional[Obj]] = {o: None for o in range(start, start + replica_count)}
    condemned: list[Obj] = []
    for pod in owned:
        ordinal = ordinal_of(name, pod)
        assert ordinal is not None
        if ordinal in replicas:
            replicas[ordinal] = pod
        else:
            condemned.append(pod)
    condemned.sort(key=lambda p: -(ordinal_of(name, p) or 0))

    if not meta.get("deletionTimestamp"):
        step = _Pass(statefulset, now, current, update)
        if step.members(replicas, start) and step.condemned(condemned):
            step.roll(replicas, start, replica_count)
        decision.create, decision.delete = step.create, step.delete

    in_use = {r for p in owned if (r := _revision_of(p))}
    keep = in_use | {metadata(current)["name"], metadata(update)["name"]}
    decision.revisions = controller_history.writes(history, int(spec.get("revisionHistoryLimit", 10)), keep)
    decision.status, decision.requeue_after = _status(statefulset, owned, history, current, now)
    return decision


def _status(statefulset: Obj, owned: list[Obj], history: controller_history.History, current: Obj,
            now: datetime) -> tuple[Optional[Obj], Optional[float]]:
    spec, old = statefulset.get("spec") or {}, statefulset.get("status") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    created = [p for p in owned if phase(p)]
    running = [p for p in created if phase(p) == "Running"]
    ready, available, requeue = count_ready(running, min_ready, now)
    live = [p for p in created if not _terminating(p)]
    current_name, update_name = metadata(current)["name"], metadata(history.update)["name"]
    status: Obj = {**old, "replicas": len(created), "readyReplicas": ready, "availableReplicas": available,
                   "currentReplicas": sum(1 for p in live if _revision_of(p) == current_name),
                   "updatedReplicas": sum(1 for p in live if _revision_of(p) == update_name),
                   "currentRevision": current_name, "updateRevision": update_name,
                   "observedGeneration": metadata(statefulset).get("generation", 1),
                   "collisionCount": history.collision_count}
    if (_rolling(spec) is not None and status["updatedReplicas"] == status["replicas"] == int(spec.get("replicas", 1))
            and ready == status["replicas"]):
        status["currentRevision"], status["currentReplicas"] = update_name, status["updatedReplicas"]
    for key in ("readyReplicas", "availableReplicas", "currentReplicas", "updatedReplicas"):
        if not status[key]:
            status.pop(key)  # omitted when zero, as kube writes them
    return (status if status != old else None), requeue
