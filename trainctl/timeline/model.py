"""What happened to a training job, as rows on one time axis: the data behind a timeline picture.

Kubernetes keeps no history of a pod's phases; what it keeps is enough to rebuild one: the
pod's ``creationTimestamp``, each container's ``state`` and ``lastState`` with their
``startedAt``/``finishedAt``, ``restartCount``, ``deletionTimestamp``, and the Events that
name the pod or the job. ``build_timeline`` turns those plain dicts (plus watch
observations, when a launcher saw the job live, and log lines, for the world size) into a
``Timeline``: one row per pod with phase spans and restart marks, the job's condition
changes, and the world size over time. It reads no clock (``now`` is passed in) and does no
I/O, so a renderer or a test can take it as it is.

A name is not an identity: a job deleted and created again under the same name leaves pods
(terminating, or orphaned) and Events that match every name the new one uses. So the model
keeps only what belongs to this job: pods it controls (ownerReference uid), Events about it
(involvedObject uid) or about those pods, and no Event a uid does not tie to it from
before its creationTimestamp.

Times are seconds since the epoch (UTC) throughout.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from trainctl.api import constants as c
from trainctl.api import kinds
from trainctl.api.replicas import default_container
from trainctl.controller.reconcile import node_check
from trainctl.controller.reconcile.children import RENDEZVOUS_COMPONENT
from trainctl.controller.reconcile.rendezvous import store_name

# Span phases: the pod phases, plus the two states a pod phase hides.
PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
WAITING = "Waiting"  # between two runs of a restarted container (back-off)
TERMINATING = "Terminating"  # deletionTimestamp set, the pod not gone yet
UNKNOWN = "Unknown"  # runs no snapshot recorded (a container restarted more than once), a pod known only from Events
NODE_CHECK = "Node check"  # the node check's init container runs (annotation trainctl.io/node-check), a part of Pending
PHASES = (PENDING, NODE_CHECK, RUNNING, WAITING, TERMINATING, SUCCEEDED, FAILED, UNKNOWN)

# Lines that tell a world size: the sample script's ``WORLD_SIZE=4`` / ``world_size=4`` and
# torch elastic's rendezvous result ``global_world_sizes=[4, 4]``. ``\b`` keeps out
# ``saved_world_size=`` and ``group_world_size=`` (nodes, not processes).
WORLD_SIZE_PATTERN = re.compile(r"\b(?:WORLD_SIZE|world_size|global_world_sizes)=\[?(\d+)")
# The reference operator's pod events: "Created pod: NAME", "Deleted pod: NAME".
POD_IN_MESSAGE = re.compile(r"\bpod:? ([a-z0-9]([-a-z0-9.]*[a-z0-9])?)\b")
FINISHED = (c.CONDITION_SUCCEEDED, c.CONDITION_FAILED)
# A job condition that becomes True ends these (Kubeflow's setCondition: Running and
# Restarting exclude each other; a finished job is neither).
REPLACES = {
    c.CONDITION_RUNNING: (c.CONDITION_RESTARTING,),
    c.CONDITION_RESTARTING: (c.CONDITION_RUNNING,),
    **{finished: (c.CONDITION_RUNNING, c.CONDITION_RESTARTING) for finished in FINISHED},
}
# Pod Events worth a mark even though their type is Normal.
NOTABLE_NORMAL_REASONS = frozenset({"Killing", "Preempting", "Evicted"})


@dataclass(frozen=True)
class Span:
    phase: str
    start: float
    end: float


@dataclass(frozen=True)
class Mark:
    at: float
    kind: str  # "restart", "recreated", "deleted" or "event"
    reason: str


@dataclass(frozen=True)
class Row:
    """One pod name: every instance of it (a re-created pod keeps its name), in order."""

    pod: str
    replica_type: str
    replica_index: int
    nodes: tuple[str, ...]
    restarts: int
    spans: tuple[Span, ...]
    marks: tuple[Mark, ...]

    @property
    def label(self) -> str:
        where = " → ".join(self.nodes) if self.nodes else "no node"
        return f"{self.pod} ({where})"


@dataclass(frozen=True)
class ConditionChange:
    at: float
    type: str
    status: str
    reason: str = ""


@dataclass(frozen=True)
class WorldSize:
    at: float
    size: int
    source: str  # the pod whose log told it


@dataclass(frozen=True)
class Timeline:
    kind: str
    namespace: str
    name: str
    start: float
    end: float
    rows: tuple[Row, ...]
    conditions: tuple[ConditionChange, ...]
    world_size: tuple[WorldSize, ...]
    job_marks: tuple[Mark, ...] = ()

    @property
    def title(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def condition_spans(self) -> list[tuple[str, Span]]:
        """(type, interval) for each stretch a condition was True, as far as the changes tell.

        A condition that becomes True ends the ones it replaces (``REPLACES``), as the
        operators' status helper does, even when no snapshot showed them False.
        """
        opened: dict[str, ConditionChange] = {}
        spans: list[tuple[str, Span]] = []
        for change in self.conditions:
            ended = [change.type] if change.status != "True" else [t for t in REPLACES.get(change.type, ()) if t in opened]
            for type_ in ended:
                if type_ in opened:
                    spans.append((type_, Span(type_, opened.pop(type_).at, change.at)))
            if change.status == "True":
                opened.setdefault(change.type, change)
        spans.extend((type_, Span(type_, change.at, self.end)) for type_, change in opened.items())
        return sorted(spans, key=lambda item: (item[1].start, item[0]))


@dataclass(frozen=True)
class LogLine:
    pod: str
    at: float
    text: str


@dataclass(frozen=True)
class PodObservation:
    """One pod as a watch delivered it, at the time it was received."""

    at: float
    event: str  # ADDED, MODIFIED, DELETED
    pod: dict[str, Any]


@dataclass(frozen=True)
class JobObservation:
    at: float
    job: dict[str, Any]


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch from an RFC 3339 timestamp (any fraction, ``Z`` or offset)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace("Z", "+00:00")
    match = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", text)
    if not match:
        return None
    head, fraction, zone = match.groups()
    try:
        stamp = datetime.fromisoformat(head + (zone or "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp() + (float(fraction) if fraction else 0.0)


def split_timestamped(line: str) -> tuple[float | None, str]:
    """A ``pods/log?timestamps=true`` line: (its time, the text after the timestamp)."""
    stamp, _, rest = line.partition(" ")
    at = parse_time(stamp)
    return (at, rest) if at is not None else (None, line)


# --- what belongs to the job -----------------------------------------------------------------


def controlled_by(obj: dict[str, Any], uid: str) -> bool:
    """Whether ``obj``'s controller ownerReference is the object with ``uid``."""
    refs = _meta(obj).get("ownerReferences") or []
    return any(ref.get("controller") and ref.get("uid") == uid for ref in refs)


def _select_events(events: Iterable[dict[str, Any]], job: dict[str, Any], pod_uids: set[str]) -> list[dict[str, Any]]:
    """The Events about ``job`` (by uid) and its pods (``pod_uids``, and the gone ones).

    A pod Event of a uid no listing or watch showed is about a gone instance of one of the
    job's pods if it came after the job was created, and no Event of that uid came before:
    otherwise it is about an earlier job's pod of the same name.
    """
    meta = _meta(job)
    uid, name = meta.get("uid") or "", meta.get("name") or ""
    created = parse_time(meta.get("creationTimestamp"))
    dated = [(at, event) for event in events if (at := event_time(event)) is not None]

    def after(at: float) -> bool:
        return created is None or at >= created

    earlier = {(e.get("involvedObject") or {}).get("uid") for at, e in dated if not after(at)} - {None, ""}
    kept = []
    for at, event in dated:
        involved = event.get("involvedObject") or {}
        about = involved.get("uid") or ""
        if involved.get("kind") == "Pod":
            keep = about in pod_uids or (after(at) and about not in earlier)
        elif about:
            keep = about == uid
        else:  # an Event source that leaves the uid out
            keep = after(at) and (involved.get("kind"), involved.get("name")) == (job.get("kind"), name)
        if keep:
            kept.append(event)
    return kept


# --- pods ----------------------------------------------------------------------------------


@dataclass
class _Run:
    """One container instance's run, as a state or lastState told it."""

    started: float | None
    finished: float | None
    reason: str = ""


@dataclass
class _Instance:
    pod: dict[str, Any]
    runs: dict[float | None, _Run] = field(default_factory=dict)
    seen: list[tuple[float, str]] = field(default_factory=list)  # (time, phase) as a watch saw it
    deleted_at: float | None = None


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _main_status(pod: dict[str, Any], container: str) -> dict[str, Any]:
    name = (default_container(pod, container) or {}).get("name") or container
    statuses: list[dict[str, Any]] = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if status.get("name") == name:
            return status
    return statuses[0] if statuses else {}


def _terminated_reason(terminated: dict[str, Any]) -> str:
    reason = terminated.get("reason") or "Terminated"
    code = terminated.get("exitCode")
    return f"{reason} (exit {code})" if code is not None else reason


def _collect_runs(instance: _Instance, pod: dict[str, Any], container: str) -> None:
    status = _main_status(pod, container)
    for key in ("lastState", "state"):
        state = status.get(key) or {}
        if "terminated" in state:
            term = state["terminated"] or {}
            run = _Run(parse_time(term.get("startedAt")), parse_time(term.get("finishedAt")), _terminated_reason(term))
        elif "running" in state:
            run = _Run(parse_time((state["running"] or {}).get("startedAt")), None)
        else:
            continue
        known = instance.runs.get(run.started)
        if known is None or known.finished is None:
            instance.runs[run.started] = run


def _phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or PENDING


def _restarting(pod: dict[str, Any], status: dict[str, Any]) -> bool:
    """Whether the kubelet runs the container again after the run it ended with.

    A container waiting (back-off) after a run is restarting; one whose state is still that
    run's end restarts only as the pod's ``restartPolicy`` says. The local kubelet, like a real
    one, writes a container's end before the pod's phase: a run that ended for good is seen
    ending while the pod is still Running.
    """
    terminated = (status.get("state") or {}).get("terminated")
    if terminated is None:
        return True
    policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
    return policy == "Always" or (policy == "OnFailure" and terminated.get("exitCode") != 0)


def _ending_phase(pod: dict[str, Any]) -> str:
    """The phase a pod whose main container ended for good is about to get (its other containers may still run)."""
    states = [s.get("state") or {} for s in (pod.get("status") or {}).get("containerStatuses") or []]
    if not all("terminated" in state for state in states):
        return RUNNING
    return SUCCEEDED if all((state["terminated"] or {}).get("exitCode") == 0 for state in states) else FAILED


def _instance_spans(inst: _Instance, container: str, end: float) -> tuple[list[Span], list[Mark]]:
    """Phase spans and restart marks of one pod instance, from its creation to ``end``."""
    pod = inst.pod
    created = parse_time(_meta(pod).get("creationTimestamp"))
    created = created if created is not None else (inst.seen[0][0] if inst.seen else end)
    runs = sorted((r for r in inst.runs.values() if r.started is not None), key=lambda r: r.started or 0.0)
    spans: list[Span] = []
    marks: list[Mark] = []
    deleting = parse_time(_meta(pod).get("deletionTimestamp"))
    alive_until = deleting if deleting is not None and created <= deleting < end else end
    cursor = created
    status = _main_status(pod, container)
    # restartCount counts the runs before the latest (it moves on when a run starts, not when
    # one ends): a container with any run on record has had restartCount + 1.
    first_gap = UNKNOWN if runs and int(status.get("restartCount") or 0) + 1 > len(runs) else PENDING
    for i, run in enumerate(runs):
        start = max(run.started or cursor, cursor)
        if start > cursor:
            spans.append(Span(first_gap if i == 0 else WAITING, cursor, start))
        finish = min(run.finished, alive_until) if run.finished is not None else alive_until
        spans.append(Span(RUNNING, start, max(finish, start)))
        cursor = max(finish, start)
        if run.finished is not None and i + 1 < len(runs):
            marks.append(Mark(run.finished, "restart", run.reason))
    phase = _phase(pod)
    if cursor < alive_until:
        if phase in (SUCCEEDED, FAILED):
            after = phase
        elif runs and runs[-1].finished is not None and _restarting(pod, status):
            after = WAITING  # exited, not restarted yet
            marks.append(Mark(runs[-1].finished or cursor, "restart", runs[-1].reason))
        elif runs and runs[-1].finished is not None:
            after = _ending_phase(pod)  # exited for good: the kubelet has not written the pod's phase yet
        elif runs:
            after = RUNNING
        else:
            after = PENDING
        spans.append(Span(after, cursor, alive_until))
    if alive_until < end:
        spans.append(Span(TERMINATING, max(alive_until, cursor), end))
    # A watch may have seen phases that container timestamps cannot tell (no runs at all).
    if not runs:
        spans = _spans_from_seen(inst.seen, created, end) or spans
    reason = (pod.get("status") or {}).get("reason")
    if reason:
        marks.append(Mark(deleting or end, "event", reason))
    checked = _node_check_span(pod, alive_until)
    if checked is not None:
        spans = _carve(spans, checked)
    return [s for s in spans if s.end > s.start], marks


def _node_check_span(pod: dict[str, Any], end: float) -> Span | None:
    """When the node check's init container ran (its runs, first start to last end), if it did."""
    status = next((s for s in (pod.get("status") or {}).get("initContainerStatuses") or []
                   if s.get("name") == node_check.INIT_CONTAINER), None)
    if status is None:
        return None
    starts: list[float] = []
    ends: list[float] = []
    for state in (status.get("lastState") or {}, status.get("state") or {}):
        ran = state.get("terminated") or state.get("running") or {}
        started = parse_time(ran.get("startedAt"))
        if started is not None:
            starts.append(started)
            finished = parse_time(ran.get("finishedAt")) if "terminated" in state else end
            ends.append(finished if finished is not None else end)
    if not starts:
        return None
    return Span(NODE_CHECK, min(starts), max(ends))


def _carve(spans: list[Span], checked: Span) -> list[Span]:
    """``spans`` with the node check drawn over the Pending time it took."""
    out: list[Span] = []
    for span in spans:
        if span.phase != PENDING or checked.end <= span.start or checked.start >= span.end:
            out.append(span)
            continue
        inner = Span(NODE_CHECK, max(span.start, checked.start), min(span.end, checked.end))
        out += [Span(PENDING, span.start, inner.start), inner, Span(PENDING, inner.end, span.end)]
    return out


def _spans_from_seen(seen: list[tuple[float, str]], created: float, end: float) -> list[Span]:
    spans: list[Span] = []
    cursor, phase = created, PENDING
    for at, seen_phase in seen:
        if seen_phase != phase and at >= cursor:
            spans.append(Span(phase, cursor, at))
            cursor, phase = at, seen_phase
    if seen:
        spans.append(Span(phase, cursor, end))
    return spans


def _rows(
    pods: Iterable[dict[str, Any]],
    observations: Iterable[PodObservation],
    *,
    container: str,
    now: float,
) -> dict[str, list[_Instance]]:
    """Instances per pod name, oldest first, with what every snapshot told of them."""
    by_uid: dict[str, _Instance] = {}
    for obs in observations:
        meta = _meta(obs.pod)
        uid = meta.get("uid") or meta.get("name") or ""
        inst = by_uid.setdefault(uid, _Instance(obs.pod))
        inst.pod = obs.pod
        _collect_runs(inst, obs.pod, container)
        if obs.event == "DELETED":
            inst.deleted_at = obs.at
        else:
            inst.seen.append((obs.at, _phase(obs.pod)))
    for pod in pods:
        meta = _meta(pod)
        uid = meta.get("uid") or meta.get("name") or ""
        inst = by_uid.setdefault(uid, _Instance(pod))
        inst.pod = pod
        _collect_runs(inst, pod, container)
    by_name: dict[str, list[_Instance]] = {}
    for inst in by_uid.values():
        by_name.setdefault(_meta(inst.pod).get("name") or "", []).append(inst)
    for instances in by_name.values():
        instances.sort(key=lambda i: parse_time(_meta(i.pod).get("creationTimestamp")) or (i.seen[0][0] if i.seen else now))
    return by_name


def _ending(inst: _Instance) -> str:
    """Why an instance ended, in a few words: "Failed: Error (exit 137)", "Evicted"."""
    reason: str | None = (inst.pod.get("status") or {}).get("reason")
    if reason:
        return reason
    finished = [run for run in inst.runs.values() if run.finished is not None]
    last = max(finished, key=lambda run: run.finished or 0.0).reason if finished else ""
    return f"{_phase(inst.pod)}: {last}" if last else _phase(inst.pod)


def _row(name: str, instances: list[_Instance], *, container: str, now: float) -> Row:
    spans: list[Span] = []
    marks: list[Mark] = []
    nodes: list[str] = []
    restarts = 0
    for i, inst in enumerate(instances):
        following = instances[i + 1] if i + 1 < len(instances) else None
        next_created = parse_time(_meta(following.pod).get("creationTimestamp")) if following else None
        end = inst.deleted_at or next_created or now
        inst_spans, inst_marks = _instance_spans(inst, container, end)
        spans.extend(inst_spans)
        marks.extend(inst_marks)
        if following is not None:
            why = _ending(inst)
            marks.append(Mark(next_created or end, "recreated", why))
            restarts += 1
        elif inst.deleted_at is not None:
            marks.append(Mark(inst.deleted_at, "deleted", "deleted"))
        restarts += int(_main_status(inst.pod, container).get("restartCount") or 0)
        node = (inst.pod.get("spec") or {}).get("nodeName")
        if node and (not nodes or nodes[-1] != node):
            nodes.append(node)
    labels = _meta(instances[-1].pod).get("labels") or {}
    try:
        index = int(labels.get(c.LABEL_REPLICA_INDEX, ""))
    except ValueError:
        index = 0
    # The rendezvous store of an elastic job is no replica; its row is a group of its own.
    component = RENDEZVOUS_COMPONENT if labels.get(c.LABEL_COMPONENT) == RENDEZVOUS_COMPONENT else ""
    return Row(
        pod=name,
        replica_type=_replica_type(labels.get(c.LABEL_REPLICA_TYPE) or component),
        replica_index=index,
        nodes=tuple(nodes),
        restarts=restarts,
        spans=tuple(spans),
        marks=tuple(sorted(marks, key=lambda m: m.at)),
    )


# --- events, conditions, world size ------------------------------------------------------


def event_time(event: dict[str, Any]) -> float | None:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        at = parse_time(event.get(key))
        if at is not None:
            return at
    return parse_time(_meta(event).get("creationTimestamp"))


@dataclass
class _EventsByPod:
    """The job's Events sorted out: marks per pod and on the job, and what tells of pods now gone."""

    marks: dict[str, list[Mark]] = field(default_factory=dict)
    on_job: list[Mark] = field(default_factory=list)
    # Pod name -> (time, "create" or "delete"), from the operator's SuccessfulCreatePod/SuccessfulDeletePod.
    lifecycle: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    # Pod name -> the Events about the pod itself (the scheduler's, the kubelet's).
    about: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _event_marks(events: Iterable[dict[str, Any]], pod_names: set[str]) -> _EventsByPod:
    """Marks per pod, marks on the job, and the Events that tell when pods were created, ran and were deleted.

    ``events`` are the job's own (``_select_events``): any that is not about a Pod is about the job.
    """
    found = _EventsByPod()
    for event in events:
        at = event_time(event)
        if at is None:
            continue
        involved = event.get("involvedObject") or {}
        reason = event.get("reason") or ""
        count = int(event.get("count") or 1)
        text = f"{reason} ×{count}" if count > 1 else reason
        if involved.get("kind") == "Pod":
            found.about.setdefault(involved.get("name") or "", []).append(event)
            if event.get("type") == "Warning" or reason in NOTABLE_NORMAL_REASONS:
                found.marks.setdefault(involved.get("name") or "", []).append(Mark(at, "event", text))
            continue
        match = POD_IN_MESSAGE.search(event.get("message") or "")
        if match and reason in ("SuccessfulCreatePod", "SuccessfulDeletePod"):
            found.lifecycle.setdefault(match.group(1), []).append((at, "create" if reason == "SuccessfulCreatePod" else "delete"))
            if reason == "SuccessfulDeletePod":
                found.marks.setdefault(match.group(1), []).append(Mark(at, "deleted", "deleted by the operator"))
        elif event.get("type") == "Warning":
            found.on_job.append(Mark(at, "event", text))
    return found


def _first_time(event: dict[str, Any]) -> float | None:
    """When an Event first happened (a repeated one keeps its first time apart from its last)."""
    return parse_time(event.get("firstTimestamp")) or parse_time(event.get("eventTime")) or event_time(event)


def _gone_row(name: str, job: str, lifecycle: list[tuple[float, str]], about: list[dict[str, Any]], marks: list[Mark], now: float) -> Row:
    """A pod no listing or watch showed (deleted by now), rebuilt from the Events that outlive it.

    The operator's Events tell when it was created and deleted; the scheduler's ``Scheduled``
    tells its node, the kubelet's ``Started`` when it ran and ``Killing`` when it was stopped.
    A pod that left only the operator's Events is drawn Unknown between them.
    """
    steps = sorted(lifecycle)
    creates = [at for at, what in steps if what == "create"]
    deleted = bool(steps) and steps[-1][1] == "delete"
    nodes: list[str] = []
    changes: list[tuple[float, str]] = [(at, PENDING if what == "create" else TERMINATING) for at, what in steps]
    for event in sorted(about, key=lambda e: _first_time(e) or 0.0):
        node = _scheduled_node(event)
        if node and (not nodes or nodes[-1] != node):
            nodes.append(node)
        at, reason = _first_time(event), event.get("reason") or ""
        if at is not None and reason in ("Started", "Killing"):
            changes.append((at, RUNNING if reason == "Started" else TERMINATING))
    changes.sort(key=lambda change: change[0])
    end = max(changes[-1][0], steps[-1][0]) if deleted else now
    if not any(phase == RUNNING for _, phase in changes):
        # Only the operator's word: the pod existed from its creation to its deletion, doing what is unknown.
        changes = [(changes[0][0], UNKNOWN)]
    ends = [at for at, _ in changes[1:]] + [end]
    spans = [Span(phase, at, until) for (at, phase), until in zip(changes, ends, strict=True)]
    replica_type, index = _replica_from_name(name, job)
    return Row(
        name, replica_type, index, tuple(nodes), max(len(creates) - 1, 0),
        tuple(s for s in spans if s.end > s.start), tuple(sorted(marks, key=lambda m: m.at)),
    )


SCHEDULED_TO = re.compile(r"\bto (\S+)$")


def _scheduled_node(event: dict[str, Any]) -> str:
    """The node a ``Scheduled`` Event names, or the node a kubelet's Event came from."""
    if event.get("reason") == "Scheduled":
        match = SCHEDULED_TO.search(event.get("message") or "")
        return match.group(1) if match else ""
    source = event.get("source") or {}
    return str(source.get("host") or "") if source.get("component") == "kubelet" else ""


def _condition_changes(job: dict[str, Any], observations: Iterable[JobObservation]) -> list[ConditionChange]:
    """Every distinct (type, status, lastTransitionTime) the job's snapshots carried.

    Succeeded and Failed flip Running to False and keep its reason and times (kubeflow's
    ``filterOutCondition``), so a False Running whose reason still says running tells when
    the job began to run; the terminal condition ends it (``REPLACES``).
    """
    seen: dict[tuple[str, str, float], ConditionChange] = {}
    for snapshot in [*(o.job for o in observations), job]:
        conditions = (snapshot.get("status") or {}).get("conditions") or []
        finished = any(cond.get("type") in FINISHED and cond.get("status") == "True" for cond in conditions)
        for cond in conditions:
            at = parse_time(cond.get("lastTransitionTime")) or parse_time(cond.get("lastUpdateTime"))
            if at is None or not cond.get("type"):
                continue
            status, reason = cond.get("status") or "", cond.get("reason") or ""
            if finished and cond["type"] == c.CONDITION_RUNNING and status == "False" and reason.endswith(c.CONDITION_RUNNING):
                status = "True"  # flipped, not set: it says when Running became True
            seen.setdefault((cond["type"], status, at), ConditionChange(at, cond["type"], status, reason))
    return sorted(seen.values(), key=lambda ch: (ch.at, ch.type))


def world_size_series(lines: Iterable[LogLine]) -> list[WorldSize]:
    """The world size each time it changed, from log lines that state it."""
    points: list[WorldSize] = []
    for line in sorted(lines, key=lambda ln: ln.at):
        match = WORLD_SIZE_PATTERN.search(line.text)
        if match is None:
            continue
        size = int(match.group(1))
        if not points or points[-1].size != size:
            points.append(WorldSize(line.at, size, line.pod))
    return points


# --- the whole ------------------------------------------------------------------------------


def build_timeline(
    *,
    job: dict[str, Any],
    pods: Iterable[dict[str, Any]],
    now: float,
    container: str = "",
    events: Iterable[dict[str, Any]] = (),
    log_lines: Iterable[LogLine] = (),
    pod_observations: Iterable[PodObservation] = (),
    job_observations: Iterable[JobObservation] = (),
) -> Timeline:
    """The timeline of ``job`` up to ``now``.

    ``pods`` are the pods as they are now (a listing); ``pod_observations`` and
    ``job_observations`` are what a watch delivered while the job ran, when someone was
    watching; ``container`` names the container whose restarts count (default: the first).
    Any of them, and ``events``, may hold what belongs to an earlier job of the same name:
    only this job's (its uid's) is kept.
    """
    meta = _meta(job)
    uid = meta.get("uid") or ""
    pods = [pod for pod in pods if controlled_by(pod, uid)]
    pod_observations = [obs for obs in pod_observations if controlled_by(obs.pod, uid)]
    job_observations = [obs for obs in job_observations if _meta(obs.job).get("uid") == uid]
    instances = _rows(pods, pod_observations, container=container, now=now)
    pod_uids = {_meta(pod).get("uid") or "" for pod in [*pods, *(obs.pod for obs in pod_observations)]}
    found = _event_marks(_select_events(events, job, pod_uids), set(instances))
    rows = []
    for name, insts in instances.items():
        row = _row(name, insts, container=container, now=now)
        extra = found.marks.get(name, [])
        if extra:
            row = Row(row.pod, row.replica_type, row.replica_index, row.nodes, row.restarts, row.spans, tuple(sorted(row.marks + tuple(extra), key=lambda m: m.at)))
        rows.append(row)
    for name, steps in found.lifecycle.items():
        if name not in instances:  # a pod gone by now: the Events still tell when it lived, where and how
            rows.append(_gone_row(name, meta.get("name") or "", steps, found.about.get(name, []), found.marks.get(name, []), now))
    rows.sort(key=lambda r: (_type_order(r.replica_type), r.replica_type, r.replica_index, r.pod))

    conditions = _condition_changes(job, job_observations)
    world = world_size_series(log_lines)
    created = parse_time(meta.get("creationTimestamp"))
    starts = [t for t in [created, *(s.start for r in rows for s in r.spans), *(ch.at for ch in conditions)] if t is not None]
    start = min(starts) if starts else now
    end = max([now, *(s.end for r in rows for s in r.spans)])
    return Timeline(
        kind=job.get("kind") or "",
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        start=start,
        end=end,
        rows=tuple(rows),
        conditions=tuple(conditions),
        world_size=tuple(world),
        job_marks=tuple(sorted(set(found.on_job), key=lambda m: m.at)),  # one mark per (time, reason)
    )


def _replica_from_name(pod: str, job: str) -> tuple[str, int]:
    """("Worker", 3) from "JOB-worker-3", the operators' pod names, ("rendezvous", 0) from the
    store's; ("", 0) if it is neither."""
    if pod == store_name(job):
        return RENDEZVOUS_COMPONENT, 0
    match = re.fullmatch(re.escape(job) + r"-([a-z]+)-(\d+)", pod)
    if match is None:
        return "", 0
    return _replica_type(match.group(1)), int(match.group(2))


def _replica_type(value: str) -> str:
    """The spec's spelling ("Worker") of a replica type, which labels and pod names lower-case."""
    known = {t.lower(): t for t in _replica_types()}
    return known.get(value.lower(), value)


def _type_order(replica_type: str) -> int:
    order = _replica_types()
    return order.index(replica_type) if replica_type in order else len(order)


def _replica_types() -> tuple[str, ...]:
    return _merged_order(tuple(k.replica_types for k in kinds.KINDS))


@lru_cache(maxsize=8)
def _merged_order(order_of: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    """Every registered kind's replica types in one order that keeps each kind's own.

    Coordinators before the replicas they coordinate, whichever kind the job is: Master,
    Scheduler, PS, Worker. Of the types that may come next, the first registered comes
    first; should two kinds disagree, the first registered type not yet placed goes next.
    """
    pending = list(dict.fromkeys(t for types in order_of for t in types))
    before = {t: {e for types in order_of if t in types for e in types[: types.index(t)]} for t in pending}
    placed: list[str] = []
    while pending:
        ready = next((t for t in pending if before[t] <= set(placed)), pending[0])
        placed.append(ready)
        pending.remove(ready)
    return tuple(placed)
