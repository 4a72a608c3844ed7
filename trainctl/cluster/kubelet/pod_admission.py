"""Admission: which pods bound to this node get a worker, and with what.

A pod on this node is admitted once: it gets its devices (the lowest free indices of each
device resource it asks for), a pod IP and a :class:`~.pod_worker.PodWorker`. A pod this
node will not run is rejected (phase Failed with a reason, as the real kubelet's
admission does), and a pod that was running before a kubelet restart is failed, since
its processes are gone. Finished pods are remembered so that they are never started again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Optional

from trainctl.cluster.kubelet.pod_worker import PodContext, PodWorker
from trainctl.cluster.network.pod_ipam import PodIPAllocator
from trainctl.cluster.podutil import DEVICE_RESOURCES, is_terminal, quantity_or_zero
from trainctl.cluster.scheduler.fit import pod_requests
from trainctl.kube.client import ApiError
from trainctl.kube.podstatus import StatusWriter
from trainctl.kube.timestamps import now_rfc3339

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class Admission:
    """The pods this node runs (their workers and devices) and the ones it is done with."""

    def __init__(self, context: PodContext, statuses: StatusWriter, ips: PodIPAllocator,
                 on_change: Callable[[], None]) -> None:
        self._context = context
        self._statuses = statuses
        self._ips = ips
        self._on_change = on_change
        self._lock = threading.Lock()  # guards the three maps below
        self._workers: dict[str, PodWorker] = {}
        self._devices: dict[str, dict[str, list[int]]] = {}
        self._finished: set[str] = set()

    def workers(self) -> dict[str, PodWorker]:
        with self._lock:
            return dict(self._workers)

    def is_finished(self, uid: str) -> bool:
        with self._lock:
            return uid in self._finished

    def forget(self, present: set[str]) -> None:
        """Forget finished pods that left the API."""
        with self._lock:
            self._finished &= present

    def allocated_devices(self) -> dict[str, set[int]]:
        with self._lock:
            return self._taken_devices()

    def _taken_devices(self) -> dict[str, set[int]]:
        taken: dict[str, set[int]] = {}
        for devices in self._devices.values():
            for resource, indices in devices.items():
                taken.setdefault(resource, set()).update(indices)
        return taken

    def admit(self, pod: Obj) -> None:
        """Start a worker for ``pod`` unless it has one, is finished, or does not fit."""
        uid = pod["metadata"]["uid"]
        if is_terminal(pod):
            return
        with self._lock:
            if uid in self._workers or uid in self._finished:
                return
            devices, short = _pick_devices(pod, self._context.allocatable, self._taken_devices())
            if short is None:
                self._devices[uid] = devices
                worker = PodWorker(self._context, pod, self._ips.allocate(uid), devices, self._worker_done)
                self._workers[uid] = worker
        if short is not None:  # bound here by someone else, without room
            self.reject(pod, f"OutOf{short}", f"Pod was rejected: Node didn't have enough resource: {short}")
            return
        worker.start()

    def reject(self, pod: Obj, reason: str, message: str) -> None:
        """Fail a pod this node will not run (a real kubelet's admission rejection)."""
        meta = pod["metadata"]
        with self._lock:
            self._finished.add(meta["uid"])
        log.warning("pod %s/%s rejected: %s", meta.get("namespace"), meta.get("name"), message)
        try:
            self._statuses.patch(meta, {"status": {"phase": "Failed", "reason": reason, "message": message}})
        except ApiError as exc:
            log.warning("status of pod %s/%s: %s", meta.get("namespace"), meta.get("name"), exc)

    def _worker_done(self, uid: str) -> None:
        with self._lock:
            self._workers.pop(uid, None)
            self._devices.pop(uid, None)
            self._finished.add(uid)
            self._ips.release(uid)
        self._on_change()

    def fail_orphans(self, pods: list[Obj], node_name: str) -> None:
        """Pods this node was running before a restart: their processes are gone; say so."""
        for pod in pods:
            meta = pod.get("metadata", {})
            if pod.get("spec", {}).get("nodeName") != node_name or is_terminal(pod):
                continue
            if meta.get("deletionTimestamp"):
                continue  # the sync loop removes it
            if not (pod.get("status") or {}).get("startTime"):
                # No kubelet ever took it up: bound while this one registered (a Pending
                # replacement waiting for room lands the moment the Node is back). Run it.
                continue
            patch = {"status": processes_gone_status(pod, "KubeletRestarted",
                                                     "The local kubelet restarted; the pod's processes were stopped.")}
            try:
                self._statuses.patch(meta, patch)
            except ApiError as exc:
                log.warning("marking pod %s/%s failed: %s", meta.get("namespace"), meta.get("name"), exc)
                continue
            with self._lock:
                self._finished.add(meta["uid"])


def processes_gone_status(pod: Obj, reason: str, message: str) -> Obj:
    """The status of a pod whose processes are gone: ``Failed`` with ``reason``, every running
    container terminated (137), as a real kubelet reports containers it no longer finds.
    Also what the supervisor reports for the pods of a node it no longer starts."""
    now = now_rfc3339()
    status: Obj = {"phase": "Failed", "reason": reason, "message": message}
    conditions = []
    for condition in pod.get("status", {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") in ("Ready", "ContainersReady") \
                and condition.get("status") != "False":
            condition = {**condition, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
        conditions.append(condition)
    if conditions:  # a merge patch replaces the list: all of them
        status["conditions"] = conditions
    containers = []
    for container in pod.get("status", {}).get("containerStatuses") or []:
        container = dict(container)
        running = (container.get("state") or {}).get("running")
        if isinstance(running, dict):
            container["state"] = {"terminated": {"exitCode": 137, "reason": "Error", "message": message,
                                  "startedAt": running.get("startedAt"), "finishedAt": now}}
            container["ready"] = False
            container["started"] = False
        containers.append(container)
    if containers:
        status["containerStatuses"] = containers
    return status


def _pick_devices(pod: Obj, allocatable: dict[str, Any],
                  taken: dict[str, set[int]]) -> tuple[dict[str, list[int]], Optional[str]]:
    """The lowest free indices of each device resource the pod asks for, or the first
    resource the node has too few of."""
    wanted = pod_requests(pod)
    devices: dict[str, list[int]] = {}
    for resource in DEVICE_RESOURCES:
        count = int(wanted.get(resource, 0))
        if count <= 0:
            continue
        free = [i for i in range(int(quantity_or_zero(allocatable.get(resource, 0)))) if i not in taken.get(resource, set())]
        if len(free) < count:
            return {}, resource
        devices[resource] = free[:count]
    return devices, None
