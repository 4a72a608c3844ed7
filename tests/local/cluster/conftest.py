"""Helpers for the embedded-cluster tests: watch a pod until a condition holds."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from trainctl.controller.kube.client import ApiError, KubeClient
from trainctl.controller.kube.resources import PODS

Obj = dict[str, Any]


def sleeper_pod(name: str, fifo: str) -> Obj:
    """A pod that writes to ``fifo`` once running, then sleeps until it is stopped."""
    script = "import sys, time\nwith open(sys.argv[1], 'w') as f: f.write('ready')\ntime.sleep(600)"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "python:3.11", "command": ["python", "-c", script, fifo]}]}}


def wait_pod(api: KubeClient, name: str, until: Callable[[Obj], bool], timeout: float = 30.0) -> Obj:
    """The pod once ``until(pod)`` holds, following a watch (relisting if the server restarts)."""
    deadline = time.monotonic() + timeout
    selector = f"metadata.name={name}"
    while time.monotonic() < deadline:
        try:
            items, version = api.list(PODS, "default", field_selector=selector)
            for item in items:
                if until(item):
                    return item
            remaining = max(1, int(deadline - time.monotonic()))
            for event in api.watch(PODS, "default", version, timeout_seconds=remaining, field_selector=selector):
                if event["type"] in ("ADDED", "MODIFIED") and until(event["object"]):
                    return event["object"]
        except ApiError as exc:
            if exc.code != 410 and not exc.retryable:  # 410, or the server restarting: list again
                raise
    raise AssertionError(f"pod {name} did not reach the expected state within {timeout:g}s")


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


def main_pid(pod: Obj) -> int:
    return int(pod["status"]["containerStatuses"][0]["containerID"].removeprefix("process://"))
