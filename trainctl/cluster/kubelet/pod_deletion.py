"""Deleting pods: graceful termination, force deletion, and their logs' garbage collection.

A pod with a deletionTimestamp is stopped (SIGTERM, SIGKILL after its grace period) and
then removed from the API for good; a pod that vanished from the API (force deletion)
loses its processes at once; the logs of this node's pods no longer in the API go with
them, as the real kubelet's garbage collection does. Each termination runs in a thread of its own so
a long grace period never holds up the node.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from trainctl.cluster.kubelet.pod_worker import PodWorker
from trainctl.cluster.kubelet.runtime import pod_directory_node
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import PODS

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def grace_seconds(pod: Obj) -> float:
    """The grace period a deletion gave the pod, else the pod's own."""
    grace = pod.get("metadata", {}).get("deletionGracePeriodSeconds")
    if grace is None:
        grace = pod.get("spec", {}).get("terminationGracePeriodSeconds", 30)
    return float(grace) if isinstance(grace, (int, float)) and not isinstance(grace, bool) else 0.0


class Terminator:
    """The pods being terminated, and the threads that do it."""

    def __init__(self, client: KubeClient, pods_dir: Path, node_name: str, on_done: Callable[[], None]) -> None:
        self._client = client
        self._pods_dir = pods_dir
        self._node_name = node_name
        self._on_done = on_done
        self._lock = threading.Lock()
        self._deleting: set[str] = set()

    def forget(self, keep: set[str]) -> None:
        with self._lock:
            self._deleting &= keep

    def kill_vanished(self, present: set[str], workers: dict[str, PodWorker]) -> None:
        """A pod that vanished from the API (force deletion) loses its processes at once."""
        for uid, worker in workers.items():
            if uid not in present and self._claim(uid):
                self._spawn(worker, None, f"kill-{uid}")

    def delete(self, pod: Obj, worker: Optional[PodWorker]) -> None:
        """Stop a pod marked for deletion, then remove it from the API."""
        if self._claim(pod["metadata"]["uid"]):
            self._spawn(worker, pod, f"terminate-{pod['metadata'].get('name')}")

    def remove_logs(self, keep: set[str]) -> None:
        """Container logs go with their pod: remove the directories of this node's pods not
        in ``keep`` (another node's pod may be missing from this node's cache for a moment)."""
        if not self._pods_dir.is_dir():
            return
        for entry in self._pods_dir.iterdir():
            if entry.name not in keep and pod_directory_node(entry) == self._node_name:
                shutil.rmtree(entry, ignore_errors=True)

    def _claim(self, uid: str) -> bool:
        with self._lock:
            if uid in self._deleting:
                return False
            self._deleting.add(uid)
            return True

    def _spawn(self, worker: Optional[PodWorker], pod: Optional[Obj], name: str) -> None:
        threading.Thread(target=self._terminate, args=(worker, pod), daemon=True, name=name).start()

    def _terminate(self, worker: Optional[PodWorker], pod: Optional[Obj]) -> None:
        """Stop the pod's processes; then, if it is still in the API, remove it for good."""
        try:
            if worker is not None:
                worker.stop(grace_seconds(pod) if pod is not None else 0.0)
            if pod is not None:
                meta = pod["metadata"]
                try:
                    self._client.delete(PODS, meta.get("namespace"), meta["name"], grace_period_seconds=0,
                                        uid=meta["uid"])
                except ApiError as exc:
                    log.warning("delete pod %s/%s: %s", meta.get("namespace"), meta["name"], exc)
        finally:
            self._on_done()
