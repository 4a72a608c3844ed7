"""What a container may use, and how its end is reported when it used too much.

The kubelet reads ``resources.limits`` of a container spec into :class:`ContainerLimits`
(the only two resources this machine can enforce: memory and CPU), and turns a container's
exit status plus the enforcer's OOM verdict into the ``terminated`` state fields Kubernetes
writes (``reason: OOMKilled``, exit code 137 for a SIGKILLed process).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping, Optional

from trainctl.api.quantity import parse_quantity

OOM_KILLED = "OOMKilled"


@dataclass(frozen=True)
class ContainerLimits:
    """``limits.memory`` in bytes and ``limits.cpu`` in millicores; None: unlimited."""

    memory_bytes: Optional[int] = None
    cpu_millicores: Optional[int] = None

    @classmethod
    def from_resources(cls, resources: Optional[Mapping[str, Any]]) -> "ContainerLimits":
        """From a container's ``resources`` (``{"limits": {"memory": "512Mi", "cpu": "500m"}}``).

        Raises ValueError for a quantity Kubernetes would reject.
        """
        limits = (resources or {}).get("limits") or {}
        memory = _parse(limits.get("memory"))
        cpu = _parse(limits.get("cpu"))
        return cls(memory_bytes=None if memory is None else int(memory.to_integral_value(rounding="ROUND_CEILING")),
                   cpu_millicores=None if cpu is None else max(1, int((cpu * 1000).to_integral_value(
                       rounding="ROUND_CEILING"))))


def _parse(value: Any) -> Optional[Decimal]:
    if value is None:
        return None
    amount = parse_quantity(value)
    if amount <= 0:
        raise ValueError(f"quantity {value!r} must be positive")
    return amount


def terminated_fields(exit_code: int, *, oom_killed: bool) -> dict[str, Any]:
    """``exitCode`` and ``reason`` of a container's ``state.terminated``.

    ``exit_code`` is the runtime's (128+n for a signal). An OOM kill is reported as a container
    runtime does: reason ``OOMKilled`` with the main process's status, which is 137 when the
    kernel (or the polling enforcer) killed it.
    """
    if oom_killed:
        return {"exitCode": exit_code, "reason": OOM_KILLED}
    return {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}
