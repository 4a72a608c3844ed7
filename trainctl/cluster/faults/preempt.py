"""``preempt``: the machine is reclaimed with notice, as a cloud reclaims a spot instance.

A cloud gives a spot (preemptible) machine a notice before taking it back (GCE 30 s, AWS two
minutes); its Kubernetes integrations taint the Node so nothing new lands there and drain its
pods so they can checkpoint (GKE's ``cloud.google.com/impending-node-termination``, the AWS
Node Termination Handler's ``aws-node-termination-handler/spot-itn``). ``preempt`` does the
same in one taint, ``trainctl.io/spot-reclaim=<deadline>:NoExecute`` (the deadline in seconds
since the epoch): the scheduler places nothing there and the taint manager evicts every pod
that does not tolerate it, marked ``DisruptionTarget`` (``DeletionByTaintManager``), so each
gets SIGTERM and its ``terminationGracePeriodSeconds``. ``node.kubernetes.io/out-of-service``
is not used: it says a node has shut down already, not that it will.

When the notice is up the machine is gone: the node is killed as ``kill`` does (what is still
running dies with it) and its Node object is deleted, as a cloud's node controller deletes the
Node of an instance that no longer exists. ``trainctl local node start`` brings the machine
back as a new instance: its kubelet registers a fresh, untainted Node.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from trainctl.api.constants import TAINT_SPOT_RECLAIM
from trainctl.api.durations import parse_duration
from trainctl.cluster.faults.fault import FaultFlag, NodeFault, NodeHost
from trainctl.cluster.faults.kill import kill
from trainctl.cluster.machines import NodeError, find_node, node_state
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import NODES

DEFAULT_NOTICE = "30s"  # a GCE spot VM's notice


def reclaim_taint(deadline: float) -> dict[str, str]:
    return {"key": TAINT_SPOT_RECLAIM, "value": str(int(deadline)), "effect": "NoExecute"}


def taint_for_reclaim(client: KubeClient, name: str, deadline: float) -> None:
    """Add the reclaim taint to Node ``name`` (replacing an earlier one), keeping its others."""
    node = client.get(NODES, None, name)
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != TAINT_SPOT_RECLAIM]
    patch = {"metadata": {"resourceVersion": node["metadata"].get("resourceVersion")},
             "spec": {"taints": [*taints, reclaim_taint(deadline)]}}
    client.patch(NODES, None, name, patch)


def notice_seconds(notice: Optional[str]) -> float:
    seconds = parse_duration(notice or DEFAULT_NOTICE)
    if seconds is None:
        raise NodeError(f"--notice {notice!r} is not a duration (such as 30s or 2m)")
    return seconds


def preempt_node(host: NodeHost, name: str, notice: float, client: KubeClient) -> None:
    """Taint ``name`` for a reclaim, wait out the notice, then kill it and delete its Node."""
    find_node(host.directory, name)
    if node_state(host.directory, name):
        raise NodeError(f"node {name} is {node_state(host.directory, name)}")
    deadline = time.time() + notice
    try:
        taint_for_reclaim(client, name, deadline)
    except ApiError as exc:
        raise NodeError(f"node {name}: cannot taint it for the reclaim: {exc}") from None
    time.sleep(max(0.0, deadline - time.time()))
    kill(host, name)
    try:
        client.delete(NODES, None, name)
    except ApiError as exc:
        raise NodeError(f"node {name} was killed, but its Node was not deleted: {exc}") from None


def preempt(host: NodeHost, node: str, notice: Optional[str] = None) -> None:
    seconds = notice_seconds(notice)
    client = KubeClient.from_kubeconfig(str(_kubeconfig(host.directory)), qps=0)
    try:
        preempt_node(host, node, seconds, client)
    finally:
        client.close()


def _kubeconfig(directory: Path) -> Path:
    return directory / "kubeconfig"


PREEMPT = NodeFault(
    "preempt",
    "the machine is reclaimed with notice (a spot instance): its Node is tainted "
    f"{TAINT_SPOT_RECLAIM}:NoExecute so its pods get SIGTERM and their grace period, then it dies",
    "Node {node} reclaimed: its pods were given the notice, the machine is gone "
    "(trainctl local node start brings it back as a new Node).",
    preempt, undo="start",
    flags=(FaultFlag("--notice", "notice", f"how long the machine has before it is gone (default {DEFAULT_NOTICE})",
                     "DURATION"),),
)
