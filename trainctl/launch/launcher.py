"""Launch-and-wait: create a training job, follow it to the end, report how it ended.

This is the one place that does it; ``trainctl run`` and the Kubeflow Pipelines
components both call ``launch``. The job and its pods are followed with watches (no
polling), progress and the lead pod's log go to a view, and the timeout is a deadline
kept by this process's clock, independent of any server-side watch timeout, so a step
asked to wait 7 s gives up after 7 s and one asked to wait 3 days waits 3 days.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubernetes import client

from trainctl.api import constants as c
from trainctl.api.kinds import JobKind
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.informer import Informer
from trainctl.kube.restmapper import EVENTS, PODS, Resource, job_resource
from trainctl.launch.follow import LeadPodLogs
from trainctl.launch.job_kinds import current_condition, kind_of, lead_replica, terminal_condition
from trainctl.launch.job_warnings import JobWarnings
from trainctl.launch.progress import JobProgress, PodTracker, ProgressView

# After the job finished, how long the lead pod's log may take to reach its last line.
LOG_DRAIN_SECONDS = 10.0
# A launcher reports an unreachable server after a few tries instead of the controller's patience.
MAX_ATTEMPTS = 3
# After the job Succeeded, how long its status may take to count its last active replicas succeeded.
STATUS_SETTLE_SECONDS = 5.0


class Outcome(str, enum.Enum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    TIMED_OUT = "TimedOut"
    INTERRUPTED = "Interrupted"
    DELETED = "Deleted"


class LaunchError(Exception):
    """The job could not be created or followed; the message is meant for the user."""


class JobExists(LaunchError):
    """A job of the same name already exists and replacing it was not asked for."""


@dataclass
class LaunchResult:
    kind: str
    namespace: str
    name: str
    outcome: Outcome
    message: str
    condition: dict[str, Any] | None
    status: dict[str, Any]
    duration: float
    restarts: int
    pods: list[str] = field(default_factory=list)
    deleted: bool = False

    @property
    def succeeded(self) -> bool:
        return self.outcome is Outcome.SUCCEEDED


class FollowObserver(Protocol):
    """Sees what ``Launcher.follow`` sees, as it arrives: the job, its pods' watch events, the lead pod's log.

    ``pod`` is called from the pod watch's thread and ``log`` from the log follower's, so an
    observer must be thread-safe; it must also be quick, since the watches wait for it.
    """

    def job(self, job: dict[str, Any]) -> None: ...
    def pod(self, event: str, pod: dict[str, Any]) -> None: ...
    def log(self, pod: str, line: str) -> None: ...


def _api_message(exc: ApiError) -> str:
    return exc.message or exc.reason or f"HTTP {exc.code}"


class Launcher:
    """Creates, follows and deletes training jobs through one API client.

    ``api`` carries the cluster's configuration and credentials (see ``connect``); every
    request goes through a :class:`~trainctl.kube.client.KubeClient` on it.
    """

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.client = KubeClient.for_api_client(api, qps=0, max_attempts=MAX_ATTEMPTS)

    # --- create ---------------------------------------------------------------------------

    def create(self, job: dict[str, Any], namespace: str, *, replace: bool = False, deadline: float | None = None) -> dict[str, Any]:
        """Create ``job`` in ``namespace``; with ``replace``, an existing job of that name is deleted first."""
        kind = kind_of(job)
        body = copy.deepcopy(job)
        body.setdefault("metadata", {})["namespace"] = namespace
        body.pop("status", None)
        name = body["metadata"].get("name") or body["metadata"].get("generateName", "") + "…"
        try:
            with self._reachable():
                created = self.client.create(job_resource(kind), body)
                if created.existed and replace:
                    self.delete(kind, namespace, name)
                    self.wait_gone(kind, namespace, name, deadline)
                    created = self.client.create(job_resource(kind), body)
        except ApiError as exc:
            message = _api_message(exc)
            if exc.code == 404 and "namespace" not in message.lower():
                message += f" (is the {kind.kind} CRD, {kind.plural}.{kind.group}, installed?)"
            raise LaunchError(f"cannot create {kind.kind} {namespace}/{name}: {message}") from None
        if created.object is None:
            raise JobExists(f"{kind.kind} {namespace}/{name} already exists")
        return created.object

    @contextlib.contextmanager
    def _reachable(self) -> Iterator[None]:
        """A connection failure becomes one line naming the server; other API errors pass through."""
        try:
            yield
        except ApiError as exc:
            if exc.code == 0:
                raise LaunchError(f"cannot reach the API server at {self.client.host}: {exc.message}") from None
            raise

    def delete(self, kind: JobKind, namespace: str, name: str) -> bool:
        """Delete the job (its pods and services go with it); False if it was already gone."""
        try:
            with self._reachable():
                return self.client.delete(job_resource(kind), namespace, name)
        except ApiError as exc:
            raise LaunchError(f"cannot delete {kind.kind} {namespace}/{name}: {_api_message(exc)}") from None

    def wait_gone(self, kind: JobKind, namespace: str, name: str, deadline: float | None) -> None:
        """Block until the job and its pods are gone (a watch each), so a new job can reuse the names."""
        what = f"{kind.kind} {namespace}/{name} to be deleted"
        _wait_empty(self.client, job_resource(kind), namespace, deadline, what=what, field_selector=f"metadata.name={name}")
        _wait_empty(self.client, PODS, namespace, deadline, what=what, label_selector=f"{c.LABEL_JOB_NAME}={name}")

    # --- follow ---------------------------------------------------------------------------

    def follow(
        self,
        job: dict[str, Any],
        view: ProgressView,
        *,
        deadline: float | None = None,
        started: float | None = None,
        delete_when_done: bool = False,
        delete_on_interrupt: bool = True,
        observer: FollowObserver | None = None,
    ) -> LaunchResult:
        """Follow a created job until it finishes, the deadline passes or the user interrupts.

        ``deadline`` and ``started`` are ``time.monotonic()`` values. The job is deleted at the
        end when ``delete_when_done`` (whatever the outcome), and on Ctrl-C when
        ``delete_on_interrupt``. An ``observer`` is told everything the watches see.
        """
        followed = _FollowedJob(self.client, job, view, deadline=deadline, started=started, observer=observer)
        outcome = followed.wait()
        duration = time.monotonic() - followed.started
        deleted = False
        if outcome is not Outcome.DELETED and (delete_when_done or (outcome is Outcome.INTERRUPTED and delete_on_interrupt)):
            deleted = self.delete(followed.kind, followed.namespace, followed.name)
        return followed.result(outcome, duration, deleted=deleted or outcome is Outcome.DELETED)

    # --- both -----------------------------------------------------------------------------

    def launch(
        self,
        job: dict[str, Any],
        namespace: str,
        view: ProgressView,
        *,
        timeout: float | None = None,
        replace: bool = False,
        delete_when_done: bool = False,
        delete_on_interrupt: bool = True,
        observer: FollowObserver | None = None,
    ) -> LaunchResult:
        """Create ``job`` and follow it; ``timeout`` seconds count from just before the create."""
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        created = self.create(job, namespace, replace=replace, deadline=deadline)
        kind = kind_of(created)
        view.note(f"created {kind.kind} {namespace}/{created['metadata']['name']}")
        return self.follow(
            created,
            view,
            deadline=deadline,
            started=started,
            delete_when_done=delete_when_done,
            delete_on_interrupt=delete_on_interrupt,
            observer=observer,
        )


class _FollowedJob:
    """One ``Launcher.follow``: the watches on a job and its pods, the lead pod's log, and
    what they have shown so far. The watches (the job, its pods, the Events about the job)
    feed one queue, which :meth:`wait` reads."""

    def __init__(
        self, kube: KubeClient, job: dict[str, Any], view: ProgressView, *,
        deadline: float | None, started: float | None, observer: FollowObserver | None,
    ) -> None:
        self.client, self.view, self.deadline, self.observer = kube, view, deadline, observer
        self.kind = kind_of(job)
        meta = job["metadata"]
        self.namespace, self.name, self.uid = meta["namespace"], meta["name"], meta["uid"]
        self.started = time.monotonic() if started is None else started
        self.events: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        self.tracker = PodTracker()
        self.warnings = JobWarnings()
        self.lead_type, self.lead_index = lead_replica(job, self.kind)
        self.created = self.current = job
        self.outcome: Outcome | None = None
        if observer is not None:
            observer.job(job)
        self.logs = LeadPodLogs(kube, self.namespace, self.kind.container, self._on_line, view.note)
        self.job_watch = _watch(
            kube, job_resource(self.kind), self.namespace, lambda event, obj: self.events.put(("job", event, obj)),
            on_error=lambda exc: self.events.put(("error", "job", _api_message(exc))),
            on_synced=self._on_job_listed, field_selector=f"metadata.name={self.name}",
        )
        self.pod_watch = _watch(
            kube, PODS, self.namespace, self._on_pod,
            on_error=lambda exc: self.events.put(("error", "pods", _api_message(exc))),
            label_selector=f"{c.LABEL_JOB_NAME}={self.name}",
        )
        self.event_watch = _watch(
            kube, EVENTS, self.namespace, lambda event, obj: self.events.put(("event", event, obj)),
            on_error=lambda exc: self.events.put(("error", "events", _api_message(exc))),
            field_selector=f"involvedObject.uid={self.uid}",
        )

    # --- the watches' threads -------------------------------------------------------------

    def _on_line(self, pod: str, line: str) -> None:
        self.view.log(pod, line)
        if self.observer is not None:
            self.observer.log(pod, line)

    def _on_pod(self, event: str, pod: dict[str, Any]) -> None:
        if not owned_by(pod, self.uid):
            return  # a leftover pod of an earlier job with the same name
        if self.observer is not None:
            self.observer.pod(event, pod)
        if self._is_lead(pod):
            self.logs.observe(None if event == "DELETED" else pod)
        self.events.put(("pod", event, pod))

    def _is_lead(self, pod: dict[str, Any]) -> bool:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return bool(labels.get(c.LABEL_REPLICA_TYPE) == self.lead_type and labels.get(c.LABEL_REPLICA_INDEX) == self.lead_index)

    def _on_job_listed(self) -> None:
        # Deleted before (or while) we were not watching: a list no longer shows it.
        if not any((obj.get("metadata") or {}).get("uid") == self.uid for obj in self.job_watch.store.list()):
            self.events.put(("job", "DELETED", self.created))

    # --- the caller's thread --------------------------------------------------------------

    def wait(self) -> Outcome:
        """Watch until the job ends, the deadline passes or Ctrl-C; then stop watching."""
        try:
            self._start_watches()
            outcome = self._wait_for_outcome()
            if outcome is Outcome.SUCCEEDED:
                self._wait_for_final_counts()
            return outcome
        except KeyboardInterrupt:
            self.outcome = Outcome.INTERRUPTED
            return self.outcome
        finally:
            self._stop_watches()

    def _start_watches(self) -> None:
        self.job_watch.start()
        self.pod_watch.start()
        self.event_watch.start()
        self.logs.start()
        self._show_progress()

    def _wait_for_outcome(self) -> Outcome:
        while self.outcome is None:
            timeout = None if self.deadline is None else self.deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                self.outcome = Outcome.TIMED_OUT
                break
            try:
                source, event, obj = self.events.get(timeout=timeout)
            except queue.Empty:
                continue
            if self._observe(source, event, obj):
                self._show_progress()
        return self.outcome

    def _wait_for_final_counts(self) -> None:
        """Let the status of a Succeeded job count its last active replicas succeeded.

        The operators write Succeeded in one pass and move the replicas still active to
        succeeded in the next (Kubeflow's finished-job path), so the snapshot that ended the
        wait may still say "Worker 2 active"; the summary wants the status that follows.
        """
        budget = STATUS_SETTLE_SECONDS if self.deadline is None else min(STATUS_SETTLE_SECONDS, self.deadline - time.monotonic())
        ends = time.monotonic() + budget
        while has_active_replicas(self.current) and (left := ends - time.monotonic()) > 0:
            try:
                source, event, obj = self.events.get(timeout=left)
            except (queue.Empty, KeyboardInterrupt):  # Ctrl-C now ends this wait, not the Succeeded job
                return
            if source == "job" and event != "DELETED" and (obj.get("metadata") or {}).get("uid") == self.uid:
                self.current = obj
                if self.observer is not None:
                    self.observer.job(obj)
            elif source == "pod":
                self.tracker.observe(event, obj)

    def _observe(self, source: str, event: str, obj: Any) -> bool:
        """Take in one queued watch event; whether it is one the progress view shows."""
        if source == "error":
            if event == "job":
                raise LaunchError(f"cannot follow {self.kind.kind} {self.namespace}/{self.name}: {obj}")
            self.view.note(f"cannot follow the job's {event}: {obj}")
            return False
        if source == "event":
            note = self.warnings.observe(event, obj)
            if note is not None:
                self.view.note(note)
            return False
        if source == "pod":
            note = self.tracker.observe(event, obj)
            if note is not None:
                self.view.note(note)
        elif (obj.get("metadata") or {}).get("uid") != self.uid:
            return False
        elif event == "DELETED":
            self.outcome = Outcome.DELETED
        else:
            self.current = obj
            if self.observer is not None:
                self.observer.job(obj)
            terminal = terminal_condition(obj)
            if terminal is not None:
                self.outcome = Outcome(terminal["type"])
        return True

    def _show_progress(self) -> None:
        self.view.show(JobProgress.of(self.current, self.tracker, time.monotonic() - self.started))

    def _stop_watches(self) -> None:
        self.job_watch.stop()
        self.event_watch.stop()
        if self.outcome in (Outcome.SUCCEEDED, Outcome.FAILED):
            self._catch_up_lead_log()
        self.pod_watch.stop()
        self.logs.stop()

    def _catch_up_lead_log(self) -> None:
        """Let the lead pod's log reach its last line before the summary is printed.

        The pod watch and the job watch are separate streams, so the job may be seen to
        finish before the lead pod's final state arrives; one GET closes that gap.
        """
        budget = LOG_DRAIN_SECONDS if self.deadline is None else min(LOG_DRAIN_SECONDS, self.deadline - time.monotonic())
        if budget <= 0:
            return
        selector = f"{c.LABEL_JOB_NAME}={self.name},{c.LABEL_REPLICA_TYPE}={self.lead_type},{c.LABEL_REPLICA_INDEX}={self.lead_index}"
        try:
            pods, _ = self.client.list(PODS, self.namespace, label_selector=selector)
        except ApiError:  # the log is a courtesy: never let it change the outcome
            return
        for pod in pods:
            if owned_by(pod, self.uid):
                self.logs.observe(pod)
        self.logs.drain(budget)

    def result(self, outcome: Outcome, duration: float, *, deleted: bool) -> LaunchResult:
        return LaunchResult(
            kind=self.kind.kind,
            namespace=self.namespace,
            name=self.name,
            outcome=outcome,
            message=_outcome_message(outcome, self.current, self.kind, self.namespace, self.name, self.deadline, self.started),
            condition=current_condition(self.current),
            status=self.current.get("status") or {},
            duration=duration,
            restarts=self.tracker.restarts,
            pods=sorted(self.tracker.phases),
            deleted=deleted,
        )


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Let SIGTERM (a cancelled pipeline run, a stopped CI job) end the wait as Ctrl-C does.

    The launcher then deletes the job it created instead of leaving it running unattended.
    Only the main thread can handle signals; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def launch(api: client.ApiClient, job: dict[str, Any], namespace: str, view: ProgressView, **options: Any) -> LaunchResult:
    """Create a training job, follow it to the end and return how it ended (see ``Launcher.launch``)."""
    return Launcher(api).launch(job, namespace, view, **options)


def _watch(
    kube: KubeClient,
    resource: Resource,
    namespace: str,
    on_event: Callable[[str, dict[str, Any]], None],
    *,
    on_error: Callable[[ApiError], None],
    on_synced: Callable[[], None] | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> Informer:
    """An informer on ``resource`` that reports ``(event, object)`` and hands over what it cannot retry."""
    informer = Informer(
        kube, resource, namespace=namespace, label_selector=label_selector, field_selector=field_selector,
        retry_delay=0.05, max_retry_delay=5.0, on_synced=on_synced, on_error=on_error,
    )
    informer.add_handler(lambda event, new, old: on_event(event, new or old or {}))
    return informer


def _wait_empty(kube: KubeClient, resource: Resource, namespace: str, deadline: float | None, *, what: str, **selectors: str) -> None:
    """Block until ``resource`` in ``namespace`` has nothing matching ``selectors``, as its watch reports it."""
    failures: list[str] = []
    changed = threading.Condition()

    def notify(*_: Any) -> None:
        with changed:
            changed.notify_all()

    def on_error(exc: ApiError) -> None:
        with changed:
            failures.append(_api_message(exc))
            changed.notify_all()

    watch = _watch(kube, resource, namespace, notify, on_error=on_error, on_synced=notify, **selectors)
    watch.start()
    try:
        with changed:
            while not failures and not (watch.synced.is_set() and not len(watch.store)):
                timeout = None if deadline is None else deadline - time.monotonic()
                if timeout is not None and timeout <= 0:
                    raise LaunchError(f"timed out waiting for {what}")
                changed.wait(timeout)
            if failures:
                raise LaunchError(f"waiting for {what}: {failures[0]}")
    finally:
        watch.stop()


def has_active_replicas(job: dict[str, Any]) -> bool:
    replica_statuses = (job.get("status") or {}).get("replicaStatuses") or {}
    return any((counts or {}).get("active") for counts in replica_statuses.values())


def owned_by(obj: dict[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return not refs or any(ref.get("uid") == uid for ref in refs if ref.get("controller"))


def _outcome_message(outcome: Outcome, job: dict[str, Any], kind: JobKind, namespace: str, name: str, deadline: float | None, started: float) -> str:
    condition = current_condition(job) or {}
    if outcome in (Outcome.SUCCEEDED, Outcome.FAILED):
        return condition.get("message") or f"{kind.kind} {namespace}/{name} {outcome.value.lower()}"
    last = condition.get("type") or "Pending"
    if outcome is Outcome.TIMED_OUT:
        assert deadline is not None
        return f"{kind.kind} {namespace}/{name} did not finish within {deadline - started:g}s (last condition: {last})"
    if outcome is Outcome.INTERRUPTED:
        return f"interrupted while {kind.kind} {namespace}/{name} was {last}"
    return f"{kind.kind} {namespace}/{name} was deleted while {last}"
