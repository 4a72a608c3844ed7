"""The node check in a pass: which pods check together, and what their reports lead to.

``node_check`` holds the check's settings, its init container and the reading of reports;
these are the steps of a pass that use them. Pods created together check together (the
ranks of every pod that has not passed, meeting at the lowest); a pod whose check failed is
neither up nor failed, but replaced: its node tainted ``trainctl.io/unhealthy`` when the
reports blame it (a Warning ``NodeCheckFailed`` or ``StragglerDetected`` naming the node and
its times), else simply checked again. An elastic job replaces that pod alone; a static
job's ranks cannot take a new member, so all its pods are recreated and checked again. Every
pod's outcome is kept in ``status.nodeCheck`` by node and pod, and announced once
(``NodeCheckPassed``).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from trainctl.api import kinds
from trainctl.controller.reconcile import node_check
from trainctl.controller.reconcile.children import is_terminating, node_of, replica_name, rfc3339
from trainctl.controller.reconcile.node_check import Checked, Checks, Report
from trainctl.controller.reconcile.plan import Event, NodeTaint
from trainctl.controller.reconcile.state import Pass


def find_reports(p: Pass) -> None:
    """Read the job's check settings and every pod's report."""
    config = p.config
    settings, problems = node_check.settings(
        p.annotations, default=config.node_check, straggler_factor=config.node_check_straggler_factor,
        join_timeout=config.node_check_join_timeout, pair_timeout=config.node_check_pair_timeout,
    )
    p.problems.extend(Event("Warning", "InvalidNodeCheck", problem) for problem in problems)
    if p.framework.kind != kinds.PYTORCHJOB.kind:
        settings = None  # the probe runs on torch, which a MindSpore image need not have
    checks = p.node_check = Checks(settings=settings)
    if settings is None:
        return
    # Pods that passed and were deleted with a static job's restart for another's failed
    # check: while they terminate they are not failed replicas either.
    checks.handled.update(entry.get("podUID", "") for pods in (p.old_status.get("nodeCheck") or {}).values()
                          for entry in pods.values() if entry.get("replaced"))
    for rtype in p.types:
        checks.offsets[rtype] = checks.ranks
        checks.ranks += p.specs[rtype].replicas or 0
    for rtype in p.types:
        duplicated = p.pods.duplicated(rtype)
        for index, pod in p.pods.slots(rtype).items():
            rank = checks.offsets[rtype] + index
            live = not is_terminating(pod) and not p.is_lost(pod)
            if live:
                checks.live.add(rank)
            report = node_check.report_of(pod)
            if index in duplicated or report is None:
                continue
            checks.by_rank[rank] = Checked(pod["metadata"].get("name", ""), node_of(pod), report, live)
            checks.pods[rank] = pod
            if report.verdict != node_check.PASSED:
                checks.handled.add(pod["metadata"].get("uid", ""))


def container_factory(p: Pass, rtype: str) -> Optional[Callable[[dict[str, Any], int], dict[str, Any]]]:
    """The check's init container for a new pod of ``rtype`` (from its main container), or None."""
    checks = p.node_check
    settings = checks.settings
    if settings is None:
        return None
    passed = {rank for rank, c in checks.by_rank.items() if c.live and c.report.verdict == node_check.PASSED}
    peers = [rank for rank in range(checks.ranks) if rank not in passed]
    host = _pod_name_of_rank(p, peers[0]) if peers else ""

    def build(main: dict[str, Any], index: int) -> dict[str, Any]:
        rank = checks.offsets[rtype] + index
        group = peers if rank in peers else [rank]
        return node_check.init_container(main, rank, group, host if rank in peers else "127.0.0.1", settings)

    return build


def _pod_name_of_rank(p: Pass, rank: int) -> str:
    """The pod (and headless Service) name of check rank ``rank``."""
    rtype = max((t for t in p.types if p.node_check.offsets[t] <= rank), key=lambda t: p.node_check.offsets[t])
    return replica_name(p.name, rtype, rank - p.node_check.offsets[rtype])


def act(p: Pass) -> None:
    """Announce every outcome once, taint blamed nodes, replace pods whose check failed."""
    checks = p.node_check
    if checks.settings is None:
        return
    # node -> pod -> outcome: after a replacement two pods of the job may share a node.
    recorded: dict[str, dict[str, Any]] = {node: dict(pods) for node, pods in (p.old_status.get("nodeCheck") or {}).items()}
    replaced: list[tuple[dict[str, Any], str]] = []
    now = rfc3339(p.now)
    for rank, checked in sorted(checks.by_rank.items()):
        pod = checks.pods[rank]
        if not checked.live or p.is_deleting(pod):
            continue
        report, node, uid = checked.report, checked.node, pod["metadata"].get("uid", "")
        if report.verdict == node_check.PASSED:
            if (recorded.get(node) or {}).get(checked.pod_name, {}).get("podUID") != uid:
                _announce_passed(p, checked, checks.settings.straggler_factor)
                recorded.setdefault(node, {})[checked.pod_name] = _entry(
                    uid, "straggler" if report.straggler else "passed", report, now)
            continue
        decision = node_check.decide(checked, checks.by_rank, checks.ranks, checks.live)
        if decision is None:
            continue  # the reports that decide it are not all in yet
        if decision.blame:
            p.plan.taints.append(NodeTaint(node, decision.why))
            reason = "StragglerDetected" if report.verdict == node_check.STRAGGLER else "NodeCheckFailed"
            p.plan.events.append(Event("Warning", reason, (
                f"Node {node} failed the node check of pod {checked.pod_name}: {decision.message}; {report.numbers()}. "
                f"The node is tainted {node_check.TAINT_UNHEALTHY}={decision.why}:NoSchedule and the pod replaced")))
            recorded.setdefault(node, {})[checked.pod_name] = _entry(uid, decision.why, report, now)
            replaced.append((pod, f"node {node} failed the node check ({decision.why})"))
        else:
            p.plan.events.append(Event("Normal", "NodeCheckRetried",
                                       f"The node check of pod {checked.pod_name} on node {node} is run again: {decision.message}"))
            replaced.append((pod, f"its node check is run again: {decision.message}"))
    _replace(p, replaced, recorded)
    if recorded:
        p.status["nodeCheck"] = recorded


def _announce_passed(p: Pass, checked: Checked, factor: float) -> None:
    report = checked.report
    p.plan.events.append(Event("Normal", "NodeCheckPassed",
                               f"Node {checked.node} passed the node check of pod {checked.pod_name}: {report.numbers()}"))
    if report.straggler:
        p.plan.events.append(Event("Warning", "StragglerDetected", (
            f"Node {checked.node} (pod {checked.pod_name}) is a straggler: {report.numbers()}, more than {factor:g} times "
            f"the median; kept, as the job does not set {node_check.ANNOTATION_EXCLUDE_STRAGGLERS}: \"true\"")))


def _entry(uid: str, result: str, report: Report, now: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"result": result, "podUID": uid, "time": now}
    for key, value in (("allgatherSeconds", report.allgather), ("matmulSeconds", report.matmul),
                       ("medianSeconds", report.median)):
        if value is not None:
            entry[key] = round(value, 4)
    if report.error:
        entry["error"] = report.error[:200]
    return entry


def _replace(p: Pass, replaced: list[tuple[dict[str, Any], str]], recorded: dict[str, dict[str, Any]]) -> None:
    """Delete the pods to replace; a static job's ranks all start again, checked again (the
    ones that passed are marked ``replaced`` in ``recorded``)."""
    if not replaced:
        return
    if p.framework.replaces_members_alone(p.job):
        for pod, cause in replaced:
            p.delete(pod, with_service=False, cause=f"to be recreated: {cause}")
        return
    why = f"restarting the static job: {replaced[0][1]}"
    for pod in p.pods.replicas():
        p.delete(pod, with_service=False, cause=why)
        name, uid = pod["metadata"].get("name", ""), pod["metadata"].get("uid", "")
        for pods in recorded.values():
            entry = pods.get(name)
            if entry is not None and entry.get("podUID") == uid and entry.get("result") == "passed":
                pods[name] = {**entry, "replaced": True}
