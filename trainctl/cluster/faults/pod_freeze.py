"""Pod faults: one pod's processes stopped while its node stays healthy (a hung rank).

``trainctl local pod freeze POD`` sends SIGSTOP to every process of the pod, on whichever node
runs it: each container's process group and whatever left it (torchrun's workers), as its
kubelet recorded them. Nothing else changes: the kubelet still reports the pod Running, the
node Ready; the pod's log stops growing, its processes show state ``T``. ``thaw`` sends
SIGCONT. The kubelet does not remember the freeze: a container it restarts meanwhile starts
unfrozen, and thawing the pod's node resumes the pod too.

A pod fault is a :class:`PodFault` in :data:`POD_FAULTS` (the ``trainctl local pod``
subcommands and ``LocalCluster.pod_fault``), applied to the cluster's directory and the pod's
namespace and name.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainctl.cluster.faults.processes import pod_processes
from trainctl.cluster.kubelet.runtime import signal_live
from trainctl.cluster.machines import NodeError, read_nodes
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import PODS


@dataclass(frozen=True)
class PodFault:
    """One kind of pod fault (or of mending one); ``outcome`` is said afterwards, ``{pod}`` filled in."""

    name: str
    help: str
    outcome: str
    apply: Callable[[Path, str, str], None]  # (cluster directory, namespace, pod name)
    undo: str = ""

    def __call__(self, directory: Path, namespace: str, pod: str) -> None:
        self.apply(directory, namespace, pod)


def _pod_placement(directory: Path, namespace: str, name: str) -> tuple[str, str]:
    """The pod's uid and node, from the API server."""
    client = KubeClient.from_kubeconfig(str(directory / "kubeconfig"), qps=0, max_attempts=3)
    try:
        pod = client.get(PODS, namespace, name)
    except ApiError as exc:
        raise NodeError(f"pod {namespace}/{name}: {'not found' if exc.code == 404 else exc}") from None
    finally:
        client.close()
    node = pod.get("spec", {}).get("nodeName")
    if not node:
        raise NodeError(f"pod {namespace}/{name} is not on a node yet")
    if node not in {spec.name for spec in read_nodes(directory)}:
        raise NodeError(f"pod {namespace}/{name} runs on {node}, which has no processes here (a hollow node?)")
    return str(pod["metadata"]["uid"]), str(node)


def signal_pod(directory: Path, namespace: str, name: str, signum: int) -> int:
    """Signal every live process group of the pod (and what left them); how many."""
    uid, node = _pod_placement(directory, namespace, name)
    records = pod_processes(directory, node, uid)
    count = signal_live(records, signum)
    if not count:
        raise NodeError(f"pod {namespace}/{name} has no running process on node {node}")
    return count


def freeze_pod(directory: Path, namespace: str, name: str) -> None:
    signal_pod(directory, namespace, name, signal.SIGSTOP)


def thaw_pod(directory: Path, namespace: str, name: str) -> None:
    signal_pod(directory, namespace, name, signal.SIGCONT)


FREEZE_POD = PodFault("freeze", "the pod hangs: its processes are stopped (SIGSTOP), its node stays healthy",
                      "Pod {pod} frozen: its processes are stopped (undo: trainctl local pod thaw).", freeze_pod,
                      undo="thaw")
THAW_POD = PodFault("thaw", "a frozen pod resumes (SIGCONT)", "Pod {pod} thawed.", thaw_pod)

POD_FAULTS: dict[str, PodFault] = {fault.name: fault for fault in (FREEZE_POD, THAW_POD)}
