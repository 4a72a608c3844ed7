"""What a running job looks like to the person waiting for it, and how it is shown.

``PodTracker`` turns pod events into the numbers a user asks about (pod phases, restarts,
counting both in-place container restarts and re-created pods). ``JobProgress`` is one
snapshot of the job. A view shows snapshots, log lines and notes: ``RichView`` redraws a
live panel on a terminal, ``PlainView`` prints one line per change, which is what CI logs
and Kubeflow Pipelines step logs want. ``summary_lines`` is the one-screen summary.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from trainctl.launch.job_kinds import current_condition


class PodTracker:
    """Pod phases and restarts of one job's pods, from its pod watch."""

    def __init__(self) -> None:
        self._pods: dict[str, dict[str, Any]] = {}
        # The highest restartCount seen per pod uid, and the uids seen per pod name.
        self._restarts_by_uid: dict[str, int] = {}
        self._uids_by_name: dict[str, set[str]] = {}
        self._unschedulable: dict[str, str] = {}  # pod name -> the scheduler's last message

    def observe(self, event: str, pod: dict[str, Any]) -> str | None:
        """Take one pod event; returns a note when a pod newly cannot be scheduled, and why."""
        meta = pod.get("metadata") or {}
        name, uid = meta.get("name") or "", meta.get("uid") or ""
        if event == "DELETED":
            self._pods.pop(name, None)
        else:
            self._pods[name] = pod
        self._uids_by_name.setdefault(name, set()).add(uid)
        restarts = sum(int(s.get("restartCount") or 0) for s in (pod.get("status") or {}).get("containerStatuses") or [])
        self._restarts_by_uid[uid] = max(restarts, self._restarts_by_uid.get(uid, 0))
        reason = None if event == "DELETED" else unschedulable(pod)
        if reason is None:
            self._unschedulable.pop(name, None)
            return None
        if self._unschedulable.get(name) == reason:
            return None
        self._unschedulable[name] = reason
        return f"{name} is Pending: {reason}"

    @property
    def restarts(self) -> int:
        recreations = sum(len(uids) - 1 for uids in self._uids_by_name.values())
        return recreations + sum(self._restarts_by_uid.values())

    @property
    def phases(self) -> dict[str, str]:
        return {name: (pod.get("status") or {}).get("phase") or "Pending" for name, pod in sorted(self._pods.items())}


def replicas_text(replica_statuses: dict[str, Any], empty: str) -> str:
    """``status.replicaStatuses`` in a few words: "Master 1 succeeded; Worker 2 active"."""
    parts = []
    for rtype, counts in replica_statuses.items():
        numbers = [f"{counts[k]} {k}" for k in ("active", "succeeded", "failed") if (counts or {}).get(k)]
        parts.append(f"{rtype} {', '.join(numbers) or '0 active'}")
    return "; ".join(parts) or empty


def unschedulable(pod: dict[str, Any]) -> str | None:
    """The scheduler's message for a pending pod it cannot place (PodScheduled False)."""
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "Pending"):
        return None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition.get("message") or condition.get("reason") or "Unschedulable"
    return None


@dataclass
class JobProgress:
    kind: str
    namespace: str
    name: str
    elapsed: float
    condition: dict[str, Any] | None = None
    replica_statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    restarts: int = 0
    pod_phases: dict[str, str] = field(default_factory=dict)
    conditions: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, job: dict[str, Any], tracker: PodTracker, elapsed: float) -> "JobProgress":
        meta, status = job.get("metadata") or {}, job.get("status") or {}
        return cls(
            kind=job.get("kind") or "",
            namespace=meta.get("namespace") or "",
            name=meta.get("name") or "",
            elapsed=elapsed,
            condition=current_condition(job),
            replica_statuses=dict(status.get("replicaStatuses") or {}),
            restarts=tracker.restarts,
            pod_phases=tracker.phases,
            conditions=tuple(c for c in status.get("conditions") or [] if isinstance(c, dict)),
        )

    @property
    def state(self) -> str:
        return (self.condition or {}).get("type") or "Pending"

    def replicas_text(self) -> str:
        return replicas_text(self.replica_statuses, "no replicas yet")

    def pods_text(self) -> str:
        """Pods per phase: "Pending 1, Running 2"."""
        phases = sorted(set(self.pod_phases.values()))
        return ", ".join(f"{phase} {sum(1 for p in self.pod_phases.values() if p == phase)}" for phase in phases) or "none"

    def line(self) -> str:
        """Everything but the clock, so a view can tell whether anything changed."""
        return f"{self.state} | {self.replicas_text()} | pods: {self.pods_text()} | restarts {self.restarts}"


class ProgressView(Protocol):
    def show(self, progress: JobProgress) -> None: ...
    def log(self, pod: str, line: str) -> None: ...
    def note(self, message: str) -> None: ...
    def close(self) -> None: ...


class PlainView:
    """One line per change, for logs that are read later (CI, pipeline steps)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._lock = threading.Lock()
        self._last = ""

    def _write(self, text: str) -> None:
        with self._lock:
            self._out.write(text + "\n")
            self._out.flush()

    def show(self, progress: JobProgress) -> None:
        line = progress.line()
        if line != self._last:
            self._last = line
            self._write(f"[{progress.elapsed:7.1f}s] {progress.kind} {progress.namespace}/{progress.name}: {line}")

    def log(self, pod: str, line: str) -> None:
        self._write(f"{pod} | {line}")

    def note(self, message: str) -> None:
        self._write(f"--- {message}")

    def close(self) -> None:
        pass


class RichView:
    """One live status block per job at the bottom of the terminal; logs and notes scroll above it.

    A block shows the job's conditions, its replicas per type, pods per phase, restarts and
    the elapsed time, and is redrawn in place (rich's live display), so a change costs no
    new line. Between changes it is redrawn for the clock (``auto_refresh``, 4 times a second).
    """

    def __init__(self, console: Any = None, *, auto_refresh: bool = True) -> None:
        from rich.console import Console
        from rich.live import Live

        self._console = console or Console()
        self._jobs: dict[tuple[str, str], tuple[JobProgress, float]] = {}  # (ns, name) -> (snapshot, when shown)
        self._live = Live(console=self._console, refresh_per_second=4, transient=True, auto_refresh=auto_refresh, get_renderable=self._render)
        self._live.start()

    def _render(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        if not self._jobs:
            return Text("waiting for the job…", style="dim")
        now = time.monotonic()
        return Group(*(_job_block(p, p.elapsed if p.state in FINISHED else p.elapsed + now - shown) for p, shown in list(self._jobs.values())))

    def show(self, progress: JobProgress) -> None:
        self._jobs[(progress.namespace, progress.name)] = (progress, time.monotonic())
        self._live.refresh()  # in place: the block's lines are rewritten, none added

    def log(self, pod: str, line: str) -> None:
        from rich.text import Text

        self._console.print(Text(f"{pod} | ", style="dim") + Text(line))

    def note(self, message: str) -> None:
        from rich.text import Text

        self._console.print(Text(message, style="yellow"))

    def close(self) -> None:
        self._live.stop()


FINISHED = ("Succeeded", "Failed")
STATE_STYLES = {"Succeeded": "green", "Failed": "red", "Restarting": "yellow", "Running": "cyan"}


def _job_block(p: JobProgress, elapsed: float) -> Any:
    """The live block of one job: header, conditions, replicas per type, pods."""
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 2))
    colour = STATE_STYLES.get(p.state, "white")
    table.add_row(Text(f"{p.kind} {p.namespace}/{p.name}", style="bold"), Text(p.state, style=f"bold {colour}"), Text(f"{elapsed:.0f}s"), Text(f"restarts {p.restarts}"))
    conditions = Text("  ")
    for cond in p.conditions:
        true = cond.get("status") == "True"
        conditions.append(f"{cond.get('type')}{'' if true else '=' + str(cond.get('status'))} ", style=STATE_STYLES.get(cond.get("type", ""), "white") if true else "dim")
    table.add_row(Text("  conditions"), conditions if p.conditions else Text("  none yet", style="dim"))
    for rtype, counts in p.replica_statuses.items():
        counts = counts or {}
        table.add_row(Text(f"  {rtype}"), Text(f"{counts.get('active', 0)} active"), Text(f"{counts.get('succeeded', 0)} succeeded"), Text(f"{counts.get('failed', 0)} failed"))
    table.add_row(Text("  pods"), Text(p.pods_text()))
    message = (p.condition or {}).get("message")
    if message:
        table.add_row(Text("  message"), Text(message, style="dim"))
    return table


def make_view(out: TextIO | None = None) -> ProgressView:
    """A live panel on a terminal, plain lines anywhere else."""
    out = out or sys.stdout
    if out.isatty():
        from rich.console import Console

        return RichView(Console(file=out))
    return PlainView(out)
