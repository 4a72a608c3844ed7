"""Every pod already placed, with the labels of its node: what inter-pod affinity and topology
spreading count.

Built once per scheduling pass and grown as the pass binds pods, so a rule that looks across
nodes (how many matching pods a zone holds, which placed pods have anti-affinity terms) asks an
index instead of walking every node's pods for every pending pod: pods by namespace, and the
few pods that carry inter-pod terms of their own. Namespaces' labels are here too, for
``namespaceSelector``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True)
class Placed:
    """One placed pod and the labels of the node it is on."""

    pod: Obj
    node: str
    node_labels: Mapping[str, str]

    @property
    def namespace(self) -> str:
        return (self.pod.get("metadata") or {}).get("namespace") or "default"

    @property
    def labels(self) -> Mapping[str, str]:
        return (self.pod.get("metadata") or {}).get("labels") or {}


def pod_affinity(pod: Obj) -> Obj:
    """The pod's ``podAffinity`` and ``podAntiAffinity`` blocks (``{}`` when absent)."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    return {kind: affinity[kind] for kind in ("podAffinity", "podAntiAffinity") if affinity.get(kind)}


def placed_on(node: Any) -> tuple[dict[str, list[Placed]], list[Placed]]:
    """One node's pods, by namespace, and those with inter-pod terms: what it adds to
    :class:`AssignedPods` (a node view keeps it, so an unchanged node costs no walk)."""
    by_namespace: dict[str, list[Placed]] = {}
    with_terms: list[Placed] = []
    for pod in node.bound:
        placed = Placed(pod, node.name, node.labels)
        by_namespace.setdefault(placed.namespace, []).append(placed)
        if pod_affinity(pod):
            with_terms.append(placed)
    return by_namespace, with_terms


@dataclass
class AssignedPods:
    """The cluster's placed pods, indexed for the rules that look across nodes."""

    node_labels: dict[str, Mapping[str, str]] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    by_namespace: dict[str, list[Placed]] = field(default_factory=dict)
    with_terms: list[Placed] = field(default_factory=list)  # pods with podAffinity/podAntiAffinity
    # What the rules derive from one placed pod (its parsed terms), kept for the whole pass.
    memo: dict[Any, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Iterable[Any], namespace_labels: Mapping[str, Mapping[str, str]] = {}) -> "AssignedPods":
        """From node views (anything with ``name``, ``labels`` and ``bound`` pods; a view
        that also has ``placed``, :func:`placed_on` kept with it, is not gone through again)."""
        assigned = cls(namespace_labels=namespace_labels)
        for node in nodes:
            assigned.node_labels[node.name] = node.labels
        for node in nodes:
            by_namespace, with_terms = node.placed if hasattr(node, "placed") else placed_on(node)
            for namespace, placed in by_namespace.items():
                assigned.by_namespace.setdefault(namespace, []).extend(placed)
            assigned.with_terms.extend(with_terms)
        return assigned

    def add(self, pod: Obj, node: str) -> None:
        """``pod`` is now on ``node`` (a node the pass does not know is skipped, as its labels are)."""
        labels = self.node_labels.get(node)
        if labels is None:
            return
        placed = Placed(pod, node, labels)
        self.by_namespace.setdefault(placed.namespace, []).append(placed)
        if pod_affinity(pod):
            self.with_terms.append(placed)

    def in_namespaces(self, reaches: Callable[[str], bool]) -> Iterator[Placed]:
        """The placed pods of every namespace ``reaches`` accepts."""
        for namespace in sorted(self.by_namespace):
            if reaches(namespace):
                yield from self.by_namespace[namespace]

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str]:
        return self.namespace_labels.get(namespace) or {"kubernetes.io/metadata.name": namespace}

