"""Plain API objects for the timeline's tests: a job, its pods and Events, at chosen seconds.

Times are seconds after ``T0``; ``at(s)`` is the RFC 3339 text the API would carry.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from trainctl.api import constants as c

T0 = datetime(2026, 1, 2, 3, 0, 0, tzinfo=timezone.utc)
EPOCH0 = T0.timestamp()
JOB_UID = "job-uid"


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def job(name: str = "mnist", *conditions: tuple[str, str, float], uid: str = JOB_UID, created: float = 0) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "creationTimestamp": at(created)},
        "status": {
            "conditions": [
                {"type": t, "status": s, "reason": f"PyTorchJob{t}", "lastTransitionTime": at(when), "lastUpdateTime": at(when)}
                for t, s, when in conditions
            ]
        },
    }


def terminated(started: float, finished: float, *, reason: str = "Completed", code: int = 0) -> dict[str, Any]:
    return {"terminated": {"startedAt": at(started), "finishedAt": at(finished), "reason": reason, "exitCode": code}}


def running(started: float) -> dict[str, Any]:
    return {"running": {"startedAt": at(started)}}


def pod(
    name: str,
    *,
    replica_type: str = "Worker",
    index: int = 0,
    uid: str | None = None,
    created: float = 1,
    phase: str = "Running",
    node: str = "node-a",
    state: dict[str, Any] | None = None,
    last_state: dict[str, Any] | None = None,
    restarts: int = 0,
    deleting: float | None = None,
    owner: str = JOB_UID,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": uid or f"{name}-uid",
        "creationTimestamp": at(created),
        "labels": {c.LABEL_JOB_NAME: "mnist", c.LABEL_REPLICA_TYPE: replica_type.lower(), c.LABEL_REPLICA_INDEX: str(index)},
        "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist", "uid": owner, "controller": True}],
    }
    if deleting is not None:
        meta["deletionTimestamp"] = at(deleting)
    status: dict[str, Any] = {"phase": phase}
    if state is not None:
        status["containerStatuses"] = [{"name": "pytorch", "state": state, "lastState": last_state or {}, "restartCount": restarts}]
    # The operators label replica types in lower case ("worker").
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "pytorch"}]}
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy
    return {"metadata": meta, "spec": spec, "status": status}


def event(
    reason: str, message: str, when: float, *, kind: str = "PyTorchJob", name: str = "mnist", uid: str | None = None, type_: str = "Normal", count: int = 1
) -> dict[str, Any]:
    """An Event about the job (``JOB_UID``) or, with ``kind="Pod"``, about the pod ``pod(name)`` makes."""
    uid = uid or (f"{name}-uid" if kind == "Pod" else JOB_UID)
    return {
        "metadata": {"name": f"{name}.{reason}", "namespace": "default"},
        "involvedObject": {"kind": kind, "name": name, "namespace": "default", "uid": uid},
        "reason": reason,
        "message": message,
        "type": type_,
        "count": count,
        "lastTimestamp": at(when),
    }
