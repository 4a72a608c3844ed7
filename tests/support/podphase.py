"""Plays the kubelet's part in the controller's integration tests: sets pod phases.

Until a test runs real processes (the e2e suite does), something must move pods from
Pending to Running and on to Succeeded or Failed. This driver watches the job's pods through
the real API server and writes their status through the ``pods/status`` subresource, exactly
what a kubelet does; the outcome of each pod is the test's choice.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.informer import Informer
from trainctl.kube.restmapper import PODS

# outcome(pod, running_pods_of_the_same_job) -> "Succeeded" | "Failed" | None (keep running)
Outcome = Callable[[dict[str, Any], list[dict[str, Any]]], Optional[str]]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_status(phase: str, exit_code: Optional[int] = None, container: str = "pytorch") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "startTime": _now()}
    if phase == "Running":
        status["containerStatuses"] = [
            {
                "name": container,
                "ready": True,
                "restartCount": 0,
                "image": "x",
                "imageID": "",
                "state": {"running": {"startedAt": _now()}},
            }
        ]
    elif exit_code is not None:
        status["containerStatuses"] = [
            {
                "name": container,
                "ready": False,
                "restartCount": 0,
                "image": "x",
                "imageID": "",
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if exit_code == 0 else "Error",
                        "finishedAt": _now(),
                    }
                },
            }
        ]
    return status


class PodPhaseDriver:
    def __init__(self, client: KubeClient, namespace: str, outcome: Outcome) -> None:
        self.client = client
        self.outcome = outcome
        self.informer = Informer(client, PODS, namespace=namespace)
        self.informer.add_handler(self._on_pod)
        self._lock = threading.Lock()
        self.created: list[str] = []  # every pod uid ever seen, in order
        self._finished: set[str] = set()

    def start(self) -> "PodPhaseDriver":
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()

    def set_phase(self, pod: dict[str, Any], phase: str, exit_code: Optional[int] = None) -> None:
        """Write the phase as a kubelet would: a conflict (the cached pod was stale, as it
        often is on a loaded machine) is retried on the pod as it is now, never dropped."""
        container = (pod["spec"].get("containers") or [{}])[0].get("name", "pytorch")
        for _ in range(10):
            body = {**pod, "status": pod_status(phase, exit_code, container)}
            try:
                self.client.replace(PODS, body, subresource="status")
                return
            except ApiError as exc:
                if exc.code == 404:
                    return
                if exc.code != 409:
                    raise
            current = self.client.get_or_none(PODS, pod["metadata"].get("namespace"), pod["metadata"]["name"])
            if current is None or current["metadata"].get("uid") != pod["metadata"].get("uid"):
                return
            pod = current

    def _on_pod(self, event_type: str, new: Optional[dict[str, Any]], old: Optional[dict[str, Any]]) -> None:
        if new is None or new["metadata"].get("deletionTimestamp"):
            return
        with self._lock:
            if event_type == "ADDED":
                self.created.append(new["metadata"]["uid"])
        phase = (new.get("status") or {}).get("phase")
        if phase in (None, "", "Pending"):
            self.set_phase(new, "Running")
            return
        if phase != "Running":
            return
        job = new["metadata"].get("labels", {}).get("training.kubeflow.org/job-name")
        siblings = [
            p
            for p in self.informer.store.list()
            if p["metadata"].get("labels", {}).get("training.kubeflow.org/job-name") == job
            and (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        ]
        for pod in siblings:
            result = self.outcome(pod, siblings)
            if result is None:
                continue
            with self._lock:
                if pod["metadata"]["uid"] in self._finished:
                    continue
                self._finished.add(pod["metadata"]["uid"])
            self.set_phase(pod, result, 0 if result == "Succeeded" else 1)
