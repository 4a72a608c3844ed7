"""Pods in tests: built to run a Python snippet, created, waited on through a watch, and the
local processes and log files the embedded kubelet gives them."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import PODS, resource_of

Obj = dict[str, Any]


def pod(name: str, script: str, restart_policy: str = "Never", **container: Any) -> Obj:
    """A pod whose one container runs ``python -c script``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": restart_policy,
                     "containers": [{"name": "main", "image": "python:3.11", "command": ["python", "-c", script],
                                     **container}]}}


def sleeper_pod(name: str, fifo: str) -> Obj:
    """A pod that writes to ``fifo`` once running, then sleeps until it is stopped."""
    script = "import sys, time\nwith open(sys.argv[1], 'w') as f: f.write('ready')\ntime.sleep(600)"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "python:3.11", "command": ["python", "-c", script, fifo]}]}}


def pod_scratch(cluster_dir: Path, namespace: str = "default") -> Path:
    """A directory a test and its pods both write: the namespace's data directory, which a pod
    sees (and may write) at the same path in its sandbox, unlike the test's own temporary
    directory. Name files in it after the test's job: the directory is the namespace's."""
    from trainctl.cluster.kubelet.kubelet import namespace_data_dir

    directory = namespace_data_dir(cluster_dir, namespace)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def pod_fifo(path: Path) -> Path:
    """A FIFO at ``path`` that a pod's process may open for writing: in its sandbox it runs as
    an unprivileged user (``path`` must be in a directory the pod sees, such as the working
    directory, which the sandbox shows read-only: a FIFO there can still be written)."""
    os.mkfifo(path)
    os.chmod(path, 0o666)
    return path


def running_sleeper(api: KubeClient, fifo_dir: Path, name: str, node: Optional[str] = None) -> Obj:
    """A :func:`sleeper_pod` (bound to ``node`` when given) once its process said it runs
    (through a FIFO in ``fifo_dir``, a directory the pod sees) and the pod is Running."""
    fifo = pod_fifo(fifo_dir / f"{name}.ready")
    obj = sleeper_pod(name, str(fifo))
    if node:
        obj["spec"]["nodeName"] = node
    api.create(PODS, obj)
    assert read_fifo(fifo) == "ready"
    return wait_pod(api, name, phase("Running"))


def create(api: KubeClient, obj: Obj) -> Obj:
    """Create ``obj`` (in ``default`` unless it names a namespace); it must not exist yet."""
    obj["metadata"].setdefault("namespace", "default")
    created = api.create(resource_of(obj), obj)
    assert not created.existed, f"{obj['kind']} {obj['metadata']['name']} already exists"
    return created.object


def phase(*phases: str) -> Callable[[Obj], bool]:
    return lambda p: p.get("status", {}).get("phase") in phases


def wait_pod(api: KubeClient, name: str, until: Callable[[Obj], bool], timeout: float = 30.0,
             namespace: str = "default") -> Obj:
    """The pod once ``until(pod)`` holds, following a watch (no polling)."""
    found = _follow(api, name, namespace, timeout, lambda p: p is not None and until(p))
    assert found is not None
    return found


def wait_pod_gone(api: KubeClient, name: str, timeout: float = 30.0, namespace: str = "default") -> None:
    """Returns once the pod no longer exists."""
    _follow(api, name, namespace, timeout, lambda p: p is None)


def _follow(api: KubeClient, name: str, namespace: str, timeout: float,
            done: Callable[[Optional[Obj]], bool]) -> Optional[Obj]:
    """The first state of the pod (None: it does not exist) that is ``done``: list, then watch,
    listing again after a 410 or while the API server restarts."""
    deadline = time.monotonic() + timeout
    selector = f"metadata.name={name}"
    items: list[Obj] = []
    while time.monotonic() < deadline:
        try:
            items, version = api.list(PODS, namespace, field_selector=selector)
            for item in items or [None]:
                if done(item):
                    return item
            remaining = max(1, int(deadline - time.monotonic()))
            for event in api.watch(PODS, namespace, version, timeout_seconds=remaining, field_selector=selector):
                state = None if event["type"] == "DELETED" else event["object"]
                if event["type"] in ("ADDED", "MODIFIED", "DELETED") and done(state):
                    return state
        except ApiError as exc:
            if exc.code != 410 and not exc.retryable:  # 410, or the server restarting: list again
                raise
    raise AssertionError(f"pod {name} did not reach the expected state within {timeout:g}s: {items}")


def container_status(pod: Obj) -> Obj:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return statuses[0] if statuses else {}


def main_pid(pod: Obj) -> int | None:
    """The pid of the pod's running container (the embedded kubelet's ``process://<pid>``), if it runs."""
    status = container_status(pod)
    if "running" not in (status.get("state") or {}):
        return None
    return int(status["containerID"].removeprefix("process://"))


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``, parents before children."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop(0)
        for task in Path(f"/proc/{parent}/task").glob("*/children"):
            try:
                children = [int(child) for child in task.read_text().split()]
            except OSError:  # the task ended meanwhile
                continue
            found.extend(children)
            todo.extend(children)
    return found


def sigkill(pod: Obj) -> list[int]:
    """SIGKILL the pod's container process and everything it started, as a container's death does.

    The embedded kubelet kills a container's process group, but torchrun starts its workers
    in sessions of their own, so killing the agent alone would leave the worker training as
    an orphan (elastic-fault-tolerance spec §0.7); in a real container they all die with it.
    """
    pid = main_pid(pod)
    assert pid is not None, f"pod {pod['metadata']['name']} has no running container to kill"
    victims = [pid, *descendants(pid)]
    for victim in victims:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return victims


def read_fifo(path: Any, timeout: float = 30.0) -> str:
    """What a pod writes into the FIFO ``path``; fails (instead of hanging) if it never does."""
    got: list[str] = []

    def read() -> None:
        with open(path) as fifo:
            got.append(fifo.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        with open(path, "w"):  # unblock the reader before failing
            pass
        raise AssertionError(f"nothing was written to {path} within {timeout:g}s")
    return got[0]


def write_cri_log(root: Path, pod: Obj, container: str, attempt: int, lines: list[tuple[str, str, str]]) -> Path:
    """Write ``lines`` of (time, stream, text) as the kubelet would, in the CRI format."""
    path = root / "pods" / pod["metadata"]["uid"] / container / f"{attempt}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        for stamp, stream, text in lines:
            handle.write(f"{stamp} {stream} F {text}\n")
    return path
