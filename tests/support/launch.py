"""The launcher's tests without a controller: a stand-in that writes job status, and a view to wait on.

On the bare API server a ``StatusDriver`` stands in for the controller: it writes the job's
conditions through the ``/status`` subresource and creates the job's pods with the labels
and owner references the controller gives them, so the launcher's watch, timeout and
progress logic runs against real HTTP with the real Python client. The tests synchronise
on what the launcher's view has shown (``RecordingView``), never on sleeps.
"""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any, Optional

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from trainctl.launch.progress import JobProgress, PlainView

from .conditions import now
from .jobs import pytorchjob
from .net import with_free_port

NAMESPACE = "default"


def launched_job(name: str, command: Optional[list[str]] = None, *, workers: int = 0,
                 restart_policy: str = "Never") -> dict[str, Any]:
    """A small PyTorchJob as a user hands it to the launcher: no namespace (the launcher's
    option gives it), and its pods still running when it ends are deleted (cleanPodPolicy Running)."""
    return with_free_port(pytorchjob(name, command or ["python", "-c", "print('hello')"], workers=workers or None,
                                     restart=restart_policy, image="python:3.11", namespace=None, uid=None,
                                     runPolicy={"cleanPodPolicy": "Running"}))


class RecordingView(PlainView):
    """The plain view the CLI uses, writing to memory, that a test can wait on."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()
        super().__init__(self.buffer)
        self.states: list[str] = []
        self.progress: list[JobProgress] = []
        self.lines: list[tuple[str, str]] = []
        self.notes: list[str] = []
        self._changed = threading.Condition()

    def show(self, progress: JobProgress) -> None:
        super().show(progress)
        with self._changed:
            self.progress.append(progress)
            if not self.states or self.states[-1] != progress.state:
                self.states.append(progress.state)
            self._changed.notify_all()

    def log(self, pod: str, line: str) -> None:
        super().log(pod, line)
        with self._changed:
            self.lines.append((pod, line))
            self._changed.notify_all()

    def note(self, message: str) -> None:
        super().note(message)
        with self._changed:
            self.notes.append(message)
            self._changed.notify_all()

    def wait_until(self, predicate: Any, timeout: float = 30.0) -> None:
        """Wait until ``predicate(view)`` holds; it is only asked once some progress was shown."""
        with self._changed:
            shown = self._changed.wait_for(lambda: bool(self.progress) and predicate(self), timeout)
            assert shown, self.buffer.getvalue()

    def wait_state(self, state: str, timeout: float = 30.0) -> None:
        self.wait_until(lambda v: v.progress[-1].state == state, timeout)

    def wait_created(self, timeout: float = 30.0) -> None:
        self.wait_until(lambda v: any(n.startswith("created ") for n in v.notes), timeout)


class StatusDriver:
    """Does what the controller would, by hand: status conditions, labelled and owned pods."""

    def __init__(self, api: client.ApiClient, namespace: str = NAMESPACE) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace

    def job(self, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object("kubeflow.org", "v1", self.namespace, "pytorchjobs", name)

    def exists(self, name: str) -> bool:
        try:
            self.job(name)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise

    def set_status(self, name: str, *conditions: dict[str, Any], replicas: dict[str, dict[str, int]] | None = None) -> None:
        """Replace the whole status, as the operator's UpdateStatus does."""
        job = self.job(name)
        job["status"] = {"conditions": list(conditions), "replicaStatuses": replicas or {}}
        self.custom.replace_namespaced_custom_object_status("kubeflow.org", "v1", self.namespace, "pytorchjobs", name, job)

    def delete_job(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object("kubeflow.org", "v1", self.namespace, "pytorchjobs", name)

    def create_pod(self, job: dict[str, Any], replica_type: str, index: int) -> dict[str, Any]:
        name = job["metadata"]["name"]
        labels = {
            "training.kubeflow.org/job-name": name,
            "training.kubeflow.org/replica-type": replica_type,
            "training.kubeflow.org/replica-index": str(index),
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
        }
        if replica_type == "master":
            labels["training.kubeflow.org/job-role"] = "master"
        owner = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": name,
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{replica_type}-{index}", "labels": labels, "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "pytorch", "image": "python:3.11"}], "restartPolicy": "OnFailure"},
        }
        self.core.create_namespaced_pod(self.namespace, pod, _preload_content=False).release_conn()
        return self.pod(pod["metadata"]["name"])

    def job_event(self, job: dict[str, Any], kind: str, reason: str, message: str) -> dict[str, Any]:
        """An Event about the job, as the controller's recorder posts it (a new one each call)."""
        meta = job["metadata"]
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}."},
            "involvedObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": meta["name"],
                               "namespace": self.namespace, "uid": meta["uid"]},
            "type": kind,
            "reason": reason,
            "message": message,
            "source": {"component": "pytorchjob-controller"},
        }
        # Read to the end, so that the connection can carry the next request.
        return json.loads(self.core.create_namespaced_event(self.namespace, event, _preload_content=False).data)

    def pod(self, name: str) -> dict[str, Any]:
        return json.loads(self.core.read_namespaced_pod(name, self.namespace, _preload_content=False).data)

    def set_pod_running(self, name: str, restart_count: int = 0) -> None:
        status = {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "ready": True,
                    "restartCount": restart_count,
                    "image": "python:3.11",
                    "imageID": "",
                    "state": {"running": {"startedAt": now()}},
                }
            ],
        }
        self.core.patch_namespaced_pod_status(name, self.namespace, {"status": status})

    def set_pod_unschedulable(self, name: str, message: str) -> None:
        """What kube-scheduler writes on a pod it cannot place."""
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                     "lastProbeTime": None, "lastTransitionTime": now()}
        self.core.patch_namespaced_pod_status(name, self.namespace, {"status": {"phase": "Pending", "conditions": [condition]}})

    def delete_pod(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)


class Background:
    """Runs a blocking call in a thread and hands back its result (or exception)."""

    def __init__(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self._thread.start()

    def _run(self, fn: Any, args: Any, kwargs: Any) -> None:
        try:
            self.result = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the test
            self.error = exc

    def join(self, timeout: float = 60.0) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the launcher did not return"
        if self.error is not None:
            raise self.error
        return self.result
