"""The ``preemption:`` half of a FailedScheduling message, as kube-scheduler's PostFilter writes it.

kube-scheduler tries to make room for a pod that fits nowhere by evicting pods of lower
priority. This scheduler does not evict; it says, per node, what preemption would have found:

- ``Preemption is not helpful for scheduling``: the node failed a rule no eviction changes
  (cordon, taints, node affinity, pod affinity, a missing topology label, an unimplemented field);
- ``No preemption victims found for incoming pod``: no pod of lower priority is on the node;
- otherwise lower-priority pods are there, and kube-scheduler would evict them: that is the
  part not implemented, and the message names ``spec.priority``.

A pod with ``preemptionPolicy: Never`` is ``not eligible``, in kube-scheduler's words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

Obj = dict[str, Any]

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_IMPLEMENTED = "Preemption of lower-priority pods (spec.priority) is not implemented by this scheduler"


def priority(pod: Obj) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def preemption_message(pod: Obj, nodes: Iterable[tuple[Iterable[Obj], bool]]) -> str:
    """``nodes``: each node's bound pods and whether its problem is unresolvable."""
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return "preemption: not eligible due to preemptionPolicy=Never."
    mine = priority(pod)
    counts: Counter[str] = Counter()
    total = 0
    for bound, unresolvable in nodes:
        total += 1
        if unresolvable:
            counts[NOT_HELPFUL] += 1
        elif any(priority(other) < mine for other in bound):
            counts[NOT_IMPLEMENTED] += 1
        else:
            counts[NO_VICTIMS] += 1
    reasons = sorted(f"{count} {text}" for text, count in counts.items())
    return f"preemption: 0/{total} nodes are available: {', '.join(reasons)}."
