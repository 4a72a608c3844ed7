"""Which node a pod fits on, and if none, why: kube-scheduler's filter and score rules.

Pure functions over plain pod dicts and :class:`NodeResources` (what one node has, its
labels, taints and cordon, and what is already bound to it), so the rules can be tested
without a server. Filters, in kube-scheduler's plugin order, a node reported by the first
that fails: node unschedulable (cordon), taints and tolerations (NoSchedule/NoExecute; a node
that is not Ready carries the lifecycle controller's not-ready/unreachable taints, so this
covers it), node selector and required node affinity, ports treated like host ports across
owners, resources, then the rules across nodes: topology spread constraints (:mod:`.spread`)
and inter-pod affinity (:mod:`.interpod`), counted once per pod over :class:`.AssignedPods`.
A pod that sets a placement field this scheduler does not implement fits nowhere and the
message names the field (:mod:`.unsupported`); the message's ``preemption:`` half is
:mod:`.preemption`'s. Scores, among the nodes that fit, most important first: preferred node
affinity weights, preferred inter-pod affinity, ScheduleAnyway spreading, untolerated
PreferNoSchedule taints, then the least requested CPU and memory (so pods spread).
:mod:`.binding` acts on the decisions.
"""
from __future__ import annotations

import functools
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Optional

from trainctl.cluster.controlplane import taints
from trainctl.cluster.network.isolation import ISOLATED, POD_NETWORK_LABEL
from trainctl.cluster.podutil import DEVICE_RESOURCES, HOLLOW_NODE_LABEL, is_terminal, quantity_or_zero
from trainctl.cluster.scheduler import interpod, spread
from trainctl.cluster.scheduler.assigned import AssignedPods, Placed, placed_on, pod_affinity
from trainctl.cluster.scheduler.labels import requirement_matches
from trainctl.cluster.scheduler.preemption import Candidate, NodeCase, Problems, post_filter, priority
from trainctl.cluster.scheduler.unsupported import refusal, unsupported_fields

Obj = dict[str, Any]

DEFAULT_SCHEDULER = "default-scheduler"
MACHINE_PORT_PROBLEM = "is in use on this machine (not by a pod of this cluster)"
# Resources checked against the node; anything else a pod asks for must be advertised too.
_IGNORED_RESOURCES = {"ephemeral-storage"}


def container_requests(container: Obj) -> dict[str, Decimal]:
    """Requests, falling back to limits (what API server defaulting does for a real kubelet)."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: quantity_or_zero(value) for name, value in merged.items()}


def pod_requests(pod: Obj) -> dict[str, Decimal]:
    """Effective pod request: max(sum over containers, max over init containers), per resource,
    plus the pod's ``overhead`` (what its sandbox costs, set from a RuntimeClass)."""
    spec = pod.get("spec", {})
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, amount in container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for container in spec.get("initContainers") or []:
        for name, amount in container_requests(container).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    overhead = spec.get("overhead")
    for name, value in (overhead.items() if isinstance(overhead, dict) else ()):
        total[name] = total.get(name, Decimal(0)) + quantity_or_zero(value)
    return total


def pod_ports(pod: Obj, host_ports_only: bool = False) -> set[tuple[int, str]]:
    """Every declared (port, protocol): containerPorts are treated like hostPorts here, unless
    the node gives each pod a network of its own (``host_ports_only``)."""
    ports: set[tuple[int, str]] = set()
    spec = pod.get("spec", {})
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for port in container.get("ports") or []:
            number = port.get("hostPort") or (None if host_ports_only else port.get("containerPort"))
            if isinstance(number, int) and 0 < number < 65536:  # the kubelet rejects the others
                ports.add((number, port.get("protocol") or "TCP"))
    return ports


def owner_key(pod: Obj) -> str:
    """Who a pod belongs to: its controller's uid, else its first owner's, else itself."""
    meta = pod.get("metadata", {})
    owners = meta.get("ownerReferences") or []
    for owner in owners:
        if owner.get("controller"):
            return str(owner.get("uid") or owner.get("name", ""))
    if owners:
        return str(owners[0].get("uid") or owners[0].get("name", ""))
    return meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"


TRAINCTL_SCHEDULER = "trainctl-scheduler"
OUR_SCHEDULERS = (DEFAULT_SCHEDULER, TRAINCTL_SCHEDULER)


def wants_this_scheduler(pod: Obj) -> bool:
    """Pods for another scheduler (volcano, scheduler-plugins) stay Pending, as on a cluster
    that does not run it."""
    return (pod.get("spec", {}).get("schedulerName") or DEFAULT_SCHEDULER) in OUR_SCHEDULERS


def pod_ref(pod: Obj) -> str:
    meta = pod.get("metadata", {})
    return f"{meta.get('namespace')}/{meta.get('name')}"


def port_free_on_machine(port: int, protocol: str) -> bool:
    """Can a process bind ``port`` on every address right now (what torch's TCPStore does)?"""
    kind = {"TCP": socket.SOCK_STREAM, "UDP": socket.SOCK_DGRAM}.get(protocol)
    if kind is None:
        return True
    with socket.socket(socket.AF_INET, kind) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


PortProbe = Callable[[int, str], bool]  # (port, protocol) -> free on the machine?
NODE_SELECTOR_PROBLEM = "node(s) didn't match Pod's node affinity/selector"
UNSCHEDULABLE_PROBLEM = "node(s) were unschedulable"
NO_NODES = "no nodes available to schedule pods"


@dataclass(frozen=True)
class NodeResources:
    """One node as the scheduler sees it: what it offers and the pods already bound to it."""

    name: str
    allocatable: Mapping[str, Any]
    labels: Mapping[str, str] = field(default_factory=dict)
    bound: tuple[Obj, ...] = ()  # non-terminal pods bound to (or assumed on) the node
    # Device resource -> indices the node's running pods hold, e.g. {"nvidia.com/gpu": {0}}.
    allocated_devices: Mapping[str, set[int]] = field(default_factory=dict)
    taints: tuple[Obj, ...] = ()
    unschedulable: bool = False  # spec.unschedulable: cordoned
    # Pods bound to the machine's other nodes: every node is this one machine, so a port one
    # of them holds is held on all (the port rule looks at these too).
    neighbours: tuple[Obj, ...] = ()
    own_machine: bool = False  # a hollow node: no neighbours, and no port of this machine is its own
    resource_version: str = ""  # of the Node object this view was built from

    @functools.cached_property
    def capacity(self) -> dict[str, Decimal]:
        return {name: quantity_or_zero(value) for name, value in self.allocatable.items()}

    @functools.cached_property
    def placed(self) -> tuple[dict[str, list[Placed]], list[Placed]]:
        """This node's share of :class:`.AssignedPods` (once per view)."""
        return placed_on(self)

    @functools.cached_property
    def free_share(self) -> Decimal:
        """The free share of CPU plus that of memory: what spreading scores (once per view)."""
        free = Decimal(0)
        for name in ("cpu", "memory"):
            capacity = self.capacity.get(name, Decimal(0))
            if capacity > 0:
                free += (capacity - self.requested.get(name, Decimal(0))) / capacity
        return free

    @functools.cached_property
    def live_bound(self) -> list[Obj]:
        return [p for p in self.bound if not is_terminal(p)]

    @functools.cached_property
    def requested(self) -> dict[str, Decimal]:
        """What the live pods bound here request, by resource (computed once per view)."""
        used: dict[str, Decimal] = {}
        for other in self.live_bound:
            for name, amount in pod_requests(other).items():
                used[name] = used.get(name, Decimal(0)) + amount
        return used

    def with_pod(self, pod: Obj) -> "NodeResources":
        """The node once ``pod`` is bound to it (later pods of the same pass see it)."""
        return replace(self, bound=self.bound + (pod,))

    def with_neighbour(self, pod: Obj) -> "NodeResources":
        """The node once ``pod`` is bound to another node of the machine."""
        return replace(self, neighbours=self.neighbours + (pod,))

    @classmethod
    def from_node(cls, node: Obj, bound: Iterable[Obj] = ()) -> "NodeResources":
        """A Node object as the scheduler sees it, with the pods bound to it."""
        meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
        return cls(meta.get("name", ""), dict(status.get("allocatable") or {}), dict(meta.get("labels") or {}),
                   tuple(bound), taints=tuple(t for t in spec.get("taints") or [] if isinstance(t, dict)),
                   unschedulable=bool(spec.get("unschedulable")),
                   own_machine=(meta.get("labels") or {}).get(HOLLOW_NODE_LABEL) == "true",
                   resource_version=str(meta.get("resourceVersion") or ""))


# --- tolerations and node affinity ---------------------------------------------------------
tolerates = taints.tolerates  # Toleration.ToleratesTaint, shared with the node lifecycle controller
def untolerated(pod: Obj, node_taints: Iterable[Obj], effects: tuple[str, ...]) -> list[Obj]:
    if not node_taints:
        return []  # most nodes: nothing to tolerate
    tolerations = [t for t in pod.get("spec", {}).get("tolerations") or [] if isinstance(t, dict)]
    return [taint for taint in node_taints if taint.get("effect") in effects
            and not any(tolerates(toleration, taint) for toleration in tolerations)]


def term_matches(term: Obj, node: NodeResources) -> bool:
    """A NodeSelectorTerm: its matchExpressions (labels) and matchFields (metadata.name),
    all of them; a term with neither matches no node."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    fields_of = {"metadata.name": node.name}
    return (all(requirement_matches(r, node.labels.get) for r in expressions)
            and all(requirement_matches(r, fields_of.get) for r in fields))


def _node_affinity(pod: Obj) -> Obj:
    affinity = pod.get("spec", {}).get("affinity") or {}
    return affinity.get("nodeAffinity") or {}


def matches_node_selection(pod: Obj, node: NodeResources) -> bool:
    """nodeSelector and requiredDuringSchedulingIgnoredDuringExecution (terms ORed)."""
    spec = pod.get("spec", {})
    if not spec.get("nodeSelector") and not spec.get("affinity"):
        return True  # most pods: asked on every node weighed
    selector = spec.get("nodeSelector") or {}
    if any(node.labels.get(key) != value for key, value in selector.items()):
        return False
    required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    return any(term_matches(term, node) for term in required.get("nodeSelectorTerms") or [])


def preferred_weight(pod: Obj, node: NodeResources) -> int:
    if not pod.get("spec", {}).get("affinity"):
        return 0
    return sum(int(p.get("weight") or 0) for p in
               _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution") or []
               if term_matches(p.get("preference") or {}, node))


@dataclass
class Decision:
    """The outcome for one pod: a node (with its devices) or left Pending with a message."""

    fits: bool
    message: str = ""  # why no node fits: "0/3 nodes are available: ..."
    preemption: str = ""  # why preemption finds no room: "preemption: 0/3 nodes are available: ..."
    candidate: Optional[Candidate] = None  # where preempting makes room, and whom it takes off
    # resource name -> device indices for the whole pod, e.g. {"nvidia.com/gpu": [0, 1]}.
    devices: dict[str, list[int]] = field(default_factory=dict)
    node_name: str = ""

    @property
    def full_message(self) -> str:
        """The PodScheduled condition's and the FailedScheduling Event's message."""
        return f"{self.message} {self.preemption}" if self.preemption else self.message


@dataclass(frozen=True)
class _Problem:
    """Why one node does not fit: counted across nodes (kube-scheduler's "2 Insufficient
    cpu") unless it names something of its own (the pod holding a port)."""

    text: str
    counted: bool = True
    unresolvable: bool = False  # no eviction would make the node fit (kube-scheduler's UnschedulableAndUnresolvable)


@dataclass
class _PodChecks:
    """What the cross-node rules counted for one pending pod, before any node is judged."""

    spread: spread.SpreadFilter
    interpod: interpod.InterPodState
    wanted: dict[str, Decimal]  # the pod's requests, summed once rather than for every node

    @classmethod
    def prepare(cls, pod: Obj, nodes: Sequence[NodeResources], assigned: AssignedPods) -> "_PodChecks":
        return cls(spread.prepare_filter(pod, nodes, assigned, *_inclusion(pod)), interpod.prepare(pod, assigned),
                   pod_requests(pod))


def _inclusion(pod: Obj) -> tuple[Callable[[NodeResources], bool], Callable[[NodeResources], bool]]:
    """Node tests for topology spreading's inclusion policies: node selection, and taints
    (cordon included) the pod tolerates."""
    def tolerated(node: NodeResources) -> bool:
        cordon = [{"key": taints.UNSCHEDULABLE, "effect": taints.NO_SCHEDULE}] if node.unschedulable else []
        return not untolerated(pod, [*node.taints, *cordon], (taints.NO_SCHEDULE, taints.NO_EXECUTE))
    return (lambda node: matches_node_selection(pod, node)), tolerated


_CORDON = {"key": taints.UNSCHEDULABLE, "effect": taints.NO_SCHEDULE}  # the taint a cordon stands for


def _node_problems(pod: Obj, node: NodeResources, port_available: Optional[PortProbe],
                   checks: Optional[_PodChecks] = None) -> list[_Problem]:
    bound, capacity, used = node.live_bound, node.capacity, node.requested

    # kube-scheduler's filter plugins in their order; a node is reported by the first that fails.
    if node.unschedulable and untolerated(pod, [_CORDON], (taints.NO_SCHEDULE,)):
        return [_Problem(UNSCHEDULABLE_PROBLEM, unresolvable=True)]
    for taint in untolerated(pod, node.taints, (taints.NO_SCHEDULE, taints.NO_EXECUTE))[:1]:
        text = f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value') or ''}}}"
        return [_Problem(text, unresolvable=True)]
    if not matches_node_selection(pod, node):
        return [_Problem(NODE_SELECTOR_PROBLEM, unresolvable=True)]
    # A hollow node's pods have a network of their own, as on a real cluster: no port collides.
    problems = [] if node.own_machine else _port_problems(
        pod, bound + [p for p in node.neighbours if not is_terminal(p)], port_available,
        node.labels.get(POD_NETWORK_LABEL) == ISOLATED)
    if problems:  # no eviction frees a port a program outside the cluster holds
        return [replace(p, unresolvable=MACHINE_PORT_PROBLEM in p.text) for p in problems]
    wanted = checks.wanted if checks is not None else pod_requests(pod)
    if len(bound) + 1 > capacity.get("pods", Decimal(110)):
        problems.append(_Problem("Too many pods"))
    for name in sorted(wanted):
        amount = wanted[name]
        if amount <= 0 or name in _IGNORED_RESOURCES:
            continue
        if amount + used.get(name, Decimal(0)) > capacity.get(name, Decimal(0)):
            problems.append(_Problem(f"Insufficient {name}"))
    if problems or checks is None:
        return problems
    for check in (checks.spread, checks.interpod):  # PodTopologySpread, then InterPodAffinity
        found = check.problem(node.labels)
        if found is not None:
            return [_Problem(found[0], unresolvable=found[1])]
    return []


def _port_problems(pod: Obj, bound: list[Obj], port_available: Optional[PortProbe],
                   host_ports_only: bool = False) -> list[_Problem]:
    problems: list[_Problem] = []
    mine = owner_key(pod)
    held: dict[tuple[int, str], Obj] = {}
    shared: set[tuple[int, str]] = set()
    for other in bound:
        if owner_key(other) != mine:
            for taken in pod_ports(other, host_ports_only):
                held.setdefault(taken, other)
        else:
            shared |= pod_ports(other, host_ports_only)
    for port, protocol in sorted(pod_ports(pod, host_ports_only)):
        holder = held.get((port, protocol))
        suffix = "" if protocol == "TCP" else f"/{protocol}"
        if holder is not None:
            problems.append(_Problem(f"port {port}{suffix} is in use by pod {pod_ref(holder)}", counted=False))
        elif (port, protocol) not in shared and port_available is not None and not port_available(port, protocol):
            problems.append(_Problem(f"port {port}{suffix} {MACHINE_PORT_PROBLEM}", counted=False))
    return problems


def _devices_for(wanted: Mapping[str, Decimal], node: NodeResources) -> dict[str, list[int]]:
    devices: dict[str, list[int]] = {}
    for name in DEVICE_RESOURCES:
        count = int(wanted.get(name, 0))
        if count > 0:
            taken = node.allocated_devices.get(name, set())
            free = [i for i in range(int(quantity_or_zero(node.allocatable.get(name, 0)))) if i not in taken]
            devices[name] = free[:count]
    return devices


def schedule(pod: Obj, nodes: Sequence[NodeResources], port_available: Optional[PortProbe] = None,
             assigned: Optional[AssignedPods] = None, budgets: Sequence[Obj] = (),
             nominated: Mapping[str, Sequence[Obj]] = {}) -> Decision:
    """The best of ``nodes`` for ``pod``, or kube-scheduler's message for why none fits.

    ``port_available(port, protocol)`` says whether the machine has the port free, for ports
    no pod of the same owner holds yet (another cluster or any other program may use it).
    ``assigned`` indexes every placed pod for the rules across nodes (inter-pod affinity,
    topology spreading); without it, it is built from ``nodes``' bound pods. When no node
    fits, :mod:`.preemption` weighs taking lower-priority pods off them, under the
    PodDisruptionBudgets ``budgets``. The pods ``nominated`` to each node (node -> pods) keep
    their room there from pods of no higher priority.
    """
    if not nodes:
        return Decision(False, NO_NODES)
    nodes = _with_nominated(pod, nodes, nominated)
    refused = unsupported_fields(pod)
    if refused:
        return Decision(False, f"0/{len(nodes)} nodes are available: {refusal(refused)}.",
                        post_filter(pod, [NodeCase(node.name, node.bound, True, lambda _: []) for node in nodes]).message)
    assigned = assigned if assigned is not None else AssignedPods.of(nodes)
    checks = _PodChecks.prepare(pod, nodes, assigned)
    counts: dict[str, int] = {}
    named: list[str] = []
    feasible: list[NodeResources] = []
    failed: list[tuple[NodeResources, bool]] = []
    for node in nodes:
        problems = _node_problems(pod, node, port_available, checks)
        if not problems:
            feasible.append(node)
            continue
        failed.append((node, any(p.unresolvable for p in problems)))
        for problem in problems:
            if problem.counted:
                counts[problem.text] = counts.get(problem.text, 0) + 1
            elif problem.text not in named:
                named.append(problem.text)
    if feasible:
        penalties = spread.penalties(pod, feasible, nodes, assigned, *_inclusion(pod))
        best = max(feasible, key=lambda node: score(pod, node, checks.interpod.score(node.labels),
                                                    penalties.get(node.name, 0.0)))  # max keeps the first of equals
        return Decision(True, devices=_devices_for(checks.wanted, best), node_name=best.name)
    reasons = sorted(f"{count} {text}" for text, count in counts.items()) + named  # sorted, as kube-scheduler
    spec = pod.get("spec") or {}
    across = bool(spec.get("topologySpreadConstraints") or pod_affinity(pod) or assigned.with_terms)
    cases = [NodeCase(node.name, node.live_bound, unresolvable, _problems_among(pod, node, nodes, across))
             for node, unresolvable in failed]
    preemption = post_filter(pod, cases, budgets)
    return Decision(False, f"0/{len(nodes)} nodes are available: {', '.join(reasons)}.", preemption.message,
                    candidate=preemption.candidate)


def _with_nominated(pod: Obj, nodes: Sequence[NodeResources],
                    nominated: Mapping[str, Sequence[Obj]]) -> Sequence[NodeResources]:
    """``nodes`` with the pods nominated to them (waiting for their victims to go) that are at
    least as important as ``pod``, counted as bound: kube-scheduler's filters keep that room
    for them, so a pod of the same priority that comes first in the queue does not take it."""
    if not nominated:
        return nodes
    uid, mine = pod["metadata"].get("uid"), priority(pod)
    views = []
    for node in nodes:
        present = {p["metadata"].get("uid") for p in node.bound}
        waiting = tuple(p for p in nominated.get(node.name, ()) if p["metadata"].get("uid") not in present
                        and p["metadata"].get("uid") != uid and priority(p) >= mine)
        views.append(replace(node, bound=node.bound + waiting) if waiting else node)
    return views


def _problems_among(pod: Obj, node: NodeResources, nodes: Sequence[NodeResources], across: bool) -> Problems:
    """Why ``pod`` would not fit on ``node`` if only some pods stayed there (``across``: with
    the rules across nodes, when the pod or a placed pod has terms). Ports held outside the
    cluster are not asked about: those nodes are not weighed (no eviction frees them)."""

    def problems(staying: list[Obj]) -> list[str]:
        trial = replace(node, bound=tuple(staying))
        checks = None
        if across:  # the rules across nodes count this node's pods too
            trial_nodes = [trial if other is node else other for other in nodes]
            checks = _PodChecks.prepare(pod, trial_nodes, AssignedPods.of(trial_nodes))
        return [problem.text for problem in _node_problems(pod, trial, None, checks)]
    return problems


def score(pod: Obj, node: NodeResources, interpod_score: int = 0,
          spread_penalty: float = 0.0) -> tuple[int, int, float, int, Decimal]:
    """How much ``pod`` wants ``node``, most important first: preferred node affinity weight,
    preferred inter-pod affinity (placed pods' terms included), least ScheduleAnyway skew,
    fewest untolerated PreferNoSchedule taints, then the largest free share of CPU and
    memory (spreading)."""
    return (preferred_weight(pod, node), interpod_score, -spread_penalty,
            -len(untolerated(pod, node.taints, ("PreferNoSchedule",))), node.free_share)


def fit(pod: Obj, allocatable: dict[str, Any], bound: Iterable[Obj],
        allocated_devices: Optional[dict[str, set[int]]] = None,
        port_available: Optional[PortProbe] = None) -> Decision:
    """:func:`schedule` on one unlabelled node holding ``bound``."""
    node = NodeResources("", allocatable, bound=tuple(bound), allocated_devices=allocated_devices or {})
    return schedule(pod, [node], port_available)
