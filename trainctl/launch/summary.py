"""The one-screen summary printed when a launched job ends, for terminals and step logs alike."""

from __future__ import annotations

from typing import Any

from trainctl.api.constants import LABEL_JOB_NAME
from trainctl.launch.launcher import LaunchResult, Outcome
from trainctl.launch.progress import replicas_text

# Keep the summary on one screen however many replicas the job has.
MAX_LOG_HINTS = 6


def replicas_line(status: dict[str, Any], *, succeeded: bool = False) -> str:
    """The job's replica counts; of a Succeeded job, as its final status has them.

    A Succeeded job has no active replica: the operators count the ones still active when
    it succeeded as succeeded, a pass after they set the condition. A status read before
    that pass is shown as it will be.
    """
    counts = status.get("replicaStatuses") or {}
    if succeeded:
        counts = {rtype: _active_counted_succeeded(type_counts or {}) for rtype, type_counts in counts.items()}
    return replicas_text(counts, "none reported")


def _active_counted_succeeded(counts: dict[str, Any]) -> dict[str, Any]:
    moved = {k: v for k, v in counts.items() if k != "active"}
    if counts.get("active"):
        moved["succeeded"] = (counts.get("succeeded") or 0) + counts["active"]
    return moved


def summary_lines(result: LaunchResult, logs: list[str] | None = None) -> list[str]:
    """Final condition and message, duration, replicas, restarts, what happened to the job, where the logs are.

    ``logs`` overrides the default hint (``kubectl logs`` commands for the job's pods).
    """
    job = f"{result.kind} {result.namespace}/{result.name}"
    condition = result.condition or {}
    headline = {
        Outcome.SUCCEEDED: f"{job} succeeded",
        Outcome.FAILED: f"{job} failed",
        Outcome.TIMED_OUT: f"{job} timed out",
        Outcome.INTERRUPTED: f"{job} interrupted",
        Outcome.DELETED: f"{job} was deleted",
    }[result.outcome]
    lines = [
        f"{headline} after {result.duration:.1f}s",
        f"  condition: {condition.get('type', 'none')}" + (f" ({condition['reason']})" if condition.get("reason") else ""),
        f"  message:   {result.message}",
        f"  replicas:  {replicas_line(result.status, succeeded=result.outcome is Outcome.SUCCEEDED)}",
        f"  restarts:  {result.restarts}",
    ]
    if result.deleted and result.outcome is not Outcome.DELETED:
        lines.append("  deleted:   yes, with its pods")
    if logs is None:
        logs = [] if result.deleted else [f"kubectl logs -n {result.namespace} {pod}" for pod in result.pods]
        if len(logs) > MAX_LOG_HINTS:
            rest = len(logs) - MAX_LOG_HINTS + 1
            logs = logs[: MAX_LOG_HINTS - 1] + [
                f"… and {rest} more: kubectl get pods -n {result.namespace} -l {LABEL_JOB_NAME}={result.name}"
            ]
    if logs:
        lines.append(f"  logs:      {logs[0]}")
        lines.extend(f"             {hint}" for hint in logs[1:])
    return lines
