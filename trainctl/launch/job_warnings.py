"""The job's Warning Events as progress notes, each said once.

Some failures leave a job with no pods and nothing in its status: the controller cannot create
a pod (``FailedCreatePod``: the API server refused the pod made from the template), or a
Service, or a PodGroup. The controller says so only in a Warning Event on the job, so the
launcher watches those Events and notes each one as it arrives, instead of leaving the user
at ``pods: none``. An Event the controller repeats (its count goes up, or a new Event with the
same reason and message) is noted once.
"""

from __future__ import annotations

from typing import Any


class JobWarnings:
    """Which of the job's Warning Events have been noted."""

    def __init__(self) -> None:
        self._said: set[tuple[str, str]] = set()

    def observe(self, watch_event: str, event: dict[str, Any]) -> str | None:
        """A note for a Warning Event not said before; None for anything else."""
        if watch_event == "DELETED" or event.get("type") != "Warning":
            return None
        reason, message = str(event.get("reason") or ""), str(event.get("message") or "")
        if (reason, message) in self._said:
            return None
        self._said.add((reason, message))
        return f"Warning {reason}: {message}" if reason else f"Warning: {message}"
