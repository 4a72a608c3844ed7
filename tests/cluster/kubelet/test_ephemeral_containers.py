"""Ephemeral containers on the kubelet: added to a running pod through ``pods/ephemeralcontainers``,
started once in the pod's sandbox and network, reported in ``ephemeralContainerStatuses`` and
read with ``kubectl logs -c``; never restarted, and ended with the pod."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any, cast

from trainctl.cluster.kubelet.pod_worker import PodContext, PodWorker
from trainctl.kube.restmapper import PODS

from tests.support.pods import create, phase, pod, wait_pod, wait_pod_gone


def _ephemeral_state(name: str) -> Any:
    def check(obj: dict[str, Any]) -> Any:
        statuses = obj.get("status", {}).get("ephemeralContainerStatuses") or []
        return next((s["state"] for s in statuses if s["name"] == name), {})
    return check


def _add(kube_env: dict[str, str], pod_name: str, container: dict[str, Any]) -> None:
    subprocess.run(["kubectl", "patch", "pod", pod_name, "--subresource=ephemeralcontainers", "-p",
                    json.dumps({"spec": {"ephemeralContainers": [container]}})],
                   env=kube_env, check=True, capture_output=True, timeout=30)


def _running_with(argument: str) -> bool:
    """Whether a process of this machine has ``argument`` on its command line."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if argument.encode() in cmdline.read_bytes().split(b"\0"):
                return True
        except OSError:  # it ended meanwhile
            continue
    return False


def test_an_added_ephemeral_container_runs_once_in_the_pod(api, kube_env, kubelet):
    create(api, pod("app", "import time; time.sleep(600)", restart_policy="Always"))
    running = wait_pod(api, "app", phase("Running"), timeout=60)
    script = "echo debugging $HOSTNAME; exit 3"
    _add(kube_env, "app", {"name": "dbg", "image": "busybox", "command": ["sh", "-c", script],
                           "targetContainerName": "main"})
    done = wait_pod(api, "app", lambda p: "terminated" in _ephemeral_state("dbg")(p), timeout=60)
    terminated = _ephemeral_state("dbg")(done)["terminated"]
    assert terminated["exitCode"] == 3  # and not restarted, though the pod's policy is Always
    status = next(s for s in done["status"]["ephemeralContainerStatuses"] if s["name"] == "dbg")
    assert status["restartCount"] == 0 and status["image"] == "busybox"
    assert done["status"]["phase"] == "Running" and done["status"]["podIP"] == running["status"]["podIP"]
    assert [s["name"] for s in done["status"]["containerStatuses"]] == ["main"]
    logs = subprocess.run(["kubectl", "logs", "app", "-c", "dbg"], env=kube_env, capture_output=True, text=True,
                          timeout=30)
    assert logs.stdout == "debugging app\n", logs.stderr


def test_an_ephemeral_container_ends_with_its_pod(api, kube_env, kubelet):
    create(api, pod("short", "import time; time.sleep(600)"))
    wait_pod(api, "short", phase("Running"), timeout=60)
    marker = f"ephemeral-{uuid.uuid4()}"
    _add(kube_env, "short", {"name": "dbg", "image": "busybox",
                             "command": ["python", "-c", "import time; time.sleep(600)", marker]})
    wait_pod(api, "short", lambda p: "running" in _ephemeral_state("dbg")(p), timeout=60)
    assert _running_with(marker)
    api.delete(PODS, "default", "short", grace_period_seconds=1)
    wait_pod_gone(api, "short", timeout=60)
    assert not _running_with(marker), "the ephemeral container outlived its pod"



def test_an_ephemeral_container_a_status_says_started_is_not_started_again():
    """After a kubelet restart the worker is rebuilt from the API object: an ephemeral
    container runs once, so one that ran keeps its reported end."""
    ended = {"terminated": {"exitCode": 3, "reason": "Error"}}
    obj = pod("app", "pass")
    obj["metadata"]["uid"] = "u1"
    obj["spec"]["ephemeralContainers"] = [{"name": "ran", "image": "busybox"}, {"name": "was-running", "image": "b"},
                                          {"name": "new", "image": "busybox"}]
    obj["status"] = {"ephemeralContainerStatuses": [{"name": "ran", "state": ended},
                                                    {"name": "was-running", "state": {"running": {}}}]}
    worker = PodWorker(cast(PodContext, object()), obj, "10.0.0.1", {}, lambda uid: None)
    states = {s.name: s.state for s in worker.ephemeral_states}
    assert states["ran"] == ended
    assert states["was-running"]["terminated"]["reason"] == "ContainerStatusUnknown"
    assert states["new"] == {"waiting": {"reason": "ContainerCreating"}}
    worker.initialized, worker.phase = True, "Running"
    started: list[dict[str, Any]] = []
    worker._run_ephemeral = started.append  # type: ignore[method-assign]
    worker._start_ephemeral()
    worker._start_ephemeral()  # nothing is started twice
    for thread in threading.enumerate():
        if thread.name.startswith("ephemeral-"):
            thread.join(30)
    assert [spec["name"] for spec in started] == ["new"]
