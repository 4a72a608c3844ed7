"""The scheduler: binds pending pods to a node that fits, or says why none does.

A pass takes the nodes' free resources (:class:`~.fit.NodeResources`) and places the
pending pods on them one by one, oldest first, so it does not care whether it runs inside
the one kubelet or, once the cluster has several nodes, as a component of its own. A pod that
fits is *assumed* on its node until the watch shows the binding (kube-scheduler's assume
cache), so the next pod of the same pass sees it, and bound through the ``pods/binding``
subresource: given a ``binder`` (an executor), in the background while the pass goes on, as
kube-scheduler's binding cycle runs apart from its scheduling cycle (one request at a time
would cap scheduling at the API server's round trip); a binding that fails is forgotten and
``on_bind_failed`` asks for another pass. Given a ``node_check``, a binding is made only
if it says the node the pass saw is still current for the pod (:mod:`.freshness`); if not,
the pod is forgotten as a failed binding is, and placed again. A pod that fits nowhere gets
``PodScheduled=False, reason=Unschedulable`` with kube-scheduler's message, written once
per distinct message. Pods go in kube-scheduler's queue order: higher ``spec.priority`` first,
then oldest first; a pod with ``schedulingGates`` is not tried (``reason=SchedulingGated``).

Events, as kube-scheduler's: ``Scheduled`` for each binding, ``FailedScheduling`` with the
condition's message when a pod fits nowhere. Passes run on every change in the cluster, so a
pod that keeps failing with the same message is recorded again only after a back-off that
doubles from 1 s to 10 s (kube-scheduler's pod back-off), and the recorder counts the repeats
on one Event.

A pod that fits nowhere but would fit once lower-priority pods are gone (:mod:`.preemption`
picks the node and the victims, under the PodDisruptionBudgets) preempts them, as
kube-scheduler's DefaultPreemption: the pod's ``status.nominatedNodeName`` names the node;
each victim gets the ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``), so
its controller knows it was taken, not failed, then a graceful delete (its
``terminationGracePeriodSeconds`` respected) and a ``Preempted`` Event. The pod binds once
the victims are gone; until then, later pods of the pass see them terminating, and every pod
of no higher priority sees the nominated pod counted on that node, so none takes its room.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from typing import Any, Optional

from trainctl.cluster import disruption_budgets
from trainctl.cluster.podutil import is_terminal
from trainctl.cluster.scheduler import scheduling_events
from trainctl.cluster.scheduler.assigned import AssignedPods
from trainctl.cluster.scheduler.fit import (
    DEFAULT_SCHEDULER,
    MACHINE_PORT_PROBLEM,
    Decision,
    NodeResources,
    PortProbe,
    schedule,
    wants_this_scheduler,
)
from trainctl.cluster.scheduler.preemption import TERMINATING, Candidate, nominated_node, priority
from trainctl.cluster.scheduler.unsupported import GATED_MESSAGE, is_gated
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.events import Event
from trainctl.kube.podstatus import StatusWriter
from trainctl.kube.restmapper import PODS
from trainctl.kube.timestamps import now_rfc3339

log = logging.getLogger(__name__)

Obj = dict[str, Any]
# (pod, node name, the node's resourceVersion the pass saw) -> is that node current for the pod?
NodeCheck = Callable[[Obj, str, str], bool]
MIN_FEASIBLE_NODES_TO_FIND = 100  # kube-scheduler's minFeasibleNodesToFind


def nodes_to_find(count: int) -> int:
    """How many of ``count`` nodes a pod is weighed against: kube-scheduler's adaptive
    percentageOfNodesToScore (50 % minus 1 % per 125 nodes, at least 5 %), at least 100."""
    if count <= MIN_FEASIBLE_NODES_TO_FIND:
        return count
    percentage = max(5, 50 - count // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, count * percentage // 100)


INITIAL_BACKOFF, MAX_BACKOFF = 1.0, 10.0  # seconds: kube-scheduler's podInitialBackoff and podMaxBackoff


def _places_by_neighbours(pod: Obj) -> bool:
    """Whether placing ``pod`` compares topology domains (inter-pod terms, spreading): those
    are judged over every node, as kube-scheduler counts them before it filters a share."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    return bool(spec.get("topologySpreadConstraints") or affinity.get("podAffinity") or affinity.get("podAntiAffinity"))


def creation_order(pod: Obj) -> tuple[str, str, str]:
    meta = pod.get("metadata", {})
    return meta.get("creationTimestamp") or "", meta.get("namespace", ""), meta.get("name", "")


def queue_order(pod: Obj) -> tuple[int, tuple[str, str, str]]:
    """kube-scheduler's PrioritySort: higher priority first, then oldest first."""
    return -priority(pod), creation_order(pod)


def wants_scheduling(pod: Obj) -> bool:
    """Unbound, alive, and addressed to this scheduler (``schedulerName``)."""
    return (not pod.get("spec", {}).get("nodeName") and not pod.get("metadata", {}).get("deletionTimestamp")
            and not is_terminal(pod) and wants_this_scheduler(pod))


class Scheduler:
    """Pending pods -> bindings or Unschedulable conditions."""

    def __init__(self, client: KubeClient, statuses: StatusWriter, port_available: Optional[PortProbe] = None,
                 recorder: Optional[scheduling_events.SchedulerEvents] = None, clock: Callable[[], float] = time.monotonic,
                 binder: Optional[Executor] = None, on_bind_failed: Callable[[], None] = lambda: None,
                 node_check: Optional[NodeCheck] = None) -> None:
        self._client = client
        self._node_check = node_check
        self._binder = binder
        self._on_bind_failed = on_bind_failed
        self._statuses = statuses
        self._port_available = port_available
        self._events = recorder
        self._clock = clock
        self._lock = threading.Lock()  # guards the three maps below
        self._assumed: dict[str, str] = {}  # pod uid -> node, bound but not yet seen bound
        self._unschedulable: dict[str, str] = {}  # pod uid -> the message last written
        self._failures: dict[str, tuple[str, float, float]] = {}  # pod uid -> (message, next Event at, back-off)
        self._assigned = AssignedPods()
        self._budgets: Sequence[Obj] = ()  # PodDisruptionBudgets, for this pass's preemptions
        self._nominated: dict[str, tuple[Obj, str]] = {}  # pod uid -> (pod, node it was nominated to)
        # A port held outside the cluster frees without any API event: look again soon.
        self.waiting_for_machine_ports = False
        self._next_start = 0  # where the next pod's look at a large cluster's nodes begins

    def assumed(self) -> dict[str, str]:
        """Pod uid -> node for bindings the watch has not shown yet (a snapshot)."""
        with self._lock:
            return dict(self._assumed)

    def observe(self, by_uid: dict[str, Obj]) -> None:
        """Forget assumptions the watch has confirmed, and pods that are gone."""
        with self._lock:
            for uid in list(self._assumed):
                spec = by_uid[uid].get("spec") if uid in by_uid else None
                if not isinstance(spec, dict) or spec.get("nodeName"):
                    del self._assumed[uid]
            self._unschedulable = {u: m for u, m in self._unschedulable.items() if u in by_uid}
            for uid, pod in by_uid.items():  # nominations the watch shows (another writer's too)
                if nominated_node(pod) and not (pod.get("spec") or {}).get("nodeName"):
                    self._nominated[uid] = (pod, nominated_node(pod))
            self._nominated = {u: (by_uid[u], node) for u, (_, node) in self._nominated.items()
                               if u in by_uid and wants_scheduling(by_uid[u])}
            self._failures = {u: f for u, f in self._failures.items() if u in by_uid}

    def pending(self, pods: list[Obj]) -> list[Obj]:
        """The pods to place, in queue order (priority, then age)."""
        with self._lock:
            assumed = set(self._assumed)
        return sorted((p for p in pods if wants_scheduling(p) and p["metadata"]["uid"] not in assumed),
                      key=queue_order)

    def new_pass(self, nodes: Sequence[NodeResources],
                 namespace_labels: Optional[Mapping[str, Mapping[str, str]]] = None,
                 budgets: Sequence[Obj] = ()) -> list[NodeResources]:
        """Start a pass over the pending pods; :meth:`place` them one by one on the result.
        ``namespace_labels`` (namespace -> labels) serve inter-pod terms' ``namespaceSelector``;
        ``budgets`` are the PodDisruptionBudgets preemption weighs."""
        self.waiting_for_machine_ports = False
        self._budgets = budgets
        self._assigned = AssignedPods.of(nodes, namespace_labels or {})
        return list(nodes)

    def place(self, pod: Obj, nodes: list[NodeResources]) -> None:
        """Bind ``pod`` to the first node it fits (and count it there, in ``nodes``), or
        say why it fits nowhere."""
        uid = pod["metadata"]["uid"]
        if is_gated(pod):
            self._write_condition(pod, "SchedulingGated", GATED_MESSAGE)
            return
        decision = self._decide(pod, nodes)
        if decision.fits:
            seen = next(node.resource_version for node in nodes if node.name == decision.node_name)
            if self._binder is None:
                if self._bind(pod, decision.node_name, seen):
                    self._assume(pod, decision.node_name, nodes)
                    self._record(pod, scheduling_events.scheduled(pod, decision.node_name))
            else:
                self._assume(pod, decision.node_name, nodes)
                self._binder.submit(self._bind_in_background, pod, decision.node_name, seen)
            return
        self.waiting_for_machine_ports |= MACHINE_PORT_PROBLEM in decision.message
        if decision.candidate is not None:
            self._preempt(pod, decision.candidate, nodes)
        elif decision.preemption != TERMINATING:
            self._forget_nomination(pod)
        message = decision.full_message
        if self._failed_again(uid, message):
            self._record(pod, scheduling_events.failed_scheduling(message))
        self._write_condition(pod, "Unschedulable", message)

    def _failed_again(self, uid: str, message: str) -> bool:
        """Is this failure to be recorded: a new message, or the back-off since the last one over?"""
        now = self._clock()
        with self._lock:
            last = self._failures.get(uid)
            if last is not None and last[0] == message and now < last[1]:
                return False
            backoff = INITIAL_BACKOFF if last is None or last[0] != message else min(last[2] * 2, MAX_BACKOFF)
            self._failures[uid] = (message, now + backoff, backoff)
            return True

    def _record(self, pod: Obj, event: Event) -> None:
        if self._events is not None:
            self._events.record(pod, event)

    def _assume(self, pod: Obj, node_name: str, nodes: list[NodeResources]) -> None:
        """Count ``pod`` on its node (and as a neighbour on this machine's others) for the
        rest of the pass, and for later passes until the watch shows it bound."""
        chosen = next(node for node in nodes if node.name == node_name)
        for index, node in enumerate(nodes):
            if node is chosen:
                nodes[index] = node.with_pod(pod)
            elif not (node.own_machine or chosen.own_machine):  # they share this machine's ports
                nodes[index] = node.with_neighbour(pod)
        self._assigned.add(pod, node_name)
        with self._lock:
            self._assumed[pod["metadata"]["uid"]] = node_name
            self._unschedulable.pop(pod["metadata"]["uid"], None)
            self._failures.pop(pod["metadata"]["uid"], None)

    def _bind_in_background(self, pod: Obj, node_name: str, seen: str) -> None:
        try:
            bound = self._bind(pod, node_name, seen)
        except Exception:  # no answer (the API server restarting): forget it, the next pass retries
            log.exception("bind %s/%s", pod["metadata"].get("namespace"), pod["metadata"]["name"])
            bound = False
        if bound:
            self._record(pod, scheduling_events.scheduled(pod, node_name))
        else:
            with self._lock:
                self._assumed.pop(pod["metadata"]["uid"], None)
            self._on_bind_failed()

    def _preempt(self, pod: Obj, candidate: Candidate, nodes: list[NodeResources]) -> None:
        """Nominate ``pod`` to the candidate's node and take the victims off it, gracefully."""
        meta = pod["metadata"]
        if nominated_node(pod) != candidate.node:
            try:
                self._client.patch(PODS, meta.get("namespace"), meta["name"],
                                   {"metadata": {"uid": meta["uid"]}, "status": {"nominatedNodeName": candidate.node}},
                                   subresource="status")
            except ApiError as exc:
                log.info("nominating %s/%s to %s: %s", meta.get("namespace"), meta["name"], candidate.node, exc)
                return
        with self._lock:
            self._nominated[meta["uid"]] = (pod, candidate.node)
        taken = {victim["metadata"]["uid"] for victim in candidate.victims if self._take(victim, pod, candidate.node)}
        index = next(i for i, node in enumerate(nodes) if node.name == candidate.node)
        now = now_rfc3339()
        nodes[index] = replace(nodes[index], bound=tuple(  # terminating for the rest of the pass
            {**p, "metadata": {**p["metadata"], "deletionTimestamp": now}} if p["metadata"].get("uid") in taken else p
            for p in nodes[index].bound))
        log.info("preempted %d pod(s) on %s for %s/%s", len(taken), candidate.node, meta.get("namespace"), meta["name"])

    def _take(self, victim: Obj, preemptor: Obj, node: str) -> bool:
        """Mark ``victim`` a DisruptionTarget of preemption, delete it gracefully and say so in
        a ``Preempted`` Event; False when it could not be marked (a later pass looks again)."""
        meta = victim["metadata"]
        scheduler = (preemptor.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER
        condition = {"type": disruption_budgets.DISRUPTION_TARGET, "status": "True", "reason": "PreemptionByScheduler",
                     "message": f"{scheduler}: preempting to accommodate a higher priority pod"}
        conditions = disruption_budgets.set_condition(
            list((victim.get("status") or {}).get("conditions") or []), condition, now_rfc3339())
        try:  # a merge patch replaces the list: conditional on the version the pass saw
            self._client.patch(PODS, meta.get("namespace"), meta["name"],
                               {"metadata": {"uid": meta["uid"], "resourceVersion": meta.get("resourceVersion")},
                                "status": {"conditions": conditions}}, subresource="status")
            self._client.delete(PODS, meta.get("namespace"), meta["name"], uid=meta["uid"])
        except ApiError as exc:
            log.info("preempting %s/%s: %s", meta.get("namespace"), meta["name"], exc)
            return False
        self._record(victim, Event("Normal", "Preempted", f"Preempted by pod {preemptor['metadata']['uid']} on node {node}"))
        return True

    def _forget_nomination(self, pod: Obj) -> None:
        """No room by preemption any more: the pod's nomination no longer holds a node (as
        kube-scheduler clears ``nominatedNodeName`` when preemption finds nothing)."""
        meta = pod["metadata"]
        with self._lock:
            known = self._nominated.pop(meta["uid"], None)
        if known is None and not nominated_node(pod):
            return
        try:
            self._client.patch(PODS, meta.get("namespace"), meta["name"],
                               {"metadata": {"uid": meta["uid"]}, "status": {"nominatedNodeName": None}},
                               subresource="status")
        except ApiError as exc:
            log.info("clearing the nomination of %s/%s: %s", meta.get("namespace"), meta["name"], exc)

    def nominated(self) -> dict[str, list[Obj]]:
        """Node -> the pods nominated to it, waiting for their victims to go."""
        by_node: dict[str, list[Obj]] = {}
        with self._lock:
            for pod, node in self._nominated.values():
                by_node.setdefault(node, []).append(pod)
        return by_node

    def _decide(self, pod: Obj, nodes: list[NodeResources]) -> Decision:
        """On a large cluster, as kube-scheduler: weigh the pod against a share of the nodes,
        each pod starting where the last one stopped, so the nodes are used in turn; fall back
        to every node (and its reasons) when none of that share fits."""
        enough = nodes_to_find(len(nodes))
        with self._lock:
            mine = self._nominated.get(pod["metadata"]["uid"])
        if mine is not None and not nominated_node(pod):  # nominated by this pass, the watch not showing it yet
            pod = {**pod, "status": {**(pod.get("status") or {}), "nominatedNodeName": mine[1]}}
        every = functools.partial(schedule, pod, nodes, self._port_available, self._assigned,
                                  budgets=self._budgets, nominated=self.nominated())
        if enough == len(nodes) or _places_by_neighbours(pod):
            return every()
        start = self._next_start % len(nodes)
        window = (nodes[start:] + nodes[:start])[:enough]
        self._next_start = start + enough
        decision = schedule(pod, window, self._port_available, self._assigned, nominated=self.nominated())
        return decision if decision.fits else every()

    def _bind(self, pod: Obj, node_name: str, seen: str) -> bool:
        """Bind ``pod`` to ``node_name``, which the pass saw at version ``seen``."""
        meta = pod["metadata"]
        if self._node_check is not None and not self._node_check(pod, node_name, seen):
            log.info("node %s changed since %s/%s was placed on it; placing it again",
                     node_name, meta.get("namespace"), meta["name"])
            return False
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "uid": meta["uid"]},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        try:
            self._client.create(PODS, binding, subresource="binding")
            return True
        except ApiError as exc:
            if exc.code != 404:  # 404: the pod is gone; the next pass no longer sees it
                log.info("bind %s/%s: %s", meta.get("namespace"), meta["name"], exc)
            return False

    def _write_condition(self, pod: Obj, reason: str, message: str) -> None:
        """``PodScheduled=False`` with ``reason`` and ``message``, unless already written."""
        meta = pod["metadata"]
        with self._lock:
            if self._unschedulable.get(meta["uid"]) == message:
                return
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                     "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
        try:
            self._statuses.patch(meta, {"status": {"phase": "Pending", "conditions": [condition]}})
        except ApiError as exc:
            log.debug("%s status of %s: %s", reason, meta["name"], exc)
            return
        with self._lock:
            self._unschedulable[meta["uid"]] = message
