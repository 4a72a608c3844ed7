"""The kubelet's Events without a cluster: their shape, and the bound on their writes."""

from __future__ import annotations

import threading
from typing import Any

from trainctl.cluster.kubelet.kubelet_events import KubeletEvents

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "crash", "namespace": "ns", "uid": "u1", "resourceVersion": "3"},
       "spec": {"initContainers": [{"name": "setup"}], "containers": [{"name": "main"}]}}


class RecordingClient:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patches = 0
        self.release = threading.Event()
        self.release.set()

    def create(self, resource: Any, obj: dict[str, Any]) -> None:
        self.release.wait()
        self.created.append(obj)

    def patch(self, resource: Any, namespace: Any, name: str, patch: dict[str, Any]) -> None:
        self.patches += 1


def test_container_and_node_events_carry_the_kubelets_references():
    client = RecordingClient()
    events = KubeletEvents(client, "node-1")  # type: ignore[arg-type]
    events.container(POD, "setup", "Normal", "Started", "Started container setup")
    events.container(POD, "main", "Warning", "BackOff", "Back-off restarting failed container main in pod crash_ns(u1)")
    events.node("Normal", "Starting", "Starting kubelet.")
    events.stop()
    setup, main, node = client.created
    assert setup["involvedObject"]["fieldPath"] == "spec.initContainers{setup}"
    assert main["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "crash", "uid": "u1",
                                      "resourceVersion": "3", "fieldPath": "spec.containers{main}"}
    assert (main["metadata"]["namespace"], main["type"], main["source"]) == ("ns", "Warning", {"component": "kubelet", "host": "node-1"})
    assert (main["reportingComponent"], main["reportingInstance"]) == ("kubelet", "node-1")
    assert (node["involvedObject"]["kind"], node["involvedObject"]["name"], node["involvedObject"]["uid"]) == ("Node", "node-1", "node-1")
    assert node["metadata"]["namespace"] == "default"


def test_a_crash_loop_for_ever_costs_a_bounded_number_of_writes():
    client = RecordingClient()
    events = KubeletEvents(client, "node-1")  # type: ignore[arg-type]
    for _ in range(500):
        events.container(POD, "main", "Warning", "BackOff", "Back-off restarting failed container main in pod crash_ns(u1)")
    events.stop()
    assert len(client.created) == 1  # one Event, its repeats counted
    assert len(client.created) + client.patches <= 25  # client-go's burst per object and reason
    assert events.recorder.dropped == 500 - 25


def test_a_slow_api_server_never_blocks_the_caller_and_the_queue_is_bounded():
    client = RecordingClient()
    client.release.clear()  # the first write hangs
    events = KubeletEvents(client, "node-1")  # type: ignore[arg-type]
    for i in range(3000):
        events.container(POD, "main", "Normal", "Started", f"Started container main {i}")
    assert events.dropped >= 3000 - 1000 - 1
    client.release.set()
    events.stop()
