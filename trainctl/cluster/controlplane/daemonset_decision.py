"""What kube's DaemonSet controller does next for one apps/v1 DaemonSet, from it, the nodes and pods.

A log shipper, a metrics exporter or a data cache on every machine of a training cluster is a
DaemonSet: one pod on each node the template may run on. This module is the DaemonSet's
rules, with no I/O and no clock (``now`` is passed in):

- a node is eligible when the template's ``nodeSelector`` and required node affinity match it
  and its ``NoSchedule``/``NoExecute`` taints are tolerated (a running pod only needs to
  tolerate ``NoExecute``), counting the tolerations kube adds
  to every DaemonSet pod (not-ready and unreachable ``NoExecute``; disk, memory and PID
  pressure and unschedulable ``NoSchedule``; network-unavailable for host-network pods);
- each eligible node without a live pod gets one, bound to it as kube binds it: a required
  node affinity term on ``metadata.name`` that the scheduler honours; surplus pods on a node,
  and pods on nodes no longer eligible or gone, are deleted;
- each template is recorded as a ControllerRevision (:mod:`controller_history`), whose hash
  the pods carry in their ``controller-revision-hash`` label, so ``kubectl rollout
  history|undo ds`` work;
- ``RollingUpdate`` replaces pods of an older template (told by that label) while at most ``maxUnavailable`` nodes are without an available pod; ``OnDelete``
  replaces a pod only once someone deletes it;
- the status: desired, current, misscheduled, ready, updated, available and unavailable counts.

The loop in :mod:`daemonset_controller` applies what it returns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

from trainctl.cluster.controlplane import controller_history, controller_ref, taints
from trainctl.cluster.controlplane.deployment_decision import short_hash
from trainctl.cluster.controlplane.replicaset_decision import available_in, count_ready
from trainctl.cluster.label_selectors import requirement_matches
from trainctl.cluster.podutil import is_terminal, metadata

Obj = dict[str, Any]

API_VERSION, KIND = "apps/v1", "DaemonSet"
REVISION_LABEL = "controller-revision-hash"
_NO_EXECUTE = [taints.NOT_READY, taints.UNREACHABLE]
_NO_SCHEDULE = [taints.DISK_PRESSURE, taints.MEMORY_PRESSURE, taints.PID_PRESSURE, taints.UNSCHEDULABLE]


@dataclass
class DaemonSetDecision:
    create: list[Obj] = field(default_factory=list)  # pods to create, one per node
    delete: list[str] = field(default_factory=list)  # names of pods to delete
    rewrite: list[Obj] = field(default_factory=list)  # pods adopted or released
    revisions: controller_history.RevisionWrites = field(default_factory=controller_history.RevisionWrites)
    status: Optional[Obj] = None
    requeue_after: Optional[float] = None  # when a ready pod becomes available


def revision(daemonset: Obj) -> str:
    """The hash of the pod template's revision, when no other revision took its name."""
    return short_hash(controller_history.template_data(daemonset))


def daemon_tolerations(pod_spec: Obj) -> list[Obj]:
    """The template's tolerations and those kube adds to every DaemonSet pod."""
    tolerations = list(pod_spec.get("tolerations") or [])
    added = [(key, taints.NO_EXECUTE) for key in _NO_EXECUTE] + [(key, taints.NO_SCHEDULE) for key in _NO_SCHEDULE]
    if pod_spec.get("hostNetwork"):
        added.append((taints.NETWORK_UNAVAILABLE, taints.NO_SCHEDULE))
    for key, effect in added:
        if not any(t.get("key") == key and t.get("effect") == effect for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": effect})
    return tolerations


def _term_matches(term: Obj, node: Obj) -> bool:
    labels = metadata(node).get("labels") or {}
    fields = {"metadata.name": metadata(node).get("name")}
    return (all(requirement_matches(r, labels.get) for r in term.get("matchExpressions") or [])
            and all(requirement_matches(r, fields.get) for r in term.get("matchFields") or []))


def eligible(pod_spec: Obj, node: Obj, running: bool = False) -> bool:
    """Whether a pod of this template belongs on ``node``; one already ``running`` there stays
    through a ``NoSchedule`` taint it does not tolerate, as kube's only ``NoExecute`` evicts."""
    labels = metadata(node).get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required and not any(_term_matches(t, node) for t in required.get("nodeSelectorTerms") or []):
        return False
    blocking = [t for t in (node.get("spec") or {}).get("taints") or []
                if t.get("effect") == taints.NO_EXECUTE or t.get("effect") == taints.NO_SCHEDULE and not running]
    return taints.matching_tolerations(blocking, daemon_tolerations(pod_spec)) is not None


def pod_for(daemonset: Obj, node_name: str, hash_: str) -> Obj:
    """The pod of ``daemonset`` for ``node_name``, as kube's DaemonSet controller makes it."""
    meta, template = metadata(daemonset), (daemonset.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    spec = json.loads(json.dumps(template.get("spec") or {}))
    spec["tolerations"] = daemon_tolerations(spec)
    affinity = spec.setdefault("affinity", {})
    affinity.setdefault("nodeAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    pod_meta: Obj = {"generateName": f"{meta.get('name')}-", "namespace": meta.get("namespace"),
                     "labels": {**(tmeta.get("labels") or {}), REVISION_LABEL: hash_},
                     "ownerReferences": [controller_ref.owner_reference(daemonset, API_VERSION, KIND)]}
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def node_of(pod: Obj) -> Optional[str]:
    """The node a pod is on or is bound for (its ``metadata.name`` affinity before scheduling)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for requirement in term.get("matchFields") or []:
            if requirement.get("key") == "metadata.name" and requirement.get("operator") == "In" and len(requirement.get("values") or []) == 1:
                return str(requirement["values"][0])
    return None


def _max_unavailable(daemonset: Obj, desired: int) -> int:
    value = ((daemonset.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate", {}).get("maxUnavailable", 1)
    if isinstance(value, str) and value.endswith("%"):
        return max(1, (desired * int(value[:-1]) + 99) // 100)  # rounded up, as kube rounds it here
    return max(1, int(value))


def decide(daemonset: Obj, nodes: list[Obj], pods: list[Obj], now: datetime,
           revisions: Optional[list[Obj]] = None) -> DaemonSetDecision:
    """``pods`` and ``revisions``: those of the DaemonSet's namespace (its own and candidates
    for adoption)."""
    spec = daemonset.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    history = controller_history.plan(daemonset, API_VERSION, KIND, revisions or [])
    hash_ = controller_history.hash_of(history.update)
    decision = DaemonSetDecision()
    claimed = controller_ref.claim(daemonset, API_VERSION, KIND, [p for p in pods if not is_terminal(p)])
    decision.rewrite = claimed.adopt + claimed.release
    live = [p for p in claimed.owned if not metadata(p).get("deletionTimestamp")]
    by_node: dict[str, list[Obj]] = {}
    for pod in live:
        by_node.setdefault(node_of(pod) or "", []).append(pod)
    wanted = {str(metadata(n).get("name")) for n in nodes if eligible(pod_spec, n, running=str(metadata(n).get("name")) in by_node)}
    min_ready = int(spec.get("minReadySeconds") or 0)

    def wait(pod: Obj) -> Optional[float]:
        return available_in(pod, min_ready, now)

    active = not metadata(daemonset).get("deletionTimestamp")
    for node_name, on_node in sorted(by_node.items()):
        if node_name not in wanted:
            decision.delete += [metadata(p)["name"] for p in on_node]
        elif len(on_node) > 1:  # keep the oldest, as kube does
            on_node.sort(key=lambda p: str(metadata(p).get("creationTimestamp") or ""))
            decision.delete += [metadata(p)["name"] for p in on_node[1:]]
    if active:
        decision.create = [pod_for(daemonset, n, hash_) for n in sorted(wanted - set(by_node))]
    kept = {n: pods_[0] for n, pods_ in by_node.items() if n in wanted}

    strategy = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
    if strategy == "RollingUpdate" and active:
        unavailable = len(wanted) - sum(1 for p in kept.values() if (w := wait(p)) is not None and w <= 0)
        budget = _max_unavailable(daemonset, len(wanted)) - unavailable
        old = [p for p in kept.values() if (metadata(p).get("labels") or {}).get(REVISION_LABEL) != hash_]
        old.sort(key=lambda p: wait(p) is not None)  # the unavailable first: replacing them costs nothing
        for pod in old:
            left = wait(pod)
            if left is None or left > 0:
                decision.delete.append(metadata(pod)["name"])  # already unavailable
            elif budget > 0:
                decision.delete.append(metadata(pod)["name"])
                budget -= 1

    ready, available, decision.requeue_after = count_ready(list(kept.values()), min_ready, now)
    updated = sum(1 for p in kept.values() if (metadata(p).get("labels") or {}).get(REVISION_LABEL) == hash_)
    in_use = {f"{metadata(daemonset).get('name')}-{h}" for p in live if (h := (metadata(p).get("labels") or {}).get(REVISION_LABEL))}
    decision.revisions = controller_history.writes(history, int(spec.get("revisionHistoryLimit", 10)),
                                                   in_use | {metadata(history.update)["name"]})
    status: Obj = {**(daemonset.get("status") or {}), "desiredNumberScheduled": len(wanted),
                   "currentNumberScheduled": len(kept),
                   "numberMisscheduled": sum(len(p) for n, p in by_node.items() if n not in wanted),
                   "numberReady": ready, "updatedNumberScheduled": updated, "numberAvailable": available,
                   "numberUnavailable": len(wanted) - available,
                   "observedGeneration": metadata(daemonset).get("generation", 1)}
    if history.collision_count:
        status["collisionCount"] = history.collision_count
    for key in ("updatedNumberScheduled", "numberAvailable", "numberUnavailable"):
        if not status[key]:
            status.pop(key)  # omitted when zero, as kube writes them
    if status != daemonset.get("status"):
        decision.status = status
    return decision
