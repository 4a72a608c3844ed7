"""A timeline recorder for a job someone is watching: ``trainctl run --timeline FILE``.

The launcher's watches see every change of the job and its pods as it happens; a pod that
is deleted and re-created, or a container whose ``lastState`` is overwritten by its next
restart, leaves no trace in the API afterwards. The recorder keeps each observation with
the time it arrived, and the lead pod's log lines for the world size, so the timeline at
the end holds the phases and restarts a later ``trainctl timeline`` could no longer see.

The first job it is shown is the one it records: the watches select by name, so a later
snapshot or pod of another uid (an earlier job of the same name, its terminating or
orphaned pods) is not kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from trainctl.timeline import model


class TimelineRecorder:
    """Observes one job through the launcher's hook (``job``, ``pod``, ``log``); thread-safe."""

    def __init__(self, *, container: str = "", clock: Callable[[], float] = time.time) -> None:
        self._container = container
        self._clock = clock
        self._lock = threading.Lock()
        self._job: dict[str, Any] = {}
        self._jobs: list[model.JobObservation] = []
        self._pods: list[model.PodObservation] = []
        self._lines: list[model.LogLine] = []

    def job(self, job: dict[str, Any]) -> None:
        with self._lock:
            if self._job and _uid(job) != _uid(self._job):
                return
            self._job = job
            self._jobs.append(model.JobObservation(self._clock(), job))

    def pod(self, event: str, pod: dict[str, Any]) -> None:
        with self._lock:
            if not model.controlled_by(pod, _uid(self._job)):
                return
            self._pods.append(model.PodObservation(self._clock(), event, pod))

    def log(self, pod: str, line: str) -> None:
        at, text = model.split_timestamped(line)
        with self._lock:
            self._lines.append(model.LogLine(pod, self._clock() if at is None else at, text))

    def timeline(
        self,
        *,
        events: Iterable[dict[str, Any]] = (),
        log_lines: Iterable[model.LogLine] = (),
        pods: Iterable[dict[str, Any]] = (),
        now: float | None = None,
    ) -> model.Timeline:
        """What was seen so far, with any Events, other pods' log lines, and the pods as listed at the end.

        The watches stop when the job finishes, which can be before the last writes of its
        pods arrive (a pod's Succeeded phase); a listing taken then ends each row as
        ``trainctl timeline`` would.
        """
        with self._lock:
            job, jobs, observed, lines = self._job, list(self._jobs), list(self._pods), list(self._lines)
        return model.build_timeline(
            job=job,
            pods=pods,
            now=self._clock() if now is None else now,
            container=self._container,
            events=events,
            log_lines=[*lines, *log_lines],
            pod_observations=observed,
            job_observations=jobs,
        )


def _uid(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("uid") or ""
