"""Which accelerators a pod template asks for, read from its resource requests and limits.

Both launchers (torchrun, msrun) start one process per device, so the controller needs the
per-pod device count to size ``WORLD_SIZE`` and ``MS_WORKER_NUM``. Device plugins name their
resources differently: NVIDIA registers ``nvidia.com/gpu``; Huawei's plugins and HAMi register
``huawei.com/Ascend910``, ``huawei.com/Ascend910B3``, ``huawei.com/Ascend310P`` … and
``huawei.com/npu``. Companion resources that measure a share of a device (``-memory``,
``-core``, ``npu-core``) are not devices and are not counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from trainctl.api import constants as c

# Ascend virtual-NPU slices (``huawei.com/Ascend910-4c``): one device each, but the chip ids
# are chosen by the runtime, so no ``ASCEND_VISIBLE_DEVICES`` annotation is read for them.
_VIRTUAL_SLICE = re.compile(r"-\d+c$")
_SHARE_SUFFIXES = ("-memory", "-core", "-mem")


@dataclass(frozen=True)
class Accelerator:
    """The devices one container asks for: the resource name and how many."""

    resource: str
    count: int

    @property
    def is_ascend(self) -> bool:
        return is_ascend_resource(self.resource)

    @property
    def is_virtual(self) -> bool:
        return bool(_VIRTUAL_SLICE.search(self.resource))


def is_ascend_resource(name: str) -> bool:
    if name == c.RESOURCE_HUAWEI_NPU:
        return True
    return name.startswith(c.RESOURCE_ASCEND_PREFIX) and not name.endswith(_SHARE_SUFFIXES)


def is_device_resource(name: str) -> bool:
    return name == c.RESOURCE_NVIDIA_GPU or is_ascend_resource(name)


def _count(quantity: Any) -> Optional[int]:
    """Whole devices in a quantity (``2``, ``"2"``); anything else is not a device count."""
    if isinstance(quantity, bool):
        return None
    if isinstance(quantity, int):
        return quantity
    if isinstance(quantity, str) and quantity.isdigit():
        return int(quantity)
    return None


def container_accelerator(container: dict[str, Any]) -> Optional[Accelerator]:
    """The container's device resource with the largest count (limits, else requests)."""
    resources = container.get("resources") or {}
    best: Optional[Accelerator] = None
    for section in ("limits", "requests"):
        for name, quantity in (resources.get(section) or {}).items():
            if not is_device_resource(name):
                continue
            count = _count(quantity)
            if count and (best is None or count > best.count):
                best = Accelerator(name, count)
        if best is not None:
            return best
    return None


def devices_per_pod(container: Optional[dict[str, Any]]) -> int:
    """Devices the framework container declares, 0 for a CPU pod."""
    if not container:
        return 0
    accelerator = container_accelerator(container)
    return accelerator.count if accelerator else 0


def ascend_visible_devices_env(container: dict[str, Any]) -> Optional[dict[str, Any]]:
    """``ASCEND_VISIBLE_DEVICES`` from the pod annotation Volcano's Ascend plugin writes.

    The annotation key is the requested resource name; the Ascend Docker Runtime then mounts
    exactly those chips. Virtual slices are assigned by the runtime and get nothing.
    """
    accelerator = container_accelerator(container)
    if accelerator is None or not accelerator.is_ascend or accelerator.is_virtual:
        return None
    return {
        "name": "ASCEND_VISIBLE_DEVICES",
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{accelerator.resource}']"}},
    }
