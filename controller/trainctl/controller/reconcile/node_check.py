"""The node check before training (a trainctl extension): its settings, its init container, its reports.

A node with a dead data link or a throttled CPU is silent: a job placed there starts, then
hangs or runs at the speed of its slowest node. With ``trainctl.io/node-check: "true"`` (or
the controller's ``--node-check``) every pod of a PyTorchJob first runs the check of
``node_check_probe`` in an init container of its own image (allgather and matmul in pairs,
re-paired to find which pod of a failed pair is broken), which reports through its
termination message. This module builds that container and reads the reports; what a pass
does with them (taint, Events, replacement) is ``node_health``.

Which pods check together is decided at creation: every pod of the job that has not passed
(the check ranks, Master first then Workers by index, of pods missing, failed or still
checking) meets at the lowest of them. A replacement joining pods that passed checks alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from trainctl.controller.frameworks.base import env, env_from_field

ANNOTATION_NODE_CHECK = "trainctl.io/node-check"
ANNOTATION_EXCLUDE_STRAGGLERS = "trainctl.io/exclude-stragglers"
TAINT_UNHEALTHY = "trainctl.io/unhealthy"
INIT_CONTAINER = "node-check"
# Where the host pod of a check listens for the others (its own pod IP: no clash with training).
PORT = 29511
# The probe's source, shipped to the pods as ``python -c``: the user's image has torch, not trainctl.
PROBE_SOURCE = (Path(__file__).resolve().parent.parent / "node_check_probe.py").read_text()

# The probe's verdicts.
PASSED, FAILED, STRAGGLER = "passed", "failed", "straggler"
UNREACHABLE, ISOLATED, INCONCLUSIVE = "unreachable", "isolated", "inconclusive"


@dataclass(frozen=True)
class Settings:
    """How one job's pods are checked."""

    exclude_stragglers: bool
    straggler_factor: float
    join_timeout: float
    pair_timeout: float


def _switch(annotations: dict[str, Any], key: str, default: bool, problems: list[str]) -> bool:
    value = annotations.get(key)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    problems.append(f'annotation {key}={value!r} is not "true" or "false"; using {str(default).lower()}')
    return default


def settings(
    annotations: dict[str, Any], *, default: bool, straggler_factor: float, join_timeout: float, pair_timeout: float
) -> tuple[Optional[Settings], list[str]]:
    """The job's check settings (None: no check) and the problems with its annotations."""
    problems: list[str] = []
    enabled = _switch(annotations, ANNOTATION_NODE_CHECK, default, problems)
    exclude = _switch(annotations, ANNOTATION_EXCLUDE_STRAGGLERS, False, problems)
    if not enabled:
        return None, problems
    return Settings(exclude, straggler_factor, join_timeout, pair_timeout), problems


def init_container(main: dict[str, Any], rank: int, peers: list[int], host: str, s: Settings) -> dict[str, Any]:
    """The check's init container, in the image (and with the resources) of the job's container."""
    container: dict[str, Any] = {
        "name": INIT_CONTAINER,
        "image": main.get("image", ""),
        "command": ["python", "-c", PROBE_SOURCE],
        "env": [
            env("NODE_CHECK_RANK", rank),
            env("NODE_CHECK_PEERS", ",".join(map(str, peers))),
            env("NODE_CHECK_HOST", host),
            env("NODE_CHECK_PORT", PORT),
            env_from_field("NODE_CHECK_ADDR", "status.podIP"),
            env("NODE_CHECK_JOIN_TIMEOUT", f"{s.join_timeout:g}"),
            env("NODE_CHECK_PAIR_TIMEOUT", f"{s.pair_timeout:g}"),
            env("NODE_CHECK_STRAGGLER_FACTOR", f"{s.straggler_factor:g}"),
            env("NODE_CHECK_EXCLUDE_STRAGGLERS", str(s.exclude_stragglers).lower()),
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    for key in ("imagePullPolicy", "resources"):
        if key in main:
            container[key] = main[key]
    return container


@dataclass(frozen=True)
class Report:
    """What one pod's check said (its init container's termination message)."""

    rank: int
    host: int
    verdict: str
    error: str = ""
    allgather: Optional[float] = None
    matmul: Optional[float] = None
    median: Optional[float] = None
    straggler: bool = False
    partners: list[tuple[int, bool]] = field(default_factory=list)

    @property
    def seconds(self) -> Optional[float]:
        """The time compared with the others': allgather plus matmul."""
        if self.matmul is None:
            return None
        return (self.allgather or 0.0) + self.matmul

    def numbers(self) -> str:
        """The measured times, for an Event."""
        if self.matmul is None:
            return "no times measured"
        text = f"allgather {self.allgather or 0.0:.3f}s, matmul {self.matmul:.3f}s"
        if self.median is not None:
            text += f" (median allgather+matmul of the check {self.median:.3f}s)"
        return text

    def pairs(self) -> str:
        """Whom it was paired with and how each pair went, for an Event."""
        return ", ".join(f"rank {peer} {'ok' if ok else 'failed'}" for peer, ok in self.partners) or "none"


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def report_of(pod: dict[str, Any]) -> Optional[Report]:
    """The check's report in ``pod``'s status, from the last run of its init container that ended."""
    for status in (pod.get("status") or {}).get("initContainerStatuses") or []:
        if status.get("name") != INIT_CONTAINER:
            continue
        for state in (status.get("state"), status.get("lastState")):
            message = ((state or {}).get("terminated") or {}).get("message")
            if not message:
                continue
            try:
                data = json.loads(message)
            except ValueError:
                return None  # not the probe's words (it crashed): the usual rules apply
            if not isinstance(data, dict) or not isinstance(data.get("rank"), int) or not isinstance(data.get("verdict"), str):
                return None
            partners = [(int(p[0]), bool(p[1])) for p in data.get("partners") or []
                        if isinstance(p, list) and len(p) == 2 and isinstance(p[0], int)]
            return Report(
                rank=data["rank"], host=int(data.get("host") or 0), verdict=data["verdict"], error=str(data.get("error") or ""),
                allgather=_number(data.get("allgather")), matmul=_number(data.get("matmul")),
                median=_number(data.get("median")), straggler=bool(data.get("straggler")), partners=partners,
            )
    return None


@dataclass(frozen=True)
class Decision:
    """What a failed check means for its pod: replace it, and whether its node is to blame."""

    blame: bool
    why: str  # the taint's value when blamed, e.g. "node-check-failed"
    message: str


@dataclass(frozen=True)
class Checked:
    """A pod with a report, as the decision needs it."""

    pod_name: str
    node: str
    report: Report
    live: bool = True  # not terminating, not being replaced


def decide(checked: Checked, by_rank: dict[int, Checked], ranks: int, live: set[int]) -> Optional[Decision]:
    """What a pod's failed check means, given the reports of the others (None: wait, or passed).

    Only a pod the probe judged itself (failed beside a pod that passed, or beside two
    different pods; or a straggler excluded) is blamed at once. ``live``: the ranks whose pod
    exists and is not going away. A pod that could not reach
    the check's host is blamed once the host says others reached it; a host that nobody
    reached, once two pods on other nodes say they could not (with one other pod, the two
    cannot be told apart, and neither is blamed).
    """
    report = checked.report
    if report.verdict == PASSED:
        return None
    if report.verdict == FAILED:
        return Decision(True, "node-check-failed", f"its pairs failed ({report.pairs()}): {report.error or 'timed out'}")
    if report.verdict == STRAGGLER:
        return Decision(True, "straggler", "a straggler, excluded")
    if report.verdict == UNREACHABLE:
        host = by_rank.get(report.host)
        if report.host not in live or (host is not None and not host.live):
            return Decision(False, "", f"the check's host (rank {report.host}) is gone: checked again")
        if host is None:
            return None  # the host has not said yet
        if host.report.verdict == ISOLATED:
            if decide(host, by_rank, ranks, live) is None:
                return None  # whether the host is to blame is not known yet: keep the evidence
            return Decision(False, "", f"the check's host (rank {report.host}, node {host.node}) was unreachable: checked again")
        if host.report.verdict in (PASSED, FAILED, STRAGGLER, INCONCLUSIVE):
            return Decision(True, "unreachable", f"it could not reach the check's host on node {host.node}, which others reached: "
                                                 f"{report.error}")
        return None
    if report.verdict == ISOLATED:
        others = [c for rank, c in by_rank.items() if rank != report.rank and c.report.verdict == UNREACHABLE
                  and c.report.host == report.rank and c.node != checked.node]
        needed = min(2, ranks - 1)
        if len(others) < needed:
            return None
        if needed < 2:
            return Decision(False, "", "it and the only other pod could not reach each other: both checked again")
        names = ", ".join(sorted(c.node for c in others))
        return Decision(True, "unreachable", f"no other pod reached it, and pods on {names} could not")
    return Decision(False, "", f"the check was inconclusive: {report.error or report.verdict}")


def taint(node: dict[str, Any], why: str, now: str) -> Optional[dict[str, Any]]:
    """``node`` with the taint ``trainctl.io/unhealthy=<why>:NoSchedule`` (None: tainted already)."""
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    if any(t.get("key") == TAINT_UNHEALTHY for t in taints):
        return None
    taints.append({"key": TAINT_UNHEALTHY, "value": why, "effect": "NoSchedule", "timeAdded": now})
    return {**node, "spec": {**spec, "taints": taints}}


@dataclass
class Checks:
    """One pass's view of a job's checks: its settings, its ranks and the reports so far."""

    settings: Optional[Settings] = None
    offsets: dict[str, int] = field(default_factory=dict)  # replica type -> rank of its index 0
    ranks: int = 0
    by_rank: dict[int, Checked] = field(default_factory=dict)
    pods: dict[int, dict[str, Any]] = field(default_factory=dict)
    live: set[int] = field(default_factory=set)  # ranks whose pod exists and is not going away
    # Pods whose check did not pass: neither up nor failed; this feature replaces them.
    handled: set[str] = field(default_factory=set)

    def handles(self, pod: dict[str, Any]) -> bool:
        return bool(self.handled) and (pod.get("metadata") or {}).get("uid") in self.handled
