"""Does a pod fit on the one node, and if not, why: the single-node kube-scheduler.

Pure functions over plain pod dicts, so the rules (resources, fake devices, ports treated
like host ports across owners) can be tested without a server. The kubelet calls
:func:`fit` for each pending pod in creation order and binds the ones that fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
import socket
from collections.abc import Callable, Iterable
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


def is_terminal(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


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


@dataclass
class Decision:
    """The outcome for one pod: bound (with its devices) or left Pending with a message."""

    fits: bool
    message: str = ""
    # resource name -> device indices for the whole pod, e.g. {"nvidia.com/gpu": [0, 1]}.
    devices: dict[str, list[int]] = field(default_factory=dict)


def fit(pod: Obj, allocatable: dict[str, Any], bound: Iterable[Obj],
        allocated_devices: Optional[dict[str, set[int]]] = None,
        port_available: Optional[Callable[[int, str], bool]] = None) -> Decision:
    """Decide whether ``pod`` fits next to ``bound`` (non-terminal pods already on the node).

    ``allocated_devices`` maps a device resource to the indices other pods hold;
    ``port_available(port, protocol)`` says whether the machine has the port free, for ports
    no pod of the same owner holds yet (another cluster or any other program may use it).
    """
    bound = [p for p in bound if not is_terminal(p)]
    capacity = {name: quantity(value) for name, value in allocatable.items()}
    used: dict[str, Decimal] = {}
    for other in bound:
        for name, amount in pod_requests(other).items():
            used[name] = used.get(name, Decimal(0)) + amount

    problems: list[str] = []
    wanted = pod_requests(pod)
    if len(bound) + 1 > capacity.get("pods", Decimal(110)):
        problems.append("1 Too many pods")
    for name in sorted(wanted):
        amount = wanted[name]
        if amount <= 0 or name in _IGNORED_RESOURCES:
            continue
        if amount + used.get(name, Decimal(0)) > capacity.get(name, Decimal(0)):
            problems.append(f"1 Insufficient {name}")

    mine = owner_key(pod)
    held: dict[tuple[int, str], Obj] = {}
    shared: set[tuple[int, str]] = set()
    for other in bound:
        if owner_key(other) != mine:
            for port in pod_ports(other):
                held.setdefault(port, other)
        else:
            shared |= pod_ports(other)
    for port, protocol in sorted(pod_ports(pod)):
        holder = held.get((port, protocol))
        suffix = "" if protocol == "TCP" else f"/{protocol}"
        if holder is not None:
            problems.append(f"port {port}{suffix} is in use by pod {pod_ref(holder)}")
        elif (port, protocol) not in shared and port_available is not None and not port_available(port, protocol):
            problems.append(f"port {port}{suffix} {MACHINE_PORT_PROBLEM}")

    if problems:
        return Decision(False, f"0/1 nodes are available: {', '.join(problems)}.")

    devices: dict[str, list[int]] = {}
    taken = allocated_devices or {}
    for name in DEVICE_RESOURCES:
        count = int(wanted.get(name, 0))
        if count > 0:
            free = [i for i in range(int(capacity.get(name, 0))) if i not in taken.get(name, set())]
            devices[name] = free[:count]
    return Decision(True, devices=devices)
