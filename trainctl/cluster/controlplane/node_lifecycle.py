"""Node health and taint-based eviction, decided as kube-controller-manager's node lifecycle
controller and its NoExecute taint manager decide them.

Pure: the Nodes, their Leases (``kube-node-lease``), the pods and what the controller
remembers (:class:`State`) go in with ``now``; a :class:`Plan` of node status writes, taint
changes, pod status writes, evictions and Events comes out, with the next State.

- A node is alive while its Lease's ``renewTime`` or its Ready heartbeat moves. Both are
  judged by when *this controller* saw them move (kube's probe timestamp), so clock skew
  between a node and the controller does not matter. After the node monitor grace period
  (40 s; 60 s for a node that never posted a Ready condition) without a sign of life, Ready,
  MemoryPressure, DiskPressure and PIDPressure become Unknown (``NodeStatusUnknown``,
  "Kubelet stopped posting node status.").
- Ready=Unknown taints the node ``node.kubernetes.io/unreachable``, Ready=False
  ``node.kubernetes.io/not-ready``, each with both effects (NoExecute carries
  ``timeAdded``); Ready=True removes them. Pressure conditions and ``spec.unschedulable``
  add their NoSchedule taints, as the controller's NoSchedule pass does.
- Pods on a node this controller marked Unknown get Ready=False (once: a pod whose Ready
  turned True after the node went Unknown is the kubelet's to judge).
- NoExecute eviction: a pod that does not tolerate every NoExecute taint of its node is
  deleted at once; one that does is deleted when the smallest ``tolerationSeconds`` of the
  tolerations used has passed since the controller first saw it tainted; without
  ``tolerationSeconds`` it stays. The delete is graceful, so on an unreachable node the pod
  stays Terminating (its kubelet is not there to finish it), as on a real cluster. The pod
  first gets the ``DisruptionTarget`` condition, as kube-controller-manager writes it.
- New NoExecute taints are rate-limited per zone, and none are kept while every node is
  down (:mod:`.disruption`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Mapping, Optional, cast

from trainctl.cluster.controlplane import disruption, units
from trainctl.cluster.controlplane import taints as t
from trainctl.kube.events import Event

Obj = dict[str, Any]
PodKey = tuple[str, str]  # (namespace, name)

LEASE_NAMESPACE = "kube-node-lease"
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")
# (condition type, status) -> the NoSchedule taint it implies
CONDITION_TAINTS = {
    ("Ready", "False"): t.NOT_READY,
    ("Ready", "Unknown"): t.UNREACHABLE,
    ("MemoryPressure", "True"): t.MEMORY_PRESSURE,
    ("DiskPressure", "True"): t.DISK_PRESSURE,
    ("PIDPressure", "True"): t.PID_PRESSURE,
    ("NetworkUnavailable", "True"): t.NETWORK_UNAVAILABLE,
}
CONTROLLED_NO_SCHEDULE = frozenset(CONDITION_TAINTS.values()) | {t.UNSCHEDULABLE}
CONTROLLED_NO_EXECUTE = frozenset({t.NOT_READY, t.UNREACHABLE})
UNKNOWN_REASONS = ("NodeStatusUnknown", "NodeStatusNeverUpdated")


@dataclass(frozen=True)
class NodeLifecycleConfig:
    """kube-controller-manager's ``--node-monitor-grace-period`` and ``--node-startup-grace-period``."""

    node_monitor_grace_period: float = 40.0
    node_startup_grace_period: float = 60.0
    zone_disruption: disruption.DisruptionConfig = field(default_factory=disruption.DisruptionConfig)


@dataclass(frozen=True)
class NodeHealth:
    """The last sign of life seen from a node, timed by this controller's clock."""

    probe_time: datetime
    heartbeat: Optional[str] = None  # the Ready condition's lastHeartbeatTime last seen
    renew_time: Optional[datetime] = None  # the Lease's renewTime last seen


@dataclass(frozen=True)
class ScheduledEviction:
    seen_tainted: datetime
    at: datetime


@dataclass(frozen=True)
class State:
    health: Mapping[str, NodeHealth] = field(default_factory=dict)
    evictions: Mapping[PodKey, ScheduledEviction] = field(default_factory=dict)
    buckets: Mapping[str, disruption.Bucket] = field(default_factory=dict)
    all_fully_disrupted: bool = False


@dataclass(frozen=True)
class Plan:
    """Objects are whole, with the resourceVersion they were decided on."""

    node_statuses: tuple[Obj, ...] = ()  # PUT .../nodes/NAME/status
    node_taints: tuple[Obj, ...] = ()  # nodes whose spec.taints changed
    pod_statuses: tuple[Obj, ...] = ()  # PUT .../pods/NAME/status
    evictions: tuple[Obj, ...] = ()  # pods to delete (gracefully)
    events: tuple[tuple[Obj, Event], ...] = ()
    state: State = field(default_factory=State)
    # Seconds until the earliest scheduled eviction is due (None: nothing scheduled).
    next_eviction_in: Optional[float] = None
    # Seconds until the grace period of the first node still judged Ready runs out, so the
    # next pass can judge it then rather than up to a monitor period later (None: no such node).
    next_verdict_in: Optional[float] = None


def condition(obj: Obj, kind: str) -> Optional[Obj]:
    for entry in (obj.get("status") or {}).get("conditions") or ():
        if entry.get("type") == kind:
            return cast("dict[str, Any] | None", entry)
    return None


def _observe(node: Obj, lease: Optional[Obj], saved: Optional[NodeHealth], now: datetime,
             renewal_seen: Optional[datetime] = None) -> NodeHealth:
    ready = condition(node, "Ready")
    heartbeat = ready.get("lastHeartbeatTime") if ready else None
    if saved is None:
        created = units.parse_time(node["metadata"].get("creationTimestamp")) or now
        health = NodeHealth(created if ready is None else now, heartbeat)
    elif ready is not None and heartbeat != saved.heartbeat:
        health = NodeHealth(now, heartbeat, saved.renew_time)
    else:
        health = saved
    renewed = units.parse_time(((lease or {}).get("spec") or {}).get("renewTime"))
    if renewed is not None and (health.renew_time is None or renewed > health.renew_time):
        health = NodeHealth(min(renewal_seen or now, now), health.heartbeat, renewed)
    return health


def _mark_unknown(node: Obj, now: datetime) -> Optional[Obj]:
    """The node's status with its conditions Unknown, or None when nothing changes."""
    status = copy.deepcopy(node.get("status") or {})
    conditions = status.setdefault("conditions", [])
    stamp = units.format_time(now)
    changed = False
    for kind in ("Ready", *PRESSURE_CONDITIONS):
        entry = next((c for c in conditions if c.get("type") == kind), None)
        if entry is None:
            conditions.append({"type": kind, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                               "message": "Kubelet never posted node status.",
                               "lastHeartbeatTime": node["metadata"].get("creationTimestamp"), "lastTransitionTime": stamp})
            changed = True
        elif entry.get("status") != "Unknown":
            entry.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.",
                         lastTransitionTime=stamp)
            changed = True
    return status if changed else None


def desired_taints(node: Obj, now: datetime) -> list[Obj]:
    """The node's taints once the controller's own are brought in line with its conditions."""
    ready = condition(node, "Ready")
    current = list((node.get("spec") or {}).get("taints") or ())
    if ready is None:  # no verdict yet (within the startup grace period): NoExecute taints stay as they are
        no_execute = next((x.get("key") for x in current if x.get("effect") == t.NO_EXECUTE and x.get("key") in CONTROLLED_NO_EXECUTE), None)
    else:
        no_execute = {"False": t.NOT_READY, "Unknown": t.UNREACHABLE}.get(ready.get("status") or "")
    no_schedule = {CONDITION_TAINTS[(c.get("type"), c.get("status"))]
                   for c in (node.get("status") or {}).get("conditions") or ()
                   if (c.get("type"), c.get("status")) in CONDITION_TAINTS}
    if (node.get("spec") or {}).get("unschedulable"):
        no_schedule.add(t.UNSCHEDULABLE)

    kept = [
        taint for taint in current
        if not (taint.get("effect") == t.NO_EXECUTE and taint.get("key") in CONTROLLED_NO_EXECUTE and taint.get("key") != no_execute)
        and not (taint.get("effect") == t.NO_SCHEDULE and taint.get("key") in CONTROLLED_NO_SCHEDULE and taint.get("key") not in no_schedule)
    ]
    wanted = [{"key": key, "effect": t.NO_SCHEDULE} for key in sorted(no_schedule)]
    if no_execute:
        wanted.append({"key": no_execute, "effect": t.NO_EXECUTE, "timeAdded": units.format_time(now)})
    return kept + [taint for taint in wanted if not any(t.same_taint(taint, k) for k in kept)]


def _set_pod_condition(pod: Obj, entry: Obj, now: datetime) -> bool:
    """Kube's ``UpdatePodCondition``: the transition time moves only with the status."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    old = next((c for c in conditions if c.get("type") == entry["type"]), None)
    if old is None:
        conditions.append({**entry, "lastTransitionTime": units.format_time(now)})
        return True
    if all(old.get(k) == v for k, v in entry.items()):
        return False
    if old.get("status") != entry["status"]:
        old["lastTransitionTime"] = units.format_time(now)
    old.update(entry)
    return True


def _lost_by_node(pod: Obj, node: Obj) -> bool:
    """Whether the pod's Ready=True predates its node going Unknown under this controller."""
    node_ready = condition(node, "Ready")
    pod_ready = condition(pod, "Ready")
    if not node_ready or node_ready.get("status") != "Unknown" or node_ready.get("reason") not in UNKNOWN_REASONS:
        return False
    if not pod_ready or pod_ready.get("status") != "True":
        return False
    went_unknown = units.parse_time(node_ready.get("lastTransitionTime"))
    became_ready = units.parse_time(pod_ready.get("lastTransitionTime"))
    return went_unknown is None or became_ready is None or became_ready <= went_unknown


def _controlled_no_execute(taint: Obj) -> bool:
    return taint.get("effect") == t.NO_EXECUTE and taint.get("key") in CONTROLLED_NO_EXECUTE


def _adds_no_execute(current: list[Obj], taints: list[Obj]) -> bool:
    """Whether ``taints`` newly taints the node for eviction (a not-ready/unreachable swap does not)."""
    had = any(_controlled_no_execute(x) for x in current)
    return not had and any(_controlled_no_execute(x) for x in taints)


def _key(obj: Obj) -> PodKey:
    return obj["metadata"].get("namespace") or "", obj["metadata"]["name"]


def reconcile(
    nodes: list[Obj], leases: list[Obj], pods: list[Obj], state: State, now: datetime,
    config: NodeLifecycleConfig = NodeLifecycleConfig(), renewals_seen: Optional[Mapping[str, datetime]] = None,
) -> Plan:
    """One monitoring pass over every node (kube's ``monitorNodeHealth``) and its pods.

    ``renewals_seen``: when this controller saw each node's latest Lease renewal arrive, if
    it noted that before the pass (otherwise a new renewal counts as seen ``now``)."""
    monitor = _MonitorPass(state, now, config)
    monitor.monitor_node_health(nodes, leases, renewals_seen or {})
    zones = monitor.assess_zone_disruption()
    monitor.taint_nodes(zones)
    for pod in pods:
        monitor.process_pod(pod)
    return monitor.plan(zones)


class _MonitorPass:
    """What one :func:`reconcile` pass decides, step by step: node health first, then the
    taints that follow from it, then what those mean for each pod."""

    def __init__(self, state: State, now: datetime, config: NodeLifecycleConfig) -> None:
        self.state, self.now, self.config = state, now, config
        self.health: dict[str, NodeHealth] = {}
        self.judged: dict[str, Obj] = {}  # node name -> the node as this pass leaves it
        self.verdicts: list[float] = []  # seconds until a Ready node's grace runs out
        self.buckets: dict[str, disruption.Bucket] = {}
        self.node_statuses: list[Obj] = []
        self.node_taints: list[Obj] = []
        self.pod_statuses: list[Obj] = []
        self.evictions: list[Obj] = []
        self.scheduled: dict[PodKey, ScheduledEviction] = {}
        self.events: list[tuple[Obj, Event]] = []

    def monitor_node_health(self, nodes: list[Obj], leases: list[Obj], renewals_seen: Mapping[str, datetime]) -> None:
        """Mark Unknown every node whose grace period ran out without a sign of life."""
        lease_by_node = {lease["metadata"]["name"]: lease for lease in leases
                         if lease["metadata"].get("namespace") == LEASE_NAMESPACE}
        for node in nodes:
            name = node["metadata"]["name"]
            if name not in self.state.health:  # as kube's controller says of every node it starts to watch
                self.events.append((node, Event("Normal", "RegisteredNode", f"Node {name} event: Registered Node {name} in Controller")))
            seen = _observe(node, lease_by_node.get(name), self.state.health.get(name), self.now, renewals_seen.get(name))
            self.health[name] = seen
            self.judged[name] = self._judge(node, seen)

    def _judge(self, node: Obj, seen: NodeHealth) -> Obj:
        name = node["metadata"]["name"]
        ready = condition(node, "Ready")
        grace = self.config.node_monitor_grace_period if ready else self.config.node_startup_grace_period
        node = copy.deepcopy(node)
        expires = seen.probe_time + timedelta(seconds=grace)
        if self.now <= expires and (ready is None or ready.get("status") == "True"):
            self.verdicts.append((expires - self.now).total_seconds())
        if self.now > expires:
            status = _mark_unknown(node, self.now)
            if status is not None:
                node["status"] = status
                self.node_statuses.append(node)
                if ready is not None and ready.get("status") == "True":
                    self.events.append((node, Event("Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady")))
        return node

    def assess_zone_disruption(self) -> disruption.Zones:
        zones = disruption.assess(self.judged.values(), self.state.buckets, self.now, self.config.zone_disruption)
        self.buckets = dict(zones.buckets)
        if self.state.all_fully_disrupted and not zones.all_fully_disrupted:
            # Some node answers again: the controller was not cut off after all, so every node
            # gets a fresh grace period before being judged.
            self.health = {name: replace(seen, probe_time=self.now) for name, seen in self.health.items()}
        return zones

    def taint_nodes(self, zones: disruption.Zones) -> None:
        """Bring each node's taints in line with its conditions, within its zone's tainting rate."""
        for name, node in self.judged.items():
            current = list((node.get("spec") or {}).get("taints") or ())
            taints = desired_taints(node, self.now)
            if zones.all_fully_disrupted:
                taints = [x for x in taints if not _controlled_no_execute(x)]
            elif _adds_no_execute(current, taints) and not self._take_token(node, zones):
                # over the zone's tainting rate: a later pass adds it
                taints = [x for x in taints if not _controlled_no_execute(x) or any(t.same_taint(x, c) for c in current)]
            if taints != current:
                self.judged[name] = {**node, "spec": {**(node.get("spec") or {}), "taints": taints}}
                self.node_taints.append(self.judged[name])

    def _take_token(self, node: Obj, zones: disruption.Zones) -> bool:
        """Whether the node's zone may add one NoExecute taint now (and spend the token)."""
        zone = disruption.zone_of(node)
        bucket = self.buckets.get(zone)
        if bucket is not None and zones.rates.get(zone, 0.0) > 0 and bucket.tokens >= 1.0:
            self.buckets[zone] = replace(bucket, tokens=bucket.tokens - 1.0)
            return True
        return False

    def process_pod(self, pod: Obj) -> None:
        """Mark the pod not Ready if its node was lost; evict it as its node's NoExecute taints say."""
        node = self.judged.get((pod.get("spec") or {}).get("nodeName") or "")
        if node is None:
            return
        updated = copy.deepcopy(pod)
        changed = False
        if _lost_by_node(pod, node):
            changed = _set_pod_condition(updated, {"type": "Ready", "status": "False"}, self.now)
            if changed:
                self.events.append((pod, Event("Warning", "NodeNotReady", "Node is not ready")))
        evict, pending = _taint_eviction(pod, node, self.state.evictions.get(_key(pod)), self.now)
        if pending is not None:
            self.scheduled[_key(pod)] = pending
        if evict:
            changed = _set_pod_condition(updated, {
                "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint"}, self.now) or changed
            self.evictions.append(pod)
            self.events.append((pod, Event("Normal", "TaintManagerEviction", f"Marking for deletion Pod {_key(pod)[0]}/{_key(pod)[1]}")))
        if changed:
            self.pod_statuses.append(updated)

    def plan(self, zones: disruption.Zones) -> Plan:
        due = [(e.at - self.now).total_seconds() for e in self.scheduled.values()]
        return Plan(
            node_statuses=tuple(self.node_statuses), node_taints=tuple(self.node_taints),
            pod_statuses=tuple(self.pod_statuses), evictions=tuple(self.evictions), events=tuple(self.events),
            state=State(self.health, self.scheduled, self.buckets, zones.all_fully_disrupted),
            next_eviction_in=max(0.0, min(due)) if due else None,
            next_verdict_in=min(self.verdicts) if self.verdicts else None,
        )


def _taint_eviction(pod: Obj, node: Obj, scheduled: Optional[ScheduledEviction], now: datetime) -> tuple[bool, Optional[ScheduledEviction]]:
    """(evict now, the eviction still pending) for one pod on one node."""
    if pod["metadata"].get("deletionTimestamp"):
        return False, None
    no_execute = [taint for taint in (node.get("spec") or {}).get("taints") or () if taint.get("effect") == t.NO_EXECUTE]
    if not no_execute:
        return False, None
    used = t.matching_tolerations(no_execute, (pod.get("spec") or {}).get("tolerations") or ())
    if used is None:
        return True, None
    seconds = t.toleration_seconds(used)
    if seconds is None:
        return False, None
    if scheduled is None:
        scheduled = ScheduledEviction(now, now + timedelta(seconds=seconds))
    # Kept while the delete is pending, so a failed delete is retried, not rescheduled.
    return scheduled.at <= now, scheduled
