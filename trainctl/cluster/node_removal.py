"""Nodes the last run of a cluster started and this run does not: removed, and their pods failed.

``trainctl local up --nodes 1`` on a directory that last ran two nodes finds the second Node
still in ``state.db``, Ready as its kubelet last said, with its pods Running; but no kubelet
will run them again, and their processes are gone (the new ``up`` or ``down`` killed them).
Left alone, the scheduler would bind new pods to that node until the node lifecycle
controller marked it Unknown, and a pod no job owns would stay Running, then Terminating,
for ever. So before the scheduler starts, the supervisor does for each such node what a
restarted kubelet does for its own pods and what kube-controller-manager's pod garbage
collector does once a machine is gone: each of its live pods is reported ``Failed``
(``reason: NodeRemoved``, its running containers terminated with 137), each one already
terminating is deleted at once (no kubelet is left to finish it), and the Node is deleted
(its Lease goes with it, through its ownerReference). Nodes the user created by hand are
not the supervisor's and stay.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from trainctl.cluster.kubelet.pod_admission import processes_gone_status
from trainctl.cluster.podutil import is_terminal
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import NODES, PODS

log = logging.getLogger(__name__)

REASON = "NodeRemoved"


def remove_nodes(client: KubeClient, names: Iterable[str]) -> list[str]:
    """Remove each Node of ``names`` after failing (or deleting, when terminating) its pods;
    returns the pods that were failed or deleted, as ``namespace/name``."""
    settled: list[str] = []
    for node in names:
        message = f"Node {node} is no longer part of the local cluster; the pod's processes were stopped."
        pods = client.list(PODS, field_selector=f"spec.nodeName={node}")[0]
        for pod in pods:
            meta = pod["metadata"]
            if is_terminal(pod):
                continue
            try:
                if meta.get("deletionTimestamp"):
                    client.delete(PODS, meta.get("namespace"), meta["name"], uid=meta.get("uid"), grace_period_seconds=0)
                else:
                    client.patch(PODS, meta.get("namespace"), meta["name"],
                                 {"metadata": {"uid": meta.get("uid")},
                                  "status": processes_gone_status(pod, REASON, message)}, subresource="status")
            except ApiError as exc:
                if exc.code not in (404, 409):  # gone, or its name taken by a new pod meanwhile
                    raise
                continue
            settled.append(f"{meta.get('namespace')}/{meta['name']}")
        client.delete(NODES, None, node)
        log.info("removed node %s", node)
    return settled
