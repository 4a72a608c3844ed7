"""Read what a cluster still knows about a training job: the job, its pods, their Events and logs.

This is the I/O half of ``trainctl timeline``; ``model.build_timeline`` does the rest. Pods
are found by the ``training.kubeflow.org/job-name`` label and kept only when the job
controls them (a leftover of an earlier job with the same name is not this job's history);
Events by the job's uid, and the pods' by name for the model to sort out. Logs are
read with timestamps, the previous container instance's too, for the lines that tell the
world size; a pod that is gone, or a log that cannot be read, is skipped.
"""

from __future__ import annotations

from typing import Any

from trainctl.api import constants as c
from trainctl.api.kinds import JobKind
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import EVENTS, PODS
from trainctl.launch.job_kinds import lead_replica
from trainctl.timeline import model

# World size is the same on every pod of a round; a few pods' logs tell it, 100 would be slow.
MAX_LOGGED_PODS = 8


def owned_pods(client: KubeClient, job: dict[str, Any]) -> list[dict[str, Any]]:
    meta = job["metadata"]
    pods, _ = client.list(PODS, meta["namespace"], label_selector=f"{c.LABEL_JOB_NAME}={meta['name']}")
    return [pod for pod in pods if model.controlled_by(pod, meta["uid"])]


def job_events(client: KubeClient, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The Events about the job (by its uid) and about pods named after it (Events outlive their pods).

    Pod names repeat from one job to the next of the same name; ``model.build_timeline``
    keeps this job's pods' Events only.
    """
    meta = job["metadata"]
    try:
        about_job, _ = client.list(EVENTS, meta["namespace"], field_selector=f"involvedObject.uid={meta['uid']}")
        about_pods, _ = client.list(EVENTS, meta["namespace"], field_selector="involvedObject.kind=Pod")
    except ApiError:
        return []  # Events add marks; a timeline without them is still a timeline
    prefix = meta["name"] + "-"
    return about_job + [e for e in about_pods if ((e.get("involvedObject") or {}).get("name") or "").startswith(prefix)]


def timeline(client: KubeClient, kind: JobKind, job: dict[str, Any], *, now: float) -> model.Timeline:
    """The timeline of ``job`` as the cluster holds it at ``now``: its pods, their Events and logs."""
    pods = owned_pods(client, job)
    events = job_events(client, job)
    lines = log_lines(client, kind, job, pods)
    return model.build_timeline(job=job, pods=pods, now=now, container=kind.container, events=events, log_lines=lines)


def log_lines(client: KubeClient, kind: JobKind, job: dict[str, Any], pods: list[dict[str, Any]]) -> list[model.LogLine]:
    """Timestamped lines of the lead pod first, then others, current and previous instances."""
    lead_type, lead_index = lead_replica(job, kind)

    def lead_first(pod: dict[str, Any]) -> tuple[bool, str]:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        is_lead = labels.get(c.LABEL_REPLICA_TYPE) == lead_type and labels.get(c.LABEL_REPLICA_INDEX) == lead_index
        return (not is_lead, (pod.get("metadata") or {}).get("name") or "")

    lines: list[model.LogLine] = []
    for pod in sorted(pods, key=lead_first)[:MAX_LOGGED_PODS]:
        name = pod["metadata"]["name"]
        restarted = any(int(s.get("restartCount") or 0) for s in (pod.get("status") or {}).get("containerStatuses") or [])
        for previous in (True, False) if restarted else (False,):
            lines.extend(_read_log(client, pod["metadata"]["namespace"], name, kind.container, previous=previous))
    return lines


def _read_log(client: KubeClient, namespace: str, pod: str, container: str, *, previous: bool) -> list[model.LogLine]:
    try:
        stream = client.log(namespace, pod, container=container, previous=previous, timestamps=True)
        try:
            raw = list(stream)
        finally:
            stream.close()
    except ApiError:
        return []  # gone, never started, or no previous instance
    lines = []
    for text in raw:
        at, rest = model.split_timestamped(text)
        if at is not None:
            lines.append(model.LogLine(pod, at, rest))
    return lines
