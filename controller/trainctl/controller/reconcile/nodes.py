"""Lost nodes: which of a job's pods sit on a node that has been not Ready for too long.

Kubernetes marks an unreachable node Unknown after ~40 s and evicts its pods only after the
300 s default toleration; the pods then stay Terminating until the node comes back
(kubeflow/training-operator#2072). trainctl does not wait: a pod whose node has been not
Ready for longer than the node-lost grace is force-deleted and replaced. This module only
decides, from plain Node and Pod dicts and a ``now`` passed in.

"Not Ready since" is the Ready condition's lastTransitionTime when that condition is
False or Unknown, else the earliest timeAdded of an unreachable/not-ready taint.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from trainctl.api import constants as c
from trainctl.api.durations import parse_duration
from trainctl.controller.reconcile.children import parse_time

TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
_NOT_READY_TAINTS = (TAINT_UNREACHABLE, TAINT_NOT_READY)


def grace_seconds(annotations: dict[str, Any], default: Optional[float]) -> tuple[Optional[float], Optional[str]]:
    """The job's node-lost grace (None: never) and a problem with its annotation, if any."""
    value = annotations.get(c.ANNOTATION_NODE_LOST_GRACE)
    if value is None:
        return default, None
    text = str(value)
    if text.strip().lower() == c.NODE_LOST_GRACE_NEVER:
        return None, None
    seconds = parse_duration(text)
    if seconds is None:
        return default, f"annotation {c.ANNOTATION_NODE_LOST_GRACE}={text!r} is not a duration or \"never\"; using {default}s"
    return seconds, None


@dataclass(frozen=True)
class NotReady:
    """Why and since when a node is not Ready."""

    since: datetime
    why: str


def not_ready(node: dict[str, Any]) -> Optional[NotReady]:
    """When ``node`` stopped being Ready, or None when it is Ready (or says nothing)."""
    status = node.get("status") or {}
    ready = next((cond for cond in status.get("conditions") or [] if cond.get("type") == "Ready"), None)
    if ready is not None and ready.get("status") != "True":
        since = parse_time(ready.get("lastTransitionTime"))
        if since is not None:
            return NotReady(since, f"Ready={ready.get('status')}")
    tainted = [
        (parse_time(t.get("timeAdded")), t["key"])
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("key") in _NOT_READY_TAINTS and t.get("effect") in ("NoSchedule", "NoExecute")
    ]
    dated = sorted((since, key) for since, key in tainted if since is not None)
    if dated:
        return NotReady(dated[0][0], f"tainted {dated[0][1]}")
    return None


@dataclass(frozen=True)
class LostPod:
    pod: dict[str, Any]
    node: str
    cause: str  # for the delete Event: which node, since when, why


def find_lost(
    pods: list[dict[str, Any]], nodes: dict[str, dict[str, Any]], now: datetime, grace: Optional[float]
) -> tuple[list[LostPod], list[float]]:
    """The pods lost with their node, and the seconds until other pods' grace expires."""
    if grace is None:
        return [], []
    lost, waits = [], []
    verdicts: dict[str, Optional[NotReady]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or node_name not in nodes:
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Succeeded":
            continue  # its work is done and counts, being deleted or not: nothing was lost with the node
        if phase == "Failed" and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue  # nothing runs there any more and nobody deletes it: the usual rules apply
        if node_name not in verdicts:
            verdicts[node_name] = not_ready(nodes[node_name])
        verdict = verdicts[node_name]
        if verdict is None:
            continue
        # A pod placed there after the node went down has not been lost for longer than it exists.
        since = max(verdict.since, parse_time((pod.get("metadata") or {}).get("creationTimestamp")) or verdict.since)
        left = (since - now).total_seconds() + grace
        if left > 0:
            waits.append(left)
            continue
        cause = (
            f"force-deleted: on node {node_name}, not Ready ({verdict.why}) since "
            f"{verdict.since.strftime('%Y-%m-%dT%H:%M:%SZ')}, longer than the node-lost grace of {grace:g}s"
        )
        lost.append(LostPod(pod, node_name, cause))
    return lost, waits
