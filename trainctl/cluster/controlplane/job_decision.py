"""What kube's Job controller does next for one batch/v1 Job, from the Job and its pods.

A data-preparation step before a training job, an evaluation after it: users run these as
Jobs, and ``kubectl create job``, ``kubectl wait --for=condition=complete`` and
``kubectl logs job/NAME`` expect kube's rules. This module is the rules, with no I/O and
no clock (``now`` is passed in): how many pods to run (parallelism, completions, the
work-queue form without completions, Indexed completion), when the Job is Complete or
Failed (backoffLimit counting failed pods and, under ``OnFailure``, container restarts;
activeDeadlineSeconds; podFailurePolicy's FailJob, Ignore and Count rules), the back-off
before a failed pod is replaced, suspend and resume, and ttlSecondsAfterFinished. The loop
in :mod:`job_controller` applies what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

Obj = dict[str, Any]

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_LABELS = ("controller-uid", "job-name")
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
DEFAULT_BACKOFF = 10.0  # kube's first delay before a failed pod is replaced
MAX_BACKOFF = 360.0


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def parse_time(value: Any) -> Optional[datetime]:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def rfc3339(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(job: Obj, kind: str) -> Optional[Obj]:
    return next((c for c in (job.get("status") or {}).get("conditions") or []
                 if isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"), None)


def finished(job: Obj) -> Optional[Obj]:
    return condition(job, "Complete") or condition(job, "Failed")


def owned_by(pod: Obj, uid: str) -> bool:
    return any(ref.get("controller") and ref.get("uid") == uid for ref in _meta(pod).get("ownerReferences") or [])


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _index(pod: Obj) -> Optional[int]:
    value = (_meta(pod).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def _restarts(pod: Obj) -> int:
    return sum(int(cs.get("restartCount") or 0) for cs in (pod.get("status") or {}).get("containerStatuses") or [])


def _finished_at(pod: Obj) -> Optional[datetime]:
    ends = [parse_time(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
            for cs in (pod.get("status") or {}).get("containerStatuses") or []]
    found = [end for end in ends if end is not None]
    return max(found) if found else parse_time(_meta(pod).get("creationTimestamp"))


def compress_indexes(indexes: set[int]) -> str:
    """``0-2,4``: kube's completedIndexes."""
    out: list[str] = []
    for i in sorted(indexes):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


# --- pod failure policy ----------------------------------------------------------------------


def _exit_rule_matches(rule: Obj, pod: Obj) -> Optional[tuple[str, int]]:
    """(container, exit code) of the first terminated container the rule's onExitCodes matches."""
    on = rule.get("onExitCodes")
    if not isinstance(on, dict):
        return None
    values = set(on.get("values") or [])
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if on.get("containerName") and cs.get("name") != on["containerName"]:
            continue
        code = ((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
        if not isinstance(code, int) or code == 0:
            continue
        if (code in values) == (on.get("operator") == "In"):
            return str(cs.get("name")), code
    return None


def _condition_rule_matches(rule: Obj, pod: Obj) -> Optional[str]:
    for wanted in rule.get("onPodConditions") or []:
        for have in (pod.get("status") or {}).get("conditions") or []:
            if have.get("type") == wanted.get("type") and have.get("status") == wanted.get("status", "True"):
                return str(wanted.get("type"))
    return None


def failure_action(job: Obj, pod: Obj) -> tuple[str, str]:
    """(action, message) of the podFailurePolicy rule a failed pod matches; ("Count", "") by default."""
    rules = ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []
    where = f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}"
    for i, rule in enumerate(rules):
        exit_match = _exit_rule_matches(rule, pod)
        if exit_match is not None:
            container, code = exit_match
            return str(rule.get("action")), (f"Container {container} for pod {where} failed with exit code {code} "
                                             f"matching {rule.get('action')} rule at index {i}")
        condition_match = _condition_rule_matches(rule, pod)
        if condition_match is not None:
            return str(rule.get("action")), f"Pod {where} has condition {condition_match} matching {rule.get('action')} rule at index {i}"
    return "Count", ""


# --- the decision ----------------------------------------------------------------------------


@dataclass
class JobDecision:
    create: list[Obj] = field(default_factory=list)  # pods to create
    delete: list[str] = field(default_factory=list)  # names of pods to delete
    status: Optional[Obj] = None  # the new status, when it changed
    delete_job: bool = False  # ttlSecondsAfterFinished has passed
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    requeue_after: Optional[float] = None


def _set_condition(conditions: list[Obj], kind: str, status: str, reason: str, message: str, now: datetime) -> bool:
    """Add or update a condition; whether anything changed."""
    for c in conditions:
        if c.get("type") == kind:
            if c.get("status") == status and c.get("reason") == reason:
                return False
            c.update(status=status, reason=reason, message=message, lastProbeTime=rfc3339(now), lastTransitionTime=rfc3339(now))
            return True
    conditions.append({"type": kind, "status": status, "reason": reason, "message": message,
                       "lastProbeTime": rfc3339(now), "lastTransitionTime": rfc3339(now)})
    return True


def pod_for(job: Obj, index: Optional[int]) -> Obj:
    """A pod of ``job`` (its ``index`` under Indexed completion), as kube's Job controller makes it."""
    meta, spec = _meta(job), job.get("spec") or {}
    template = spec.get("template") or {}
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    annotations = dict(tmeta.get("annotations") or {})
    pod_spec = {**(template.get("spec") or {})}
    name = str(meta.get("name"))
    generate = f"{name}-"
    if index is not None:
        annotations[COMPLETION_INDEX] = str(index)
        labels[COMPLETION_INDEX] = str(index)
        generate = f"{name}-{index}-"
        pod_spec.setdefault("hostname", f"{name}-{index}")
        env = {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
        pod_spec["containers"] = [{**c, "env": [*(c.get("env") or []), env]} for c in pod_spec.get("containers") or []]
        pod_spec["initContainers"] = [{**c, "env": [*(c.get("env") or []), env]} for c in pod_spec.get("initContainers") or []] or None
        if pod_spec["initContainers"] is None:
            pod_spec.pop("initContainers")
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}
    pod_meta: Obj = {"generateName": generate, "namespace": meta.get("namespace"), "labels": labels, "ownerReferences": [owner]}
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def backoff_delay(failures: int, base: float = DEFAULT_BACKOFF) -> float:
    """kube's delay before the next pod after ``failures`` failures: base, doubled each time, capped at 6 minutes."""
    return 0.0 if failures <= 0 else min(base * 2 ** (failures - 1), MAX_BACKOFF)


def decide(job: Obj, pods: list[Obj], now: datetime, *, backoff_base: float = DEFAULT_BACKOFF) -> JobDecision:
    meta, spec = _meta(job), job.get("spec") or {}
    uid = str(meta.get("uid"))
    status: Obj = {**(job.get("status") or {})}
    conditions: list[Obj] = [dict(c) for c in status.get("conditions") or []]
    decision = JobDecision()
    owned = [p for p in pods if owned_by(p, uid)]
    active = [p for p in owned if _phase(p) not in ("Succeeded", "Failed") and not _meta(p).get("deletionTimestamp")]
    terminating = [p for p in owned if _phase(p) not in ("Succeeded", "Failed") and _meta(p).get("deletionTimestamp")]
    succeeded = [p for p in owned if _phase(p) == "Succeeded"]
    failed = [p for p in owned if _phase(p) == "Failed"]
    indexed = spec.get("completionMode") == "Indexed"
    completions = spec.get("completions")
    parallelism = int(spec.get("parallelism", 1) or 0)
    backoff_limit = int(spec.get("backoffLimit", 6))

    done = finished(job)
    if done is not None:
        decision.delete = sorted(_meta(p)["name"] for p in active)
        ttl = spec.get("ttlSecondsAfterFinished")
        ended = parse_time(status.get("completionTime")) or parse_time(done.get("lastTransitionTime"))
        if isinstance(ttl, int) and ended is not None:
            left = (ended + timedelta(seconds=ttl) - now).total_seconds()
            if left <= 0:
                decision.delete_job = True
            else:
                decision.requeue_after = left
        return decision

    suspended = bool(spec.get("suspend"))
    changed = False
    if suspended:
        decision.delete = sorted(_meta(p)["name"] for p in active)
        if _set_condition(conditions, "Suspended", "True", "JobSuspended", "Job suspended", now):
            decision.events.append(("Normal", "Suspended", "Job suspended"))
            status.pop("startTime", None)
            changed = True
        active = []
    else:
        if condition(job, "Suspended") and _set_condition(conditions, "Suspended", "False", "JobResumed", "Job resumed", now):
            decision.events.append(("Normal", "Resumed", "Job resumed"))
            changed = True
        if not status.get("startTime"):
            status["startTime"] = rfc3339(now)
            changed = True

    # Which failures count against backoffLimit, and whether one fails the Job outright.
    counted = 0
    fail_message = ""
    for pod in failed:
        action, message = failure_action(job, pod)
        if action == "FailJob" and not fail_message:
            fail_message = message
        if action in ("Count", "FailIndex"):
            counted += 1
    if (spec.get("template") or {}).get("spec", {}).get("restartPolicy") == "OnFailure":
        counted += sum(_restarts(p) for p in active)

    completed_indexes = {i for i in (_index(p) for p in succeeded) if i is not None and (completions is None or i < completions)}
    if indexed:
        complete = completions is not None and len(completed_indexes) >= completions
    elif completions is None:
        complete = bool(succeeded) and not active
    else:
        complete = len(succeeded) >= completions

    start = parse_time(status.get("startTime"))
    deadline = spec.get("activeDeadlineSeconds")
    terminal: Optional[tuple[str, str, str]] = None
    if complete:
        terminal = ("Complete", "", "")
    elif fail_message:
        terminal = ("Failed", "PodFailurePolicy", fail_message)
    elif counted > backoff_limit:
        terminal = ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    elif not suspended and isinstance(deadline, int) and start is not None and (now - start).total_seconds() >= deadline:
        terminal = ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
    elif not suspended and isinstance(deadline, int) and start is not None:
        decision.requeue_after = deadline - (now - start).total_seconds()

    if terminal is not None:
        kind, reason, message = terminal
        _set_condition(conditions, kind, "True", reason, message, now)
        if kind == "Complete":
            status["completionTime"] = rfc3339(now)
            decision.events.append(("Normal", "Completed", "Job completed"))
        else:
            decision.events.append(("Warning", reason, message))
        decision.delete = sorted(_meta(p)["name"] for p in active)
        active = []
        changed = True
    elif not suspended:
        # How many pods should run now, and which indexes they take.
        if indexed:
            busy = {_index(p) for p in active}
            wanted_indexes = [i for i in range(completions or 0) if i not in completed_indexes and i not in busy]
            room = max(parallelism - len(active), 0)
            new: list[Optional[int]] = list(wanted_indexes[:room])
        else:
            remaining = (completions - len(succeeded)) if completions is not None else (0 if succeeded else parallelism)
            want = min(parallelism, max(remaining, 0))
            new = [None] * max(want - len(active), 0)
            extra = sorted(active, key=lambda p: str(_meta(p).get("creationTimestamp")), reverse=True)[:max(len(active) - want, 0)]
            decision.delete = sorted(_meta(p)["name"] for p in extra)
        if new and failed:
            last = max((t for t in (_finished_at(p) for p in failed) if t is not None), default=None)
            wait = backoff_delay(len(failed), backoff_base)
            if last is not None and (now - last).total_seconds() < wait:
                decision.requeue_after = wait - (now - last).total_seconds()
                new = []
        decision.create = [pod_for(job, index) for index in new]

    status.update(active=len(active), succeeded=len(succeeded), failed=len(failed),
                  ready=sum(1 for p in active if _ready(p)), terminating=len(terminating))
    for key in ("active", "succeeded", "failed", "terminating"):
        if not status[key]:
            status.pop(key)
    if indexed and completed_indexes:
        status["completedIndexes"] = compress_indexes(completed_indexes)
    status["uncountedTerminatedPods"] = {}
    if conditions:
        status["conditions"] = conditions
    if changed or status != (job.get("status") or {}):
        decision.status = status
    return decision
