"""What kube's Deployment controller does next for one apps/v1 Deployment, from it, its
ReplicaSets and their pods.

``kubectl create deployment``, ``kubectl set image``, ``kubectl scale`` and ``kubectl
rollout status`` expect kube's rules, which this module is, with no I/O and no clock (``now``
is passed in):

- one ReplicaSet per pod template, named ``NAME-<hash of the template>`` and labelled
  ``pod-template-hash``; the one whose template is the Deployment's is the new one, with the
  revision ``deployment.kubernetes.io/revision`` one above every old one's (so a template set
  back to an old one, as ``kubectl rollout undo`` does, brings that ReplicaSet back as the
  newest revision);
- RollingUpdate: the new ReplicaSet grows while the total stays within ``replicas +
  maxSurge``, old ones shrink while ``replicas - maxUnavailable`` pods stay available
  (percentages of ``replicas``, surge rounded up and unavailability down, 25% each by
  default); old ReplicaSets' unavailable pods go first;
- Recreate: every old ReplicaSet goes to zero, and the new one starts once their pods are gone;
- the status kubectl reads (``replicas``, ``updatedReplicas``, ``readyReplicas``,
  ``availableReplicas``, ``unavailableReplicas``, ``observedGeneration``) and the
  ``Available`` and ``Progressing`` conditions with kube's reasons, ``ProgressDeadlineExceeded``
  after ``progressDeadlineSeconds`` without progress;
- the Deployment carries its new ReplicaSet's revision in the same annotation;
- old ReplicaSets scaled to zero beyond ``revisionHistoryLimit`` are deleted once a rollout is
  complete.

A Deployment resized in the middle of a rollout (or while paused in one) is scaled
proportionally across the ReplicaSets that have pods, as kube does (shares by their current
sizes, where kube divides by the previous size it annotated); a paused Deployment starts no
rollout. The loop in :mod:`deployment_controller` applies the result.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Optional

from trainctl.cluster.controlplane import controller_ref
from trainctl.cluster.controlplane.units import format_time, parse_time
from trainctl.cluster.podutil import int_annotation, is_terminal, metadata

Obj = dict[str, Any]

API_VERSION, KIND = "apps/v1", "Deployment"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
_HASH_ALPHABET = "bcdfghjkmnpqrstvwxz2456789"  # no vowels: a hash never spells a word


@dataclass
class DeploymentDecision:
    create: list[Obj] = field(default_factory=list)  # ReplicaSets to create
    update: list[Obj] = field(default_factory=list)  # ReplicaSets to write (replicas, annotations, ownerReferences)
    delete: list[str] = field(default_factory=list)  # names of old ReplicaSets beyond the history limit
    status: Optional[Obj] = None  # the new status, when it changed
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    requeue_after: Optional[float] = None  # when the progress deadline falls due
    revision: Optional[str] = None  # the Deployment's own revision annotation, when it must change (kubectl rollout undo reads it)


def _comparable(template: Obj) -> Obj:
    """A pod template without the hash label and empty metadata, as two templates are compared."""
    out = copy.deepcopy(template or {})
    meta = {k: v for k, v in (out.get("metadata") or {}).items() if v not in (None, {}, [], "")}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != HASH_LABEL}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    out["metadata"] = meta
    return out


def template_hash(template: Obj) -> str:
    """The ``pod-template-hash`` of a pod template: the same template always gives the same value."""
    return short_hash(_comparable(template))


def short_hash(value: Any) -> str:
    """Ten label-safe characters that name a JSON value (a template, a revision's data)."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).digest()
    number, text = int.from_bytes(digest[:8], "big"), ""
    for _ in range(10):
        number, digit = divmod(number, len(_HASH_ALPHABET))
        text += _HASH_ALPHABET[digit]
    return text


def resolve(value: Any, total: int, round_up: bool) -> int:
    """An IntOrString (``3`` or ``"25%"``) against ``total``."""
    if isinstance(value, int):
        return value
    text = str(value or "0")
    if text.endswith("%"):
        share = total * int(text[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(text)


def surge_and_unavailable(deployment: Obj) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) in pods; never both zero, as kube makes them."""
    spec = deployment.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    strategy = spec.get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return 0, 0
    rolling = strategy.get("rollingUpdate") or {}
    surge = resolve(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = resolve(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, min(unavailable, replicas)


def revision(replicaset: Obj) -> int:
    return int_annotation(replicaset, REVISION)


def _replicas(replicaset: Obj) -> int:
    return int((replicaset.get("spec") or {}).get("replicas", 0) or 0)


def _status(replicaset: Obj, key: str) -> int:
    return int((replicaset.get("status") or {}).get(key, 0) or 0)


def new_replicaset(deployment: Obj, replicas: int, revision_number: int) -> Obj:
    """The ReplicaSet of the Deployment's current template."""
    meta, spec = metadata(deployment), deployment.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    pod_hash = template_hash(template)
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: pod_hash}
    selector = copy.deepcopy(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: pod_hash}
    surge, _ = surge_and_unavailable(deployment)
    annotations = {**(meta.get("annotations") or {}), REVISION: str(revision_number),
                   DESIRED_REPLICAS: str(spec.get("replicas", 1)), MAX_REPLICAS: str(int(spec.get("replicas", 1)) + surge)}
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta.get('name')}-{pod_hash}", "namespace": meta.get("namespace"),
                         "labels": dict(tmeta["labels"]), "annotations": annotations,
                         "ownerReferences": [controller_ref.owner_reference(deployment, API_VERSION, KIND)]},
            "spec": {"replicas": replicas, "minReadySeconds": spec.get("minReadySeconds", 0), "selector": selector,
                     "template": template}}


def _set_condition(conditions: list[Obj], kind: str, status: str, reason: str, message: str, now: datetime) -> None:
    """Add or update a condition; its transition time moves only when its status does."""
    stamp = format_time(now)
    for c in conditions:
        if c.get("type") == kind:
            if (c.get("status"), c.get("reason"), c.get("message")) == (status, reason, message) and reason != "ReplicaSetUpdated":
                return
            if c.get("status") != status:
                c["lastTransitionTime"] = stamp
            c.update(status=status, reason=reason, message=message, lastUpdateTime=stamp)
            return
    conditions.append({"type": kind, "status": status, "lastUpdateTime": stamp, "lastTransitionTime": stamp,
                       "reason": reason, "message": message})


def _condition(conditions: list[Obj], kind: str) -> Optional[Obj]:
    return next((c for c in conditions if c.get("type") == kind), None)


class _Plan:
    """The Deployment's ReplicaSets as this pass leaves them, and the events of what changed."""

    def __init__(self, deployment: Obj, owned: list[Obj]) -> None:
        self.name = metadata(deployment).get("name")
        self.replicasets = {metadata(rs)["name"]: copy.deepcopy(rs) for rs in owned}
        self.events: list[tuple[str, str, str]] = []

    def scale(self, replicaset: Obj, to: int) -> bool:
        current = self.replicasets[metadata(replicaset)["name"]]
        was = _replicas(current)
        if was == to:
            return False
        current.setdefault("spec", {})["replicas"] = to
        self.events.append(("Normal", "ScalingReplicaSet",
                            f"Scaled {'up' if to > was else 'down'} replica set {metadata(current)['name']} from {was} to {to}"))
        return True

    def annotate(self, replicaset: Obj, values: dict[str, str]) -> None:
        meta = self.replicasets[metadata(replicaset)["name"]].setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **values}

    def get(self, replicaset: Obj) -> Obj:
        return self.replicasets[metadata(replicaset)["name"]]


def _scaled_proportionally(deployment: Obj, plan: _Plan, owned: list[Obj]) -> bool:
    """A Deployment resized while several ReplicaSets have pods: each takes a share of the change
    by its size (the rounding left over goes to the largest, the newest on a tie), so the
    rollout's proportions and its surge bound hold. Whether this was such a resize."""
    replicas = int((deployment.get("spec") or {}).get("replicas", 1))
    active = [rs for rs in owned if _replicas(rs) > 0]
    resized = any((metadata(rs).get("annotations") or {}).get(DESIRED_REPLICAS, str(replicas)) != str(replicas) for rs in active)
    if len(active) < 2 or not resized:
        return False
    surge, _ = surge_and_unavailable(deployment)
    total = sum(_replicas(rs) for rs in active)
    change = replicas + surge - total
    order = sorted(active, key=lambda rs: str(metadata(rs).get("creationTimestamp") or ""), reverse=True)
    order.sort(key=lambda rs: -_replicas(rs))  # largest first; the sort is stable, so the newest among equals
    shares = {metadata(rs)["name"]: int(change * _replicas(rs) / total) for rs in order}
    shares[metadata(order[0])["name"]] += change - sum(shares.values())
    for rs in order:
        plan.scale(rs, max(_replicas(rs) + shares[metadata(rs)["name"]], 0))
        plan.annotate(rs, {DESIRED_REPLICAS: str(replicas), MAX_REPLICAS: str(replicas + surge)})
    return True


def _rolling_update(deployment: Obj, plan: _Plan, new: Obj, old: list[Obj]) -> None:
    """One step of a rolling update: grow the new ReplicaSet, else shrink old ones."""
    replicas = int((deployment.get("spec") or {}).get("replicas", 1))
    surge, max_unavailable = surge_and_unavailable(deployment)
    current_new = _replicas(plan.get(new))
    total = sum(_replicas(plan.get(rs)) for rs in [new, *old])
    if current_new > replicas:
        plan.scale(new, replicas)
        return
    if current_new < replicas:
        room = replicas + surge - total
        if room > 0 and plan.scale(new, current_new + min(room, replicas - current_new)):
            return
    if not any(_replicas(plan.get(rs)) for rs in old):
        return
    min_available = replicas - max_unavailable
    new_unavailable = _replicas(plan.get(new)) - _status(new, "availableReplicas")
    budget = total - min_available - new_unavailable
    if budget <= 0:
        return
    by_age = sorted(old, key=lambda rs: (str(metadata(rs).get("creationTimestamp") or ""), metadata(rs)["name"]))
    # Old ReplicaSets' unavailable pods cost no availability: they go first.
    for rs in by_age:
        unhealthy = _replicas(plan.get(rs)) - _status(rs, "availableReplicas")
        if budget <= 0 or unhealthy <= 0:
            continue
        cut = min(budget, unhealthy)
        plan.scale(rs, _replicas(plan.get(rs)) - cut)
        budget -= cut
    available = sum(_status(rs, "availableReplicas") for rs in [new, *old])
    spare = available - min_available
    for rs in by_age:
        if spare <= 0:
            break
        cut = min(_replicas(plan.get(rs)), spare)
        if cut > 0:
            plan.scale(rs, _replicas(plan.get(rs)) - cut)
            spare -= cut


def decide(deployment: Obj, replicasets: list[Obj], pods: list[Obj], now: datetime) -> DeploymentDecision:
    """``replicasets``: those of the Deployment's namespace; ``pods``: the pods of its ReplicaSets."""
    meta, spec = metadata(deployment), deployment.get("spec") or {}
    decision = DeploymentDecision()
    claimed = controller_ref.claim(deployment, API_VERSION, KIND, replicasets)
    decision.update = list(claimed.release)
    plan = _Plan(deployment, claimed.owned)
    replicas = int(spec.get("replicas", 1))
    template = spec.get("template") or {}
    wanted = _comparable(template)
    matching = sorted((rs for rs in claimed.owned if _comparable((rs.get("spec") or {}).get("template") or {}) == wanted),
                      key=lambda rs: str(metadata(rs).get("creationTimestamp") or ""))
    new = matching[0] if matching else None
    old = [rs for rs in claimed.owned if rs is not new]
    next_revision = max((revision(rs) for rs in old), default=0) + 1
    conditions: list[Obj] = [dict(c) for c in (deployment.get("status") or {}).get("conditions") or []]
    surge, max_unavailable = surge_and_unavailable(deployment)
    created: Optional[Obj] = None
    paused = bool(spec.get("paused"))

    if meta.get("deletionTimestamp"):
        pass
    elif paused:
        _set_condition(conditions, "Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", now)
        # Scaling still applies: to the one ReplicaSet with pods (or the newest one), else proportionally.
        active = [rs for rs in claimed.owned if _replicas(rs) > 0]
        latest = active if active else sorted(claimed.owned, key=revision)[-1:]
        if len(latest) == 1:
            plan.scale(latest[0], replicas)
        else:
            _scaled_proportionally(deployment, plan, claimed.owned)
    else:
        progressing = _condition(conditions, "Progressing")
        if progressing is not None and progressing.get("reason") == "DeploymentPaused":
            _set_condition(conditions, "Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed", now)
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        if new is not None:
            annotations = {DESIRED_REPLICAS: str(replicas), MAX_REPLICAS: str(replicas + surge)}
            if revision(new) < next_revision:
                annotations[REVISION] = str(next_revision)
            if any((metadata(new).get("annotations") or {}).get(k) != v for k, v in annotations.items()):
                plan.annotate(new, annotations)
        if recreate:
            old_uids = {metadata(rs).get("uid") for rs in old}
            scaled_down = [plan.scale(rs, 0) for rs in old]
            old_running = any((controller_ref.controller_of(p) or {}).get("uid") in old_uids
                              and not is_terminal(p) for p in pods)
            if not any(scaled_down) and not old_running:
                if new is None:
                    created = new_replicaset(deployment, replicas, next_revision)
                else:
                    plan.scale(new, replicas)
        elif new is None:
            total = sum(_replicas(rs) for rs in old)
            room = max(replicas + surge - total, 0) if old else replicas
            created = new_replicaset(deployment, min(room, replicas), next_revision)
        elif not _scaled_proportionally(deployment, plan, claimed.owned):
            _rolling_update(deployment, plan, new, old)
        if created is not None:
            decision.create.append(created)
            plan.events.append(("Normal", "ScalingReplicaSet",
                                f"Scaled up replica set {created['metadata']['name']} from 0 to {created['spec']['replicas']}"))
            _set_condition(conditions, "Progressing", "True", "NewReplicaSetCreated",
                           f'Created new replica set "{created["metadata"]["name"]}"', now)
        elif new is not None and _condition(conditions, "Progressing") is None:
            _set_condition(conditions, "Progressing", "True", "FoundNewReplicaSet",
                           f'Found new replica set "{metadata(new)["name"]}"', now)

    planned = list(plan.replicasets.values())
    current = created if created is not None else (plan.get(new) if new is not None else None)
    if current is not None and str(revision(current)) != (meta.get("annotations") or {}).get(REVISION):
        decision.revision = str(revision(current))
    status = _deployment_status(deployment, planned, new)
    complete = (status["updatedReplicas"] == replicas and status["replicas"] == replicas
                and status["availableReplicas"] == replicas and created is None and new is not None)
    _set_condition(conditions, "Available", *(("True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
                   if status["availableReplicas"] >= replicas - max_unavailable else
                   ("False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")), now)
    if not paused and not meta.get("deletionTimestamp") and new is not None and created is None:
        _progress(deployment, conditions, status, complete, metadata(new)["name"], now, decision)
    if complete and not paused:
        decision.delete = _beyond_history(deployment, [plan.get(rs) for rs in old])
    status["conditions"] = conditions
    for key in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"):
        if not status[key]:
            status.pop(key)
    old_status = deployment.get("status") or {}
    if status != old_status:
        decision.status = status
    changed = {metadata(rs)["name"]: rs for rs in decision.update}
    for rs in claimed.adopt:
        changed[metadata(rs)["name"]] = plan.get(rs)
    for rs in claimed.owned:
        if plan.get(rs) != rs:
            changed[metadata(rs)["name"]] = plan.get(rs)
    decision.update = list(changed.values())
    decision.events = plan.events + decision.events
    return decision


def _deployment_status(deployment: Obj, replicasets: list[Obj], new: Optional[Obj]) -> Obj:
    available = sum(_status(rs, "availableReplicas") for rs in replicasets)
    return {
        "observedGeneration": metadata(deployment).get("generation", 1),
        "replicas": sum(_status(rs, "replicas") for rs in replicasets),
        "updatedReplicas": _status(new, "replicas") if new is not None else 0,
        "readyReplicas": sum(_status(rs, "readyReplicas") for rs in replicasets),
        "availableReplicas": available,
        "unavailableReplicas": max(sum(_replicas(rs) for rs in replicasets) - available, 0),
    }


def _progress(deployment: Obj, conditions: list[Obj], status: Obj, complete: bool, new_name: str, now: datetime,
              decision: DeploymentDecision) -> None:
    """The Progressing condition: progressed, progressing, or past its deadline."""
    deadline = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    current = _condition(conditions, "Progressing")
    if complete:
        _set_condition(conditions, "Progressing", "True", "NewReplicaSetAvailable",
                       f'ReplicaSet "{new_name}" has successfully progressed.', now)
        return
    old = deployment.get("status") or {}
    moved = (status["updatedReplicas"] > old.get("updatedReplicas", 0) or status["replicas"] < old.get("replicas", 0)
             or status["readyReplicas"] > old.get("readyReplicas", 0)
             or status["availableReplicas"] > old.get("availableReplicas", 0))
    # A finished rollout that loses a pod has not stopped progressing; a timed-out one stays so until it moves.
    if not moved and current is not None and current.get("reason") in ("NewReplicaSetAvailable", "ProgressDeadlineExceeded"):
        return
    if moved or current is None:
        _set_condition(conditions, "Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{new_name}" is progressing.', now)
        current = _condition(conditions, "Progressing")
    if not isinstance(deadline, int) or current is None:
        return
    since = parse_time(current.get("lastUpdateTime")) or now
    left = (since + timedelta(seconds=deadline) - now).total_seconds()
    if left <= 0:
        _set_condition(conditions, "Progressing", "False", "ProgressDeadlineExceeded",
                       f'ReplicaSet "{new_name}" has timed out progressing.', now)
        decision.events.append(("Warning", "ProgressDeadlineExceeded", f"Deployment {metadata(deployment).get('name')} has timed out progressing"))
    else:
        decision.requeue_after = left


def _beyond_history(deployment: Obj, old: list[Obj]) -> list[str]:
    """Old ReplicaSets without pods beyond ``revisionHistoryLimit``, oldest revision first."""
    limit = (deployment.get("spec") or {}).get("revisionHistoryLimit")
    if not isinstance(limit, int):
        return []
    idle = sorted((rs for rs in old if not metadata(rs).get("deletionTimestamp") and _replicas(rs) == 0
                   and _status(rs, "replicas") == 0), key=revision)
    return [metadata(rs)["name"] for rs in idle[:max(len(idle) - limit, 0)]]
