"""``topologySpreadConstraints``: kube-scheduler's ``PodTopologySpread`` filter and score.

A constraint counts the pods its selector matches in the pod's own namespace (terminating pods
left out) per domain of its topology key, over the nodes it includes: nodes that carry every
key the pod's constraints name, that match the pod's node selector and required node affinity
(``nodeAffinityPolicy: Honor``, the default) and, with ``nodeTaintsPolicy: Honor`` (the default
is ``Ignore``), whose NoSchedule/NoExecute taints the pod tolerates.

- ``whenUnsatisfiable: DoNotSchedule`` filters: placing the pod on a node must leave its domain
  at most ``maxSkew`` above the least populated domain (``count + self - min <= maxSkew``, where
  ``self`` is 1 when the pod matches its own selector); the minimum is 0 while there are fewer
  domains than ``minDomains``. A node without the key does not fit at all.
- ``ScheduleAnyway`` scores: fewer matching pods in the node's domain is better, each
  constraint weighted by the log of its number of domains among the feasible nodes, as
  kube-scheduler does; a node without every key scores worst.

``matchLabelKeys`` narrows the selector by the pod's own values of those labels.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from trainctl.cluster.scheduler.assigned import AssignedPods
from trainctl.cluster.scheduler.labels import selector_matches, with_label_keys

Obj = dict[str, Any]

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"
HOSTNAME = "kubernetes.io/hostname"
SPREAD_PROBLEM = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL_PROBLEM = f"{SPREAD_PROBLEM} (missing required label)"


class SpreadNode(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


NodeTest = Callable[[Any], bool]  # a node -> does the pod's node selection (or toleration) accept it


@dataclass(frozen=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: Optional[Obj]
    min_domains: int = 0
    honor_node_affinity: bool = True
    honor_taints: bool = False


def constraints(pod: Obj, when_unsatisfiable: str) -> list[Constraint]:
    """The pod's constraints with this ``whenUnsatisfiable``."""
    meta = pod.get("metadata") or {}
    found = []
    for raw in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
        if not isinstance(raw, dict) or not raw.get("topologyKey") or raw.get("whenUnsatisfiable") != when_unsatisfiable:
            continue
        selector = with_label_keys(raw.get("labelSelector"), meta.get("labels") or {}, raw.get("matchLabelKeys"))
        found.append(Constraint(max(int(raw.get("maxSkew") or 1), 1), str(raw["topologyKey"]), selector,
                                int(raw.get("minDomains") or 0), (raw.get("nodeAffinityPolicy") or HONOR) == HONOR,
                                (raw.get("nodeTaintsPolicy") or IGNORE) == HONOR))
    return found


def _counts(pod: Obj, found: Sequence[Constraint], nodes: Sequence[SpreadNode], assigned: AssignedPods,
            selected: NodeTest, tolerated: NodeTest) -> list[Counter[str]]:
    """Per constraint: every domain of the nodes it includes, with its count of matching pods."""
    counts: list[Counter[str]] = [Counter() for _ in found]
    included: list[set[str]] = [set() for _ in found]
    keys = [c.topology_key for c in found]
    for node in nodes:
        if not all(key in node.labels for key in keys):
            continue
        for i, constraint in enumerate(found):
            if (constraint.honor_node_affinity and not selected(node)) or (constraint.honor_taints and not tolerated(node)):
                continue
            included[i].add(node.name)
            counts[i][node.labels[constraint.topology_key]] += 0  # a domain, even empty
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    for placed in assigned.by_namespace.get(namespace, ()):
        if (placed.pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        for i, constraint in enumerate(found):
            if placed.node in included[i] and selector_matches(constraint.selector, placed.labels):
                counts[i][placed.node_labels[constraint.topology_key]] += 1
    return counts


@dataclass
class SpreadFilter:
    """The DoNotSchedule constraints of one pending pod, counted once for all nodes."""

    pod_labels: Mapping[str, str] = field(default_factory=dict)
    found: list[Constraint] = field(default_factory=list)
    counts: list[Counter[str]] = field(default_factory=list)

    def problem(self, node_labels: Mapping[str, str]) -> Optional[tuple[str, bool]]:
        """Why a node with these labels does not fit, and whether that is unresolvable."""
        for constraint, counts in zip(self.found, self.counts, strict=True):
            if constraint.topology_key not in node_labels:
                return MISSING_LABEL_PROBLEM, True
            minimum = min(counts.values(), default=sys.maxsize)
            if len(counts) < constraint.min_domains:
                minimum = 0
            own = 1 if selector_matches(constraint.selector, self.pod_labels) else 0
            if counts[node_labels[constraint.topology_key]] + own - minimum > constraint.max_skew:
                return SPREAD_PROBLEM, False
        return None


def prepare_filter(pod: Obj, nodes: Sequence[SpreadNode], assigned: AssignedPods,
                   selected: NodeTest, tolerated: NodeTest) -> SpreadFilter:
    found = constraints(pod, DO_NOT_SCHEDULE)
    if not found:
        return SpreadFilter()
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return SpreadFilter(labels, found, _counts(pod, found, nodes, assigned, selected, tolerated))


def penalties(pod: Obj, feasible: Sequence[SpreadNode], nodes: Sequence[SpreadNode], assigned: AssignedPods,
              selected: NodeTest, tolerated: NodeTest) -> dict[str, float]:
    """Node name -> how much placing the pod there adds to its ScheduleAnyway skew (lower is
    better; ``inf`` for a node without every topology key); ``{}`` without such constraints."""
    found = constraints(pod, SCHEDULE_ANYWAY)
    if not found:
        return {}
    counts = _counts(pod, found, nodes, assigned, selected, tolerated)
    scored = [n for n in feasible if all(c.topology_key in n.labels for c in found)]
    weights = []
    for constraint in found:
        if constraint.topology_key == HOSTNAME:
            size = len(scored)
        else:
            size = len({n.labels[constraint.topology_key] for n in scored})
        weights.append(math.log(size + 2))
    result = {node.name: math.inf for node in feasible}
    for node in scored:
        result[node.name] = sum(counts[i][node.labels[c.topology_key]] * weights[i] + (c.max_skew - 1)
                                for i, c in enumerate(found))
    return result
