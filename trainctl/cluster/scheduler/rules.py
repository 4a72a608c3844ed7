"""Which node a pod fits on, and if none, why: kube-scheduler's filter and score rules.

Pure functions over plain pod dicts and :class:`NodeResources` (what one node has, its
labels, taints and cordon, and what is already bound to it), so the rules can be tested
without a server. Filters: node unschedulable (cordon), node selector and required node
affinity, taints and tolerations (NoSchedule/NoExecute; a node that is not Ready carries
the lifecycle controller's not-ready/unreachable taints, so this covers it), resources,
ports treated like host ports across owners. Scores, among the nodes that fit: preferred
node affinity weights, then untolerated PreferNoSchedule taints, then the least requested
CPU and memory (so pods spread). :mod:`.binding` acts on the decisions.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Optional

from kubernetes.utils import parse_quantity

from ..controlplane import taints
from ..network.isolation import ISOLATED, POD_NETWORK_LABEL

Obj = dict[str, Any]

DEFAULT_SCHEDULER = "default-scheduler"
GPU_RESOURCE = "nvidia.com/gpu"
NPU_RESOURCE = "huawei.com/Ascend910"
DEVICE_RESOURCES = (GPU_RESOURCE, NPU_RESOURCE)
MACHINE_PORT_PROBLEM = "is in use on this machine (not by a pod of this cluster)"
# Resources checked against the node; anything else a pod asks for must be advertised too.
_IGNORED_RESOURCES = {"ephemeral-storage"}


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("500m", "1Gi", 2) as a Decimal; malformed counts as zero."""
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return Decimal(0)


def container_requests(container: Obj) -> dict[str, Decimal]:
    """Requests, falling back to limits (what API server defaulting does for a real kubelet)."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: quantity(value) for name, value in merged.items()}


def pod_requests(pod: Obj) -> dict[str, Decimal]:
    """Effective pod request: max(sum over containers, max over init containers), per resource."""
    spec = pod.get("spec", {})
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, amount in container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for container in spec.get("initContainers") or []:
        for name, amount in container_requests(container).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
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
            return owner.get("uid") or owner.get("name", "")
    if owners:
        return owners[0].get("uid") or owners[0].get("name", "")
    return meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"


def phase(pod: Obj) -> Any:
    status = pod.get("status")
    return status.get("phase") if isinstance(status, dict) else None


def is_terminal(pod: Obj) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


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
                   unschedulable=bool(spec.get("unschedulable")))


# --- tolerations and node affinity ---------------------------------------------------------
tolerates = taints.tolerates  # Toleration.ToleratesTaint, shared with the node lifecycle controller
def untolerated(pod: Obj, node_taints: Iterable[Obj], effects: tuple[str, ...]) -> list[Obj]:
    tolerations = [t for t in pod.get("spec", {}).get("tolerations") or [] if isinstance(t, dict)]
    return [taint for taint in node_taints if taint.get("effect") in effects
            and not any(tolerates(toleration, taint) for toleration in tolerations)]


def _requirement_matches(requirement: Obj, values_of: Callable[[str], Optional[str]]) -> bool:
    key, operator = requirement.get("key", ""), requirement.get("operator")
    values = [str(v) for v in requirement.get("values") or []]
    actual = values_of(key)
    if operator == "In":
        return actual is not None and actual in values
    if operator == "NotIn":
        return actual is None or actual not in values
    if operator == "Exists":
        return actual is not None
    if operator == "DoesNotExist":
        return actual is None
    if operator in ("Gt", "Lt") and actual is not None and len(values) == 1:
        try:
            have, bound = int(actual), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def term_matches(term: Obj, node: NodeResources) -> bool:
    """A NodeSelectorTerm: its matchExpressions (labels) and matchFields (metadata.name),
    all of them; a term with neither matches no node."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    fields_of = {"metadata.name": node.name}
    return (all(_requirement_matches(r, node.labels.get) for r in expressions)
            and all(_requirement_matches(r, fields_of.get) for r in fields))


def _node_affinity(pod: Obj) -> Obj:
    affinity = pod.get("spec", {}).get("affinity") or {}
    return affinity.get("nodeAffinity") or {}


def matches_node_selection(pod: Obj, node: NodeResources) -> bool:
    """nodeSelector and requiredDuringSchedulingIgnoredDuringExecution (terms ORed)."""
    selector = pod.get("spec", {}).get("nodeSelector") or {}
    if any(node.labels.get(key) != value for key, value in selector.items()):
        return False
    required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    return any(term_matches(term, node) for term in required.get("nodeSelectorTerms") or [])


def preferred_weight(pod: Obj, node: NodeResources) -> int:
    return sum(int(p.get("weight") or 0) for p in
               _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution") or []
               if term_matches(p.get("preference") or {}, node))


@dataclass
class Decision:
    """The outcome for one pod: a node (with its devices) or left Pending with a message."""

    fits: bool
    message: str = ""
    # resource name -> device indices for the whole pod, e.g. {"nvidia.com/gpu": [0, 1]}.
    devices: dict[str, list[int]] = field(default_factory=dict)
    node_name: str = ""


@dataclass(frozen=True)
class _Problem:
    """Why one node does not fit: counted across nodes (kube-scheduler's "2 Insufficient
    cpu") unless it names something of its own (the pod holding a port)."""

    text: str
    counted: bool = True


def _node_problems(pod: Obj, node: NodeResources, port_available: Optional[PortProbe]) -> list[_Problem]:
    bound = [p for p in node.bound if not is_terminal(p)]
    capacity = {name: quantity(value) for name, value in node.allocatable.items()}
    used: dict[str, Decimal] = {}
    for other in bound:
        for name, amount in pod_requests(other).items():
            used[name] = used.get(name, Decimal(0)) + amount

    # kube-scheduler's filter plugins in their order; a node is reported by the first that fails.
    cordon = {"key": taints.UNSCHEDULABLE, "effect": taints.NO_SCHEDULE}
    if node.unschedulable and untolerated(pod, [cordon], (taints.NO_SCHEDULE,)):
        return [_Problem(UNSCHEDULABLE_PROBLEM)]
    for taint in untolerated(pod, node.taints, (taints.NO_SCHEDULE, taints.NO_EXECUTE))[:1]:
        return [_Problem(f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value') or ''}}}")]
    if not matches_node_selection(pod, node):
        return [_Problem(NODE_SELECTOR_PROBLEM)]
    problems = _port_problems(pod, bound + [p for p in node.neighbours if not is_terminal(p)], port_available,
                              node.labels.get(POD_NETWORK_LABEL) == ISOLATED)
    if problems:
        return problems
    wanted = pod_requests(pod)
    if len(bound) + 1 > capacity.get("pods", Decimal(110)):
        problems.append(_Problem("Too many pods"))
    for name in sorted(wanted):
        amount = wanted[name]
        if amount <= 0 or name in _IGNORED_RESOURCES:
            continue
        if amount + used.get(name, Decimal(0)) > capacity.get(name, Decimal(0)):
            problems.append(_Problem(f"Insufficient {name}"))
    return problems


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


def _devices_for(pod: Obj, node: NodeResources) -> dict[str, list[int]]:
    wanted = pod_requests(pod)
    devices: dict[str, list[int]] = {}
    for name in DEVICE_RESOURCES:
        count = int(wanted.get(name, 0))
        if count > 0:
            taken = node.allocated_devices.get(name, set())
            free = [i for i in range(int(quantity(node.allocatable.get(name, 0)))) if i not in taken]
            devices[name] = free[:count]
    return devices


def schedule(pod: Obj, nodes: Sequence[NodeResources], port_available: Optional[PortProbe] = None) -> Decision:
    """The first of ``nodes`` that ``pod`` fits on, or kube-scheduler's message for why none.

    ``port_available(port, protocol)`` says whether the machine has the port free, for ports
    no pod of the same owner holds yet (another cluster or any other program may use it).
    """
    counts: dict[str, int] = {}
    named: list[str] = []
    feasible: list[NodeResources] = []
    for node in nodes:
        problems = _node_problems(pod, node, port_available)
        if not problems:
            feasible.append(node)
        for problem in problems:
            if problem.counted:
                counts[problem.text] = counts.get(problem.text, 0) + 1
            elif problem.text not in named:
                named.append(problem.text)
    if feasible:
        best = max(feasible, key=lambda node: score(pod, node))  # max keeps the first of equals
        return Decision(True, devices=_devices_for(pod, best), node_name=best.name)
    reasons = sorted(f"{count} {text}" for text, count in counts.items()) + named  # sorted, as kube-scheduler
    return Decision(False, f"0/{len(nodes)} nodes are available: {', '.join(reasons)}.")


def score(pod: Obj, node: NodeResources) -> tuple[int, int, Decimal]:
    """How much ``pod`` wants ``node``: preferred affinity weight, fewest untolerated
    PreferNoSchedule taints, then the largest free share of CPU and memory (spreading)."""
    used: dict[str, Decimal] = {}
    for other in node.bound:
        if not is_terminal(other):
            for name, amount in pod_requests(other).items():
                used[name] = used.get(name, Decimal(0)) + amount
    free = Decimal(0)
    for name in ("cpu", "memory"):
        capacity = quantity(node.allocatable.get(name, 0))
        if capacity > 0:
            free += (capacity - used.get(name, Decimal(0))) / capacity
    return (preferred_weight(pod, node), -len(untolerated(pod, node.taints, ("PreferNoSchedule",))), free)


def fit(pod: Obj, allocatable: dict[str, Any], bound: Iterable[Obj],
        allocated_devices: Optional[dict[str, set[int]]] = None,
        port_available: Optional[PortProbe] = None) -> Decision:
    """:func:`schedule` on one unlabelled node holding ``bound``."""
    node = NodeResources("", allocatable, bound=tuple(bound), allocated_devices=allocated_devices or {})
    return schedule(pod, [node], port_available)
