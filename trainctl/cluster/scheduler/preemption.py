"""Preemption, as kube-scheduler's DefaultPreemption PostFilter decides it: which lower-priority
pods to take off which node so that a pod that fits nowhere fits, and the ``preemption:``
half of the FailedScheduling message when none can.

Pure: a pod, each node's bound pods (and the pods nominated there, which the caller counts as
bound) with a way to ask whether the pod would fit among some of them (the caller's filter
rules), and the PodDisruptionBudgets; no I/O. :mod:`.binding` acts on the :class:`Candidate` (nominates, deletes victims).

Per node, as kube's ``SelectVictimsOnNode``: take away every pod of lower priority (those
already terminating are gone soon and are no victims) and check the pod fits; then give back the lower-priority pods,
most important first (priority, then the earliest started), those whose eviction a budget
would forbid before the others, keeping each one the pod still fits beside. What is not given
back are the victims. Among the nodes, as ``pickOneNodeForPreemption``: fewest budget
violations, then the lowest highest-victim priority, the smallest sum of priorities, the
fewest victims, then the first node.

A pod with ``preemptionPolicy: Never``, or nominated to a node where a lower-priority pod is
still terminating (its earlier preemption is under way), does not preempt.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from trainctl.cluster.disruption_budgets import covers

Obj = dict[str, Any]

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "preemption: not eligible due to preemptionPolicy=Never."
TERMINATING = "preemption: not eligible due to a terminating pod on the nominated node."
# (pods staying on the node) -> why the pod does not fit among them ([] when it fits)
Problems = Callable[[list[Obj]], list[str]]


def _part(pod: Obj, key: str) -> Obj:
    """``pod[key]`` when it is an object: a malformed stored pod must not stop the scheduler."""
    value = pod.get(key)
    return value if isinstance(value, dict) else {}


def priority(pod: Obj) -> int:
    value = _part(pod, "spec").get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def is_terminating(pod: Obj) -> bool:
    return bool(_part(pod, "metadata").get("deletionTimestamp"))


def nominated_node(pod: Obj) -> str:
    value = _part(pod, "status").get("nominatedNodeName")
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class NodeCase:
    """One node the pod fits nowhere on, as preemption weighs it."""

    name: str
    bound: Sequence[Obj]  # the live pods bound to it
    unresolvable: bool  # failed a rule no eviction changes
    problems: Problems


@dataclass(frozen=True)
class Candidate:
    """A node and the pods to take off it."""

    node: str
    victims: tuple[Obj, ...]
    pdb_violations: int = 0

    def order(self) -> tuple[int, float, int, int]:
        priorities = [priority(v) for v in self.victims]
        return (self.pdb_violations, max(priorities) if priorities else float("-inf"), sum(priorities),
                len(self.victims))


@dataclass(frozen=True)
class Preemption:
    """The PostFilter's outcome: a candidate, or the ``preemption:`` message saying why none."""

    candidate: Optional[Candidate]
    message: str = ""


def _importance(pod: Obj) -> tuple[int, str]:
    """Sort key, most important first: higher priority, then started earlier (kube's MoreImportantPod)."""
    status = pod.get("status") or {}
    return -priority(pod), str(status.get("startTime") or (pod.get("metadata") or {}).get("creationTimestamp") or "~")


def _split_by_budgets(pods: list[Obj], budgets: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
    """(pods whose eviction a budget forbids, the others), counting each eviction against the
    budgets' ``disruptionsAllowed`` in turn, as kube's filterPodsWithPDBViolation."""
    allowed = [int((b.get("status") or {}).get("disruptionsAllowed") or 0) for b in budgets]
    violating: list[Obj] = []
    others: list[Obj] = []
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name")
        violates = False
        for index, budget in enumerate(budgets):
            if not covers(budget, pod) or name in ((budget.get("status") or {}).get("disruptedPods") or {}):
                continue
            allowed[index] -= 1
            violates |= allowed[index] < 0
        (violating if violates else others).append(pod)
    return violating, others


def select_victims(pod: Obj, case: NodeCase, budgets: Sequence[Obj] = ()) -> Candidate | list[str]:
    """The fewest lower-priority pods to take off ``case``'s node, or why the pod would not
    fit there even without them."""
    mine = priority(pod)
    lower = [p for p in case.bound if priority(p) < mine]
    if not lower:
        return [NO_VICTIMS]
    staying = [p for p in case.bound if priority(p) >= mine]
    problems = case.problems(staying)
    if problems:
        return problems
    potential = sorted((p for p in lower if not is_terminating(p)), key=_importance)
    violating, others = _split_by_budgets(potential, budgets)
    victims: list[Obj] = []
    violations = 0
    for group, breaks_budget in ((violating, True), (others, False)):
        for candidate in group:
            if not case.problems(staying + [candidate]):
                staying.append(candidate)  # reprieved
            else:
                victims.append(candidate)
                violations += breaks_budget
    return Candidate(case.name, tuple(victims), violations)


def post_filter(pod: Obj, cases: Sequence[NodeCase], budgets: Sequence[Obj] = ()) -> Preemption:
    """Where ``pod`` (which fits on none of ``cases``) may go by preempting, or why nowhere."""
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return Preemption(None, NEVER)
    nominated = nominated_node(pod)
    mine = priority(pod)
    for case in cases:
        if case.name == nominated and any(is_terminating(p) and priority(p) < mine for p in case.bound):
            return Preemption(None, TERMINATING)
    found: list[Candidate] = []
    counts: Counter[str] = Counter()
    for case in cases:
        outcome = [NOT_HELPFUL] if case.unresolvable else select_victims(pod, case, budgets)
        if isinstance(outcome, Candidate):
            found.append(outcome)
        else:
            counts.update(dict.fromkeys(outcome, 1))
    if found:
        return Preemption(min(found, key=Candidate.order))  # min keeps the first of equals
    reasons = sorted(f"{count} {text}" for text, count in counts.items())
    return Preemption(None, f"preemption: 0/{len(cases)} nodes are available: {', '.join(reasons)}.")

