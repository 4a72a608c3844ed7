"""What the scheduler, the kubelet and the control plane all read off pods and nodes.

Where a pod stands (its phase, whether it has finished), what it asks for when a quantity is
malformed, and the names of the devices and labels both sides agree on. Kept here, below
both components, so the kubelet imports no scheduler module but the fit rules its admission
reuses (as a real kubelet's admission runs the scheduler's predicates).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from trainctl.api.quantity import parse_quantity

Obj = dict[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"
NPU_RESOURCE = "huawei.com/Ascend910"
DEVICE_RESOURCES = (GPU_RESOURCE, NPU_RESOURCE)
# A node served by the hollow-node process (trainctl/cluster/kubelet/hollow.py): a machine of
# its own, whose ports are its own, as on a real cluster.
HOLLOW_NODE_LABEL = "trainctl.io/hollow-node"


def metadata(obj: Obj) -> Obj:
    """An object's metadata, or an empty one when it has none (a malformed or partial object)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def int_annotation(obj: Obj, key: str) -> int:
    """An annotation holding an integer (a revision, a deletion cost); 0 when absent or not one."""
    try:
        return int(str((metadata(obj).get("annotations") or {}).get(key, "0")))
    except ValueError:
        return 0


def phase(pod: Obj) -> Any:
    status = pod.get("status")
    return status.get("phase") if isinstance(status, dict) else None


def is_terminal(pod: Obj) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def quantity_or_zero(value: Any) -> Decimal:
    """A quantity's value ("500m", "1Gi", 2); zero when malformed: the API server refuses such
    a pod, so one that got past it anyway asks for, or offers, nothing."""
    try:
        return parse_quantity(value)
    except ValueError:
        return Decimal(0)
