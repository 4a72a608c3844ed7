"""What a user sees with kubectl when a pod crash-loops or a node goes away: the kubelet's
and the node lifecycle controller's Events, in ``kubectl describe`` and through both Event
APIs, and the crash's output in ``kubectl logs``.

A real kubelet counts restarts (the first run is 0) and, while a container waits in
CrashLoopBackOff, reports the run that crashed: ``restartCount`` names it and ``kubectl
logs`` prints its output. The cluster here has two nodes, short grace periods and a short
back-off, so a crash loop and a dead node show within a minute.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import E2E, scratch_cluster
from tests.support.pods import pod_scratch
from tests.support.waiting import wait_on

pytestmark = pytest.mark.e2e

SECOND_NODE = "trainctl-local-2"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    with scratch_cluster(tmp_path_factory.mktemp("events"), nodes=2, node_monitor_grace_period="10s", backoff_base=4.0,
                         controller=False, controlplane_args=["--controllers", "node-lifecycle"]) as cluster:
        yield cluster


def eventually(what: str, check: Callable[[], Any], timeout: float) -> Any:
    """The first truthy ``check()``, asked every second (kubectl has nothing to wait on)."""
    found = wait_on(threading.Condition(), check, timeout, recheck=1.0)
    assert found, f"no {what} within {timeout:g}s"
    return found


def crash_loop_pod(counter: Path) -> dict[str, Any]:
    script = (f"import pathlib, sys; p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) if p.exists() else 0; "
              "p.write_text(str(n + 1)); print(f'run {n} failed', flush=True); sys.exit(2)")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher", "namespace": "default"},
            "spec": {"nodeName": "trainctl-local", "restartPolicy": "Always",
                     "containers": [{"name": "app", "image": "python:3.11", "command": ["python", "-c", script]}]}}


def container(pod: dict[str, Any]) -> dict[str, Any]:
    return ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]


def waiting_reason(pod: dict[str, Any]) -> str:
    return ((container(pod).get("state") or {}).get("waiting") or {}).get("reason", "")


def test_a_crash_looping_pod_says_why_and_shows_its_last_crash(env: E2E):
    counter = pod_scratch(env.cluster.directory) / f"crasher-{uuid.uuid4().hex[:6]}.runs"  # the pod writes it
    env.kubectl.apply(crash_loop_pod(counter))
    for _ in range(4):  # each back-off is twice the last: look within one of them
        eventually("CrashLoopBackOff", lambda: waiting_reason(env.kubectl.json("get", "pod", "crasher")) == "CrashLoopBackOff", 120)
        before = env.kubectl.json("get", "pod", "crasher")
        logs = env.kubectl("logs", "crasher")
        previous = env.kubectl("logs", "crasher", "--previous")
        describe = env.kubectl("describe", "pod", "crasher")
        runs = int(counter.read_text())
        after = env.kubectl.json("get", "pod", "crasher")
        if before["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"] and waiting_reason(after):
            break
    else:
        raise AssertionError("crasher never stayed in one back-off long enough to look at it")
    status = container(after)
    assert status["restartCount"] == runs - 1 >= 1  # restarts, not starts: the first run is 0
    assert status["lastState"]["terminated"]["exitCode"] == 2
    assert logs == previous == f"run {runs - 1} failed\n"
    events = describe.split("\nEvents:", 1)[1]
    for reason in ("Pulled", "Created", "Started", "BackOff"):
        assert f"  {reason}  " in events or f" {reason} " in events, describe
    assert "Back-off restarting failed container app in pod crasher_default" in events
    assert "kubelet" in events

    # A running container that is stopped says so too.
    env.kubectl("run", "sleeper", "--image=python:3.11", "--restart=Never", "--overrides",
                json.dumps({"spec": {"nodeName": "trainctl-local"}}), "--command", "--", "python", "-c",
                "import time; time.sleep(600)")
    env.kubectl("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=60s", timeout=90)
    uid = env.kubectl("get", "pod", "sleeper", "-o", "jsonpath={.metadata.uid}")
    env.kubectl("delete", "pod", "sleeper", "--wait=true", "--timeout=60s", timeout=90)
    killing = eventually("Killing event", lambda: env.kubectl(
        "get", "events", "--field-selector", f"involvedObject.uid={uid},reason=Killing", "-o", "name").strip(), 30)
    assert killing


def test_both_event_apis_show_the_same_events(env: E2E):
    def names(resource: str) -> list[tuple[str, str]]:
        listed = env.kubectl.json("get", resource, "-A")["items"]
        return sorted((e["metadata"]["name"], e["metadata"]["resourceVersion"]) for e in listed)

    for _ in range(5):  # the kubelet may write one between the two lists
        core, events = names("events"), names("events.v1.events.k8s.io")
        if core == events:
            break
        time.sleep(1)
    assert core == events and core
    table = env.kubectl("get", "events.v1.events.k8s.io", "--field-selector", "regarding.name=crasher,reason=BackOff")
    assert "BackOff" in table and "pod/crasher" in table


def test_a_node_that_goes_away_gets_a_node_not_ready_event(env: E2E):
    env.cluster.kill_node(SECOND_NODE)
    selector = f"involvedObject.kind=Node,involvedObject.name={SECOND_NODE},reason=NodeNotReady"
    eventually("NodeNotReady event", lambda: env.kubectl("get", "events", "-A", "--field-selector", selector, "-o", "name").strip(), 90)
    describe = env.kubectl("describe", "node", SECOND_NODE)
    events = describe.split("\nEvents:", 1)[1]
    assert "NodeNotReady" in events and f"Node {SECOND_NODE} status is now: NodeNotReady" in events
    assert "Starting kubelet." in events  # the kubelet's own, found by the node's name as uid
