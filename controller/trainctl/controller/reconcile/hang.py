"""Hung jobs: workers that stopped making progress are found, named, dumped and restarted.

A trainctl extension, opt-in per job with the annotation ``trainctl.io/hang-timeout`` (a
duration such as "2m"). A rank that stops (a deadlock, a stuck collective, a frozen process)
stops every other rank at its next collective, and nothing fails: the job would sit Running
until gloo's or NCCL's timeout. The shell watches each worker's CPU usage (the resource
Metrics API) and, for an idle pod, whether its processes are stopped (state T); this module
decides from what it saw (``Observed.progress``), so the decision is pure and the time is
the pass's.

The job is hung when every worker pod is Running and none has made progress for the
timeout, with a usage reading since its last progress that proves it idle. All must be idle,
not one: a rank that works alone while its peers wait (rank 0 writing a checkpoint) is
progress, and a stopped rank idles its peers within one step. The culprit is the pod whose
processes are stopped, else the one whose progress ended first.

Then, in one pass, the cheapest action that works (DLRover's levels): the workers' Python
stacks are dumped into a ConfigMap before anything is deleted (``Plan.stack_captures``), a
Warning Event ``JobHung`` names the culprit and the ConfigMap, and all workers are restarted
(one restart in ``status.restartCount``); a culprit's node that hung before gets the taint
``trainctl.io/unhealthy=hang:NoSchedule``, so the replacement lands elsewhere; a hang whose
restart would reach ``backoffLimit`` fails the job instead, saying so. Each hang is recorded
in ``status.hangs`` (when, the culprit pod, its rank and node, the pods restarted), which is
how a node that hangs twice is recognised after a controller restart, and how the restarted
pods, dead of their dump while being deleted, are told from failed ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.api.durations import parse_duration
from trainctl.controller.frameworks.base import ConditionChange
from trainctl.controller.reconcile import lifecycle, oom
from trainctl.controller.reconcile.children import is_terminating, node_of, rfc3339
from trainctl.controller.reconcile.plan import Event, PodProgress, StackCapture
from trainctl.controller.reconcile.state import Pass

ANNOTATION_HANG_TIMEOUT = "trainctl.io/hang-timeout"
TAINT_KEY = "trainctl.io/unhealthy"
TAINT_VALUE = "hang"
TAINT_EFFECT = "NoSchedule"
# Set in the framework container of an opted-in job: a SIGABRT then makes Python write every
# thread's stack to stderr (the pod's log) before it dies, with no change to the script.
FAULT_HANDLER_ENV = "PYTHONFAULTHANDLER"
STATUS_HANGS = "hangs"
# status.hangs keeps the latest entries only: enough to see a node hang twice.
_KEPT_HANGS = 20
REASON_HUNG = "JobHung"
# How long past the timeout a hang waits for the shell's look at an idle pod's processes (an
# exec on a loaded node is slow), so the stopped rank can be named; then it is judged anyway.
LOOK_GRACE_SECONDS = 15.0


def timeout_seconds(annotations: dict[str, Any]) -> tuple[Optional[float], Optional[str]]:
    """The job's hang timeout (None: not opted in) and a problem with its annotation, if any."""
    value = annotations.get(ANNOTATION_HANG_TIMEOUT)
    if value is None:
        return None, None
    seconds = parse_duration(str(value))
    if seconds is None or seconds <= 0:
        return None, f"annotation {ANNOTATION_HANG_TIMEOUT}={value!r} is not a positive duration (such as 2m); no hang detection"
    return seconds, None


def with_fault_handler(p: Pass, pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` (a new object when changed) whose framework container dumps its stacks on
    SIGABRT, for a job with a hang timeout; a value the user set is kept."""
    if p.annotations.get(ANNOTATION_HANG_TIMEOUT) is None:
        return pod
    containers = []
    for ctr in pod["spec"]["containers"]:
        env = list(ctr.get("env") or [])
        if ctr.get("name") == p.framework.container and all(e.get("name") != FAULT_HANDLER_ENV for e in env):
            ctr = {**ctr, "env": [*env, {"name": FAULT_HANDLER_ENV, "value": "1"}]}
        containers.append(ctr)
    return {**pod, "spec": {**pod["spec"], "containers": containers}}


@dataclass(frozen=True)
class Worker:
    pod: dict[str, Any]
    rank: int
    progress: PodProgress

    @property
    def name(self) -> str:
        return str(self.pod["metadata"].get("name", ""))


def _workers(p: Pass) -> Optional[list[Worker]]:
    """Every replica pod with its rank (the position in the kind's order of types) and what
    the shell saw of it; None when the job cannot be judged (a pod missing, not Running,
    terminating, duplicated, or not yet seen)."""
    out, rank = [], 0
    for rtype in p.types:
        replicas = p.specs[rtype].replicas or 0
        slots = p.pods.slots(rtype)
        if p.pods.duplicated(rtype) or len(slots) != replicas:
            return None
        for index in range(replicas):
            pod = slots.get(index)
            if pod is None or is_terminating(pod) or p.is_deleting(pod) or (pod.get("status") or {}).get("phase") != "Running":
                return None
            seen = p.observed.progress.get(pod["metadata"].get("uid", ""))
            if seen is None:
                return None
            out.append(Worker(pod, rank + index, seen))
        rank += replicas
    return out or None


def replaced(p: Pass, pod: dict[str, Any]) -> bool:
    """Whether ``pod`` is one the latest hang restarted: killed by its dump and being deleted,
    it has neither failed nor is it up (under restartPolicy Never its Failed phase would fail
    the job)."""
    hangs = p.old_status.get(STATUS_HANGS) or []
    latest = hangs[-1] if hangs and isinstance(hangs[-1], dict) else {}
    return (pod.get("metadata") or {}).get("uid") in (latest.get("replaced") or ())


def culprit(workers: list[Worker]) -> tuple[Worker, str]:
    """The worker that stopped first, and how that is known."""
    stopped = [w for w in workers if w.progress.stopped]
    if stopped:
        first = min(stopped, key=lambda w: (w.progress.last_progress, w.rank))
        return first, "its processes are stopped (state T)"
    first = min(workers, key=lambda w: (w.progress.last_progress, w.rank))
    if sum(1 for w in workers if w.progress.last_progress == first.progress.last_progress) > 1:
        return first, "no worker stopped visibly first; the lowest rank of those idle longest is named"
    return first, f"it made progress last at {rfc3339(first.progress.last_progress)}, before the others"


def _idle_seconds(worker: Worker, now: datetime) -> Optional[float]:
    """How long ``worker`` has made no progress; None without a reading that shows it idle."""
    seen = worker.progress
    if seen.observed_at <= seen.last_progress:
        return None
    return (now - seen.last_progress).total_seconds()


def reconcile(p: Pass) -> tuple[int, Optional[ConditionChange]]:
    """Judge an active job; the restarts this pass makes and the Restarting condition.

    The job may be failed here (restarts would reach backoffLimit): ``p.done()`` says so."""
    timeout, problem = timeout_seconds(p.annotations)
    if problem is not None:
        p.problems.append(Event("Warning", "InvalidHangTimeout", problem))
    if timeout is None:
        return 0, None
    workers = _workers(p)
    if workers is None:
        return 0, None
    idle = [_idle_seconds(w, p.now) for w in workers]
    if any(seconds is None for seconds in idle):
        return 0, None
    least_idle = min(seconds for seconds in idle if seconds is not None)
    if least_idle < timeout:
        p.requeue.append(timeout - least_idle)
        return 0, None
    unseen = any(w.progress.stopped is None for w in workers)
    if unseen and least_idle < timeout + LOOK_GRACE_SECONDS:  # the culprit may be about to show
        p.requeue.append(timeout + LOOK_GRACE_SECONDS - least_idle)
        return 0, None
    return _hung(p, workers, least_idle, timeout)


def _hung(p: Pass, workers: list[Worker], idle: float, timeout: float) -> tuple[int, Optional[ConditionChange]]:
    first, why = culprit(workers)
    node = node_of(first.pod)
    history = [h for h in p.status.get(STATUS_HANGS) or [] if isinstance(h, dict)]
    number = len(history) + 1
    config_map = f"{p.name}-hang-{number}"
    p.plan.stack_captures.append(StackCapture(
        namespace=p.namespace, config_map=config_map, owner=p.job_ref.owner,
        labels=p.framework.base_labels(p.name),
        pods=tuple((w.name, p.framework.container) for w in workers),
    ))
    record = {"time": rfc3339(p.now), "pod": first.name, "rank": first.rank, "node": node, "stacks": config_map,
              "replaced": [w.pod["metadata"].get("uid", "") for w in workers]}
    p.status[STATUS_HANGS] = [*history, record][-_KEPT_HANGS:]
    message = (f"no progress from any worker for {idle:.0f}s (hang timeout {timeout:g}s): rank {first.rank}, "
               f"pod {first.name} on node {node}, stopped first ({why}); the stacks of all workers: "
               f"kubectl describe configmap {config_map}")
    again = bool(node) and any(h.get("node") == node for h in history)
    if again and _taint(p, node):
        message += f"; node {node} hung before: tainted {TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT}"
    limit = p.run_policy.backoff_limit
    own = max(0, (p.status.get("restartCount") or 0) - oom.relaunches(p.oom.memory))
    if limit is not None and own + 1 >= limit:
        p.plan.events.append(Event("Warning", REASON_HUNG, message))
        lifecycle.fail(p, p.framework.limit_failure_reason,
                       f"Job {p.name} has failed because its workers hung ({number} hangs) and restarting them "
                       f"would reach the backoff limit of {limit}; stacks: configmap {config_map}")
        return 0, None
    p.plan.events.append(Event("Warning", REASON_HUNG, message + "; restarting all workers"))
    why_deleted = f"restarting the hung job: {first.name} stopped first"
    for worker in workers:
        p.delete(worker.pod, with_service=False, cause=why_deleted)
    return 1, p.framework.change(
        c.CONDITION_RESTARTING, f"{p.framework.kind} {p.name} is restarting because its workers hung: "
                                f"pod {first.name} (rank {first.rank}) stopped first.", "Warning")


def _taint(p: Pass, node_name: str) -> bool:
    """Add the hang taint to ``node_name`` (a PUT of the observed Node); whether it is there."""
    node = p.observed.nodes.get(node_name)
    if node is None:
        return False
    taints = list((node.get("spec") or {}).get("taints") or [])
    if any(t.get("key") == TAINT_KEY and t.get("effect") == TAINT_EFFECT for t in taints):
        return True
    taint = {"key": TAINT_KEY, "value": TAINT_VALUE, "effect": TAINT_EFFECT, "timeAdded": rfc3339(p.now)}
    p.plan.updates.append({**node, "apiVersion": "v1", "kind": "Node",
                           "spec": {**(node.get("spec") or {}), "taints": [*taints, taint]}})
    return True

