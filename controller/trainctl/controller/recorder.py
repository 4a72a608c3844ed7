"""The Events and metrics a job's reconcile leaves behind, each recorded once.

The core names what to record; only the shell knows when it is true. So the plan's Events
and counters are recorded after its status is persisted (they then count transitions that
happened, once); the Event about a child created or deleted after the API has answered,
success or failure; a standing problem with the job's settings (``Plan.problems``, stated
in every pass) when it appears; a child the API server refuses (``FailedCreatePod``) when
the reason is new. The memory that makes "once" hold lives here, per job, and is dropped
with the job.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Optional

from trainctl.controller.keys import JobKey
from trainctl.controller.prometheus_metrics import ControllerMetrics
from trainctl.controller.reconcile.plan import ChildEvents, Event, Plan
from trainctl.kube.events import EventRecorder
from trainctl.kube.expectations import ChildKey


@dataclass(frozen=True)
class ChildOutcome:
    """How the API answered a create or delete the plan announces: ``error`` None is success."""

    events: ChildEvents
    error: Optional[str] = None

    def event(self) -> Event:
        if self.error is None:
            return self.events.success
        failure = self.events.failure
        return Event(failure.type, failure.reason, f"{failure.message}: {self.error}")


@dataclass(frozen=True)
class Refusal:
    """A child the API server will not create, and why (its message, or what is in the way)."""

    child: ChildKey
    why: str


class JobRecorder:
    """Records a job's Events (through the correlator) and counters, remembering what was
    recorded once so that it is not recorded again."""

    def __init__(self, events: EventRecorder, metrics: ControllerMetrics, clock: Callable[[], datetime]) -> None:
        self.events = events
        self.metrics = metrics
        self.clock = clock
        self._lock = threading.Lock()
        # (job, child) -> the last refusal recorded as an Event, so retries do not repeat it
        self._refusals: dict[tuple[JobKey, ChildKey], str] = {}
        # job -> its standing problems (Plan.problems) already recorded as Events
        self._problems: dict[JobKey, frozenset[Event]] = {}

    def record_plan(self, key: JobKey, job: dict[str, Any], plan: Plan, *, job_deleted: bool, now: datetime) -> None:
        """The plan's counters and Events, once its status is persisted; ``deleted`` only
        when the job's delete went through."""
        for name in plan.metrics:
            if name == "deleted" and not job_deleted:
                continue
            self.metrics.count_job(name, key.namespace, key.framework)
        for event in plan.events:
            self.events.record(job, event, key.component, now)

    def record_problems(self, key: JobKey, job: dict[str, Any], problems: list[Event], now: datetime) -> None:
        """Record each standing problem with the job's settings once, when it appears (the
        core states it in every pass); one that went away and comes back is recorded again."""
        current = frozenset(problems)
        with self._lock:
            before = self._problems.pop(key, frozenset())
            if current:
                self._problems[key] = current
        for event in problems:
            if event not in before:
                self.events.record(job, event, key.component, now)

    def record_outcomes(self, key: JobKey, job: dict[str, Any], outcomes: list[ChildOutcome]) -> None:
        """The plan's per-child Events, once the API calls have answered."""
        now = self.clock()
        for outcome in outcomes:
            self.events.record(job, outcome.event(), key.component, now)

    def record_refusal(self, key: JobKey, refusal: Refusal, job: Optional[dict[str, Any]]) -> None:
        """A Warning Event (the reference's ``FailedCreatePod``) when a child cannot be
        created, e.g. an invalid pod template or another object under its name; repeated
        only when the reason changes. ``job`` is the job as the cache has it now (None: gone)."""
        message = f"Error creating: {refusal.why}"
        with self._lock:
            if self._refusals.get((key, refusal.child)) == message:
                return
            self._refusals[(key, refusal.child)] = message
        if job is not None:
            event = Event("Warning", f"FailedCreate{refusal.child[0]}", message)
            self.events.record(job, event, key.component, self.clock())

    def forget(self, key: JobKey) -> None:
        """The job is gone: a job created again under its name starts with a clean slate."""
        with self._lock:
            for refusal in [k for k in self._refusals if k[0] == key]:
                del self._refusals[refusal]
            self._problems.pop(key, None)
