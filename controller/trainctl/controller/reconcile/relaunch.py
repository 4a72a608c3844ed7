"""The out-of-memory relaunch in a pass: which OOMKilled replicas come back with more memory.

``oom`` holds the policy and the memory arithmetic (the controller's flags parse with it
too); these are the steps of a pass that apply it (a trainctl extension,
docs/compatibility.md): finding the OOMKilled replicas, deleting one to relaunch it, and
giving its replacement the memory ``status.oomMemory`` recorded for it.
"""

from __future__ import annotations

from typing import Any

from trainctl.controller.reconcile import oom
from trainctl.controller.reconcile.children import is_terminating, node_of
from trainctl.controller.reconcile.plan import Event
from trainctl.controller.reconcile.state import Pass


def find_oom_killed(p: Pass) -> None:
    """Which OOMKilled replicas get more memory; which are at their ceiling already (the
    maximum, or the most memory any node can give)."""
    policy, problems = oom.policy(p.annotations, p.config.oom_memory_factor, p.config.oom_memory_max)
    p.problems.extend(Event("Warning", "InvalidOOMMemory", problem) for problem in problems)
    found = p.oom = oom.Relaunches(memory=dict(p.old_status.get("oomMemory") or {}))
    if policy is None:
        return
    container = p.framework.container
    for rtype in p.types:
        duplicated = p.pods.duplicated(rtype)
        for index, pod in p.pods.slots(rtype).items():
            if index in duplicated or p.is_lost(pod):
                continue
            if not oom.oom_killed(pod, container):
                _refused_at_the_top(p, policy, rtype, index, pod)
                continue
            limit = oom.memory_limit(pod.get("spec") or {}, container)
            if limit is None:
                continue  # no memory limit: nothing to grow
            grown = oom.grown(limit, policy, p.observed.node_memory)
            uid = pod["metadata"].get("uid", "")
            if grown > limit and is_terminating(pod):
                found.replacing.add(uid)
            elif grown > limit:
                found.relaunch[uid] = (rtype, index, limit, grown)
            elif not is_terminating(pod):
                key = f"{rtype}-{index}"
                at_ceiling = oom.no_room(key, limit, policy, p.observed.node_memory)
                found.at_max.append(at_ceiling)
                relaunched = oom.climbed_to(found.memory.get(key), limit)
                if relaunched and p.specs[rtype].restart_policy != "Never":  # Never: the pod's failure ends the job
                    found.cannot_fit.append(oom.cannot_fit(at_ceiling, relaunched))


def _refused_at_the_top(p: Pass, policy: oom.Policy, rtype: str, index: int, pod: dict[str, Any]) -> None:
    """A replica at the top of its climbed ladder whose allocation was refused (it exited for
    want of memory without an OOM kill) can never fit either."""
    code = oom.memory_failure(pod, p.framework.container)
    limit = oom.memory_limit(pod.get("spec") or {}, p.framework.container)
    if code is None or limit is None or is_terminating(pod) or p.specs[rtype].restart_policy == "Never":
        return
    key = f"{rtype}-{index}"
    relaunched = oom.climbed_to(p.oom.memory.get(key), limit)
    if relaunched and oom.grown(limit, policy, p.observed.node_memory) <= limit:
        how = f"ran out of memory (exit code {code}, not OOMKilled)"
        p.oom.cannot_fit.append(oom.cannot_fit(oom.no_room(key, limit, policy, p.observed.node_memory, how),
                                               relaunched))


def relaunch_oom_killed(p: Pass, rtype: str, pod: dict[str, Any]) -> bool:
    """Replace an OOMKilled pod; its replacement gets the grown limit from the status."""
    decided = p.oom.relaunch.get((pod.get("metadata") or {}).get("uid", ""))
    if decided is None:
        return False
    _, index, limit, grown = decided
    key, previous, memory = f"{rtype}-{index}", oom.format_memory(limit), oom.format_memory(grown)
    recorded = p.oom.memory.get(key) or {}
    relaunches = int(recorded.get("relaunches") or 0)
    if (recorded.get("memory"), recorded.get("previous")) != (memory, previous):
        relaunches += 1  # else this kill was counted in a pass whose delete is not seen yet
    p.oom.memory[key] = {"memory": memory, "previous": previous, "relaunches": relaunches}
    name = pod["metadata"].get("name", "")
    cause = f"to be recreated with memory {memory}: OOMKilled at {previous} on node {node_of(pod)}"
    p.delete(pod, with_service=False, cause=cause, grace_seconds=oom.RELAUNCH_GRACE_SECONDS)
    p.plan.events.append(Event(
        "Normal", "OOMMemoryIncreased",
        f"Pod {name} was OOMKilled with memory limit {previous}: replica {key} is relaunched with {memory}",
    ))
    return True


def with_grown_memory(p: Pass, rtype: str, index: int, pod: dict[str, Any]) -> dict[str, Any]:
    """A new replica pod with the memory its relaunches grew to, if any."""
    grown = p.oom.memory.get(f"{rtype}-{index}")
    if grown and grown.get("memory"):
        return oom.with_memory(pod, p.framework.container, grown["memory"], grown.get("previous") or "")
    return pod


def record(p: Pass) -> None:
    """Keep the memory of every relaunched replica in the status."""
    if p.oom.memory:
        p.status["oomMemory"] = p.oom.memory
