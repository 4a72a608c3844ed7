"""Which node a pod fits on, and if none, why: kube-scheduler's filter rules.

Pure functions over plain pod dicts and :class:`NodeResources` (what one node has and
what is already bound to it), so the rules (node selector, resources, fake devices, ports
treated like host ports across owners) can be tested without a server, and so the same
rules can serve one node today and a cluster-wide scheduler over several nodes later.
:mod:`.scheduling` acts on the decisions (binding, the Unschedulable condition).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Optional

from kubernetes.utils import parse_quantity

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


def pod_ports(pod: Obj) -> set[tuple[int, str]]:
    """Every declared (port, protocol): containerPorts are treated like hostPorts here."""
    ports: set[tuple[int, str]] = set()
    spec = pod.get("spec", {})
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for port in container.get("ports") or []:
            number = port.get("hostPort") or port.get("containerPort")
            if isinstance(number, int) and number > 0:
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


def wants_this_scheduler(pod: Obj) -> bool:
    return (pod.get("spec", {}).get("schedulerName") or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER


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


@dataclass(frozen=True)
class NodeResources:
    """One node as the scheduler sees it: what it offers and the pods already bound to it."""

    name: str
    allocatable: Mapping[str, Any]
    labels: Mapping[str, str] = field(default_factory=dict)
    bound: tuple[Obj, ...] = ()  # non-terminal pods bound to (or assumed on) the node
    # Device resource -> indices the node's running pods hold, e.g. {"nvidia.com/gpu": {0}}.
    allocated_devices: Mapping[str, set[int]] = field(default_factory=dict)

    def with_pod(self, pod: Obj) -> "NodeResources":
        """The node once ``pod`` is bound to it (later pods of the same pass see it)."""
        return NodeResources(self.name, self.allocatable, self.labels, self.bound + (pod,), self.allocated_devices)


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

    problems: list[_Problem] = []
    selector = pod.get("spec", {}).get("nodeSelector") or {}
    if any(node.labels.get(key) != value for key, value in selector.items()):
        problems.append(_Problem(NODE_SELECTOR_PROBLEM))
    wanted = pod_requests(pod)
    if len(bound) + 1 > capacity.get("pods", Decimal(110)):
        problems.append(_Problem("Too many pods"))
    for name in sorted(wanted):
        amount = wanted[name]
        if amount <= 0 or name in _IGNORED_RESOURCES:
            continue
        if amount + used.get(name, Decimal(0)) > capacity.get(name, Decimal(0)):
            problems.append(_Problem(f"Insufficient {name}"))

    mine = owner_key(pod)
    held: dict[tuple[int, str], Obj] = {}
    shared: set[tuple[int, str]] = set()
    for other in bound:
        if owner_key(other) != mine:
            for taken in pod_ports(other):
                held.setdefault(taken, other)
        else:
            shared |= pod_ports(other)
    for port, protocol in sorted(pod_ports(pod)):
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
    for node in nodes:
        problems = _node_problems(pod, node, port_available)
        if not problems:
            return Decision(True, devices=_devices_for(pod, node), node_name=node.name)
        for problem in problems:
            if problem.counted:
                counts[problem.text] = counts.get(problem.text, 0) + 1
            elif problem.text not in named:
                named.append(problem.text)
    reasons = sorted(f"{count} {text}" for text, count in counts.items()) + named  # sorted, as kube-scheduler
    return Decision(False, f"0/{len(nodes)} nodes are available: {', '.join(reasons)}.")


def fit(pod: Obj, allocatable: dict[str, Any], bound: Iterable[Obj],
        allocated_devices: Optional[dict[str, set[int]]] = None,
        port_available: Optional[PortProbe] = None) -> Decision:
    """:func:`schedule` on one unlabelled node holding ``bound``."""
    node = NodeResources("", allocatable, bound=tuple(bound), allocated_devices=allocated_devices or {})
    return schedule(pod, [node], port_available)
