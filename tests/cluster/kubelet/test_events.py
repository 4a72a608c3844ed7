"""The kubelet's Events, as ``kubectl describe`` reads them: about containers (with their
fieldPath) and about the node (whose uid is its name), bounded as client-go bounds them."""

from __future__ import annotations

import time

from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import EVENTS, PODS

from tests.support.pods import container_status, create, pod, running_sleeper, wait_pod, wait_pod_gone


def _events_about(api: KubeClient, kind: str, name: str, uid: str, want: set[str], timeout: float = 20.0) -> dict[str, dict]:
    """The Events about one object by reason, once every reason in ``want`` is there."""
    deadline = time.monotonic() + timeout
    while True:
        items, _ = api.list(EVENTS, None, field_selector=f"involvedObject.kind={kind},involvedObject.name={name},"
                                                        f"involvedObject.uid={uid}")
        by_reason: dict[str, dict] = {}
        for event in items:
            assert event["reason"] not in by_reason, f"two Events for one reason: {items}"  # repeats are counted
            by_reason[event["reason"]] = event
        if want <= set(by_reason) or time.monotonic() > deadline:
            assert want <= set(by_reason), by_reason
            return by_reason
        time.sleep(0.2)  # Events are written in the background


def test_a_crash_loop_is_told_in_a_few_counted_events(api, kubelet):
    created = create(api, pod("crash", "import sys; print('boom'); sys.exit(1)", restart_policy="Always"))
    wait_pod(api, "crash", lambda p: container_status(p).get("restartCount", 0) >= 5, timeout=60)
    events = _events_about(api, "Pod", "crash", created["metadata"]["uid"], {"Pulled", "Created", "Started", "BackOff"})
    for reason in ("Pulled", "Created", "Started", "BackOff"):
        event = events[reason]
        assert event["involvedObject"]["fieldPath"] == "spec.containers{main}"
        assert event["source"] == {"component": "kubelet", "host": kubelet.node_name}
        assert (event["reportingComponent"], event["reportingInstance"]) == ("kubelet", kubelet.node_name)
    assert events["Started"]["message"] == "Started container main"
    assert events["Started"]["count"] >= 2  # every run is one more of the same Event
    backoff = events["BackOff"]
    assert backoff["type"] == "Warning"
    assert backoff["message"] == f"Back-off restarting failed container main in pod crash_default({created['metadata']['uid']})"


def test_stopping_a_running_container_is_a_killing_event(api, kubelet, tmp_path):
    running = running_sleeper(api, tmp_path, "sleeper")
    api.delete(PODS, "default", "sleeper")
    wait_pod_gone(api, "sleeper")
    events = _events_about(api, "Pod", "sleeper", running["metadata"]["uid"], {"Started", "Killing"})
    assert (events["Killing"]["type"], events["Killing"]["message"]) == ("Normal", "Stopping container main")


def test_the_node_tells_it_started_and_is_ready(api, kubelet):
    name = kubelet.node_name
    events = _events_about(api, "Node", name, name, {"Starting", "NodeReady", "NodeHasSufficientMemory"})
    assert events["Starting"]["message"] == "Starting kubelet."
    assert events["NodeReady"]["message"] == f"Node {name} status is now: NodeReady"
    assert events["NodeReady"]["metadata"]["namespace"] == "default"
