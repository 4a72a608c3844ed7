"""A frozen node thaws: the pods still in the API run on, the others never run again.

``trainctl local node freeze`` stops the kubelet and every process of its pods (SIGSTOP).
Meanwhile the controller may find the node lost and force-delete its pods, and their
replacements train elsewhere. A real machine resumes everything at once and its kubelet
kills the processes of such pods only once it has caught up with the API server: long
enough for an old training process to print a step, write a checkpoint over a newer one
or join the next rendezvous. The embedded node resumes its kubelet alone
(:func:`trainctl.cluster.faults.freeze.thaw_node`); the SIGCONT tells the kubelet, which
lists its pods afresh (its informer may still hold pods deleted while it was stopped),
kills the processes of those gone from the API while they are still stopped, and resumes
the rest. When the API server does not answer, the pods resume as they are: a node cut
off from the API keeps running its pods.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Optional

from trainctl.cluster.kubelet.runtime import ProcessRecord
from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import PODS

log = logging.getLogger(__name__)

LIST_ATTEMPTS = 5
LIST_RETRY_SECONDS = 0.5


def bound_pod_uids(client: KubeClient, node_name: str) -> Optional[set[str]]:
    """The uids of the pods the API server has bound to ``node_name``; None when it does not
    answer (after a few tries)."""
    for attempt in range(LIST_ATTEMPTS):
        try:
            pods, _ = client.list(PODS, field_selector=f"spec.nodeName={node_name}")
        except Exception as exc:  # API errors, or urllib3's while the API server restarts
            log.warning("listing the node's pods after a freeze (attempt %d): %s", attempt + 1, exc)
            time.sleep(LIST_RETRY_SECONDS)
            continue
        return {str(uid) for pod in pods if (uid := (pod.get("metadata") or {}).get("uid"))}
    return None


def to_resume(records: Iterable[ProcessRecord], present: Optional[set[str]]) -> list[ProcessRecord]:
    """The recorded process groups that may run again: those of pods still in the API
    (``present``; None: unknown, so all of them)."""
    return [record for record in records if present is None or record.pod_uid in present]
