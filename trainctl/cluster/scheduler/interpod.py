"""Inter-pod affinity and anti-affinity: kube-scheduler's ``InterPodAffinity`` filter and score.

A pod's terms name other pods (a label selector over some namespaces) and a topology key (a
node label: ``kubernetes.io/hostname`` is one node, ``topology.kubernetes.io/zone`` a zone).
As in kube-scheduler, the work per pending pod is done once, before any node is looked at
(:func:`prepare`): the placed pods are counted per topology domain, ``(key, value)``, so judging
a node is a few dictionary lookups. Three counts decide the filter, in kube-scheduler's order:

- required affinity: the node's domain holds a pod matching *all* the pod's terms (or no such
  pod exists anywhere and the pod matches its own terms: the first of a group that wants to
  be together); a node without the topology key never fits;
- required anti-affinity: no pod matching a term in the node's domain;
- the placed pods' required anti-affinity: no placed pod whose term matches this pod has the
  node in its domain.

The score adds, per domain, the weights of the pod's preferred terms matched by placed pods
(anti-affinity subtracts), and the placed pods' preferred terms (and, with weight 1, their
required affinity terms) matched by this pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from trainctl.cluster.scheduler.assigned import AssignedPods, Placed, pod_affinity
from trainctl.cluster.scheduler.labels import selector_matches, with_label_keys

Obj = dict[str, Any]
Domain = tuple[str, str]  # (topology key, value)

AFFINITY_PROBLEM = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_PROBLEM = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_PROBLEM = "node(s) didn't satisfy existing pods anti-affinity rules"
HARD_AFFINITY_WEIGHT = 1  # kube-scheduler's hardPodAffinityWeight: placed pods' required terms, when scoring


@dataclass(frozen=True)
class Term:
    """A PodAffinityTerm of one pod (its ``owner_namespace``), its selector already narrowed by
    ``matchLabelKeys``/``mismatchLabelKeys``."""

    selector: Optional[Obj]
    topology_key: str
    owner_namespace: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: Optional[Obj] = None
    weight: int = 1

    def reaches(self, namespace: str, assigned: AssignedPods) -> bool:
        """Does the term look at pods of ``namespace``? Its own namespace unless it lists some
        or has a ``namespaceSelector`` (``{}``: every namespace)."""
        if not self.namespaces and self.namespace_selector is None:
            return namespace == self.owner_namespace
        return namespace in self.namespaces or (
            self.namespace_selector is not None
            and selector_matches(self.namespace_selector, assigned.namespace_labels_of(namespace)))

    def matches(self, pod: Obj, assigned: AssignedPods) -> bool:
        meta = pod.get("metadata") or {}
        return (self.reaches(meta.get("namespace") or "default", assigned)
                and selector_matches(self.selector, meta.get("labels") or {}))


def _term(raw: Any, owner: Obj, weight: int = 1) -> Optional[Term]:
    if not isinstance(raw, dict) or not raw.get("topologyKey"):
        return None  # the API server rejects these; a scheduler must not crash on one
    meta = owner.get("metadata") or {}
    selector = with_label_keys(raw.get("labelSelector"), meta.get("labels") or {},
                               raw.get("matchLabelKeys"), raw.get("mismatchLabelKeys"))
    return Term(selector, str(raw["topologyKey"]), meta.get("namespace") or "default",
                frozenset(str(n) for n in raw.get("namespaces") or []), raw.get("namespaceSelector"), weight)


def required_terms(pod: Obj, kind: str) -> list[Term]:
    """The pod's ``requiredDuringSchedulingIgnoredDuringExecution`` terms of ``kind``
    (``podAffinity`` or ``podAntiAffinity``)."""
    block = pod_affinity(pod).get(kind) or {}
    terms = (_term(raw, pod) for raw in block.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    return [t for t in terms if t is not None]


def preferred_terms(pod: Obj, kind: str) -> list[Term]:
    block = pod_affinity(pod).get(kind) or {}
    terms = (_term(w.get("podAffinityTerm"), pod, int(w.get("weight") or 0))
             for w in block.get("preferredDuringSchedulingIgnoredDuringExecution") or [] if isinstance(w, dict))
    return [t for t in terms if t is not None]


def _domain(term: Term, placed: Placed) -> Optional[Domain]:
    value = placed.node_labels.get(term.topology_key)
    return None if value is None else (term.topology_key, value)


def _candidates(terms: list[Term], assigned: AssignedPods) -> Iterator[Placed]:
    return assigned.in_namespaces(lambda ns: any(t.reaches(ns, assigned) for t in terms))


@dataclass
class InterPodState:
    """What :func:`prepare` counted for one pending pod."""

    affinity: list[Term] = field(default_factory=list)
    anti_affinity: list[Term] = field(default_factory=list)
    affinity_counts: Counter[Domain] = field(default_factory=Counter)
    anti_affinity_counts: Counter[Domain] = field(default_factory=Counter)
    existing_anti_affinity_counts: Counter[Domain] = field(default_factory=Counter)
    matches_own_affinity: bool = False
    scores: Counter[Domain] = field(default_factory=Counter)

    def problem(self, node_labels: Mapping[str, str]) -> Optional[tuple[str, bool]]:
        """Why a node with these labels does not fit, and whether it is unresolvable (no
        eviction would help: kube-scheduler's UnschedulableAndUnresolvable); None if it fits."""
        if self.affinity and not self._affinity_met(node_labels):
            return AFFINITY_PROBLEM, True
        for term in self.anti_affinity:
            value = node_labels.get(term.topology_key)
            if value is not None and self.anti_affinity_counts[(term.topology_key, value)] > 0:
                return ANTI_AFFINITY_PROBLEM, False
        if any(node_labels.get(key) == value for (key, value), n in self.existing_anti_affinity_counts.items() if n > 0):
            return EXISTING_ANTI_AFFINITY_PROBLEM, False
        return None

    def _affinity_met(self, node_labels: Mapping[str, str]) -> bool:
        found = True
        for term in self.affinity:
            value = node_labels.get(term.topology_key)
            if value is None:
                return False  # every topology key must be on the node
            found = found and self.affinity_counts[(term.topology_key, value)] > 0
        # Nothing matches anywhere yet: the first pod of a group that wants to be together.
        return found or (not self.affinity_counts and self.matches_own_affinity)

    def score(self, node_labels: Mapping[str, str]) -> int:
        return sum(weight for (key, value), weight in self.scores.items() if node_labels.get(key) == value)


def _their_terms(placed: Placed, assigned: AssignedPods) -> list[tuple[Term, int, int]]:
    """A placed pod's terms as (term, score it adds, whether it forbids), parsed once a pass."""
    key = ("interpod", id(placed.pod))
    terms = assigned.memo.get(key)
    if terms is None:
        pod = placed.pod
        terms = ([(t, 0, 1) for t in required_terms(pod, "podAntiAffinity")]
                 + [(t, HARD_AFFINITY_WEIGHT, 0) for t in required_terms(pod, "podAffinity")]
                 + [(t, t.weight, 0) for t in preferred_terms(pod, "podAffinity")]
                 + [(t, -t.weight, 0) for t in preferred_terms(pod, "podAntiAffinity")])
        assigned.memo[key] = terms
    return terms


def prepare(pod: Obj, assigned: AssignedPods) -> InterPodState:
    """Count, per topology domain, the placed pods the filter and the score ask about."""
    state = InterPodState(required_terms(pod, "podAffinity"), required_terms(pod, "podAntiAffinity"))
    if state.affinity:
        state.matches_own_affinity = all(t.matches(pod, assigned) for t in state.affinity)
        for placed in _candidates(state.affinity, assigned):
            if all(t.matches(placed.pod, assigned) for t in state.affinity):
                for term in state.affinity:
                    domain = _domain(term, placed)
                    if domain is not None:
                        state.affinity_counts[domain] += 1
    for term in state.anti_affinity:
        for placed in _candidates([term], assigned):
            domain = _domain(term, placed)
            if domain is not None and term.matches(placed.pod, assigned):
                state.anti_affinity_counts[domain] += 1

    preferred = [(t, 1) for t in preferred_terms(pod, "podAffinity")] + \
                [(t, -1) for t in preferred_terms(pod, "podAntiAffinity")]
    for term, sign in preferred:
        for placed in _candidates([term], assigned):
            domain = _domain(term, placed)
            if domain is not None and term.matches(placed.pod, assigned):
                state.scores[domain] += sign * term.weight

    for placed in assigned.with_terms:  # the placed pods' own terms, about this pod
        for term, score, forbids in _their_terms(placed, assigned):
            domain = _domain(term, placed)
            if domain is None or not term.matches(pod, assigned):
                continue
            state.existing_anti_affinity_counts[domain] += forbids
            state.scores[domain] += score
    return state
