"""Hollow nodes against a real API server: what a kubelet would say, without pod processes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from trainctl.cluster.kubelet.hollow import FAIL_AFTER_SECONDS, FAIL_RUNS, RUN_SECONDS, RUN_UNTIL, HollowNodes, node_names
from trainctl.cluster.kubelet.node import LEASE_NAMESPACE, capacity
from trainctl.cluster.podutil import HOLLOW_NODE_LABEL
from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import LEASES, NODES, PODS

Obj = dict[str, Any]


@pytest.fixture
def client(apiserver: Any) -> Iterator[KubeClient]:
    api = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0)
    yield api
    api.close()


@pytest.fixture
def hollow(client: KubeClient) -> Iterator[HollowNodes]:
    nodes = HollowNodes(client, node_names(3), capacity(cpu="4", memory="8Gi"), heartbeat_seconds=0.5)
    nodes.start(timeout=30)
    yield nodes
    nodes.stop()


def bound_pod(name: str, node: str, **annotations: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {"nodeName": node, "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "x", "command": ["train"]}]}}


def eventually(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def phase(client: KubeClient, name: str) -> Any:
    pod = client.get_or_none(PODS, "default", name)
    return pod and (pod.get("status") or {}).get("phase")


def test_nodes_register_ready_with_their_leases_and_go_when_the_process_stops(client: KubeClient) -> None:
    names = node_names(3)
    nodes = HollowNodes(client, names, capacity(cpu="4", memory="8Gi"), heartbeat_seconds=0.2)
    nodes.start(timeout=30)
    try:
        for name in names:
            node = client.get(NODES, None, name)
            assert node["metadata"]["labels"][HOLLOW_NODE_LABEL] == "true"
            assert node["status"]["allocatable"]["cpu"] == "4"
            assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
        first = client.get(LEASES, LEASE_NAMESPACE, names[0])["spec"]["renewTime"]
        eventually(lambda: client.get(LEASES, LEASE_NAMESPACE, names[0])["spec"]["renewTime"] != first)
    finally:
        nodes.stop()
    assert all(client.get_or_none(NODES, None, name) is None for name in names)


def test_a_pod_runs_then_succeeds_on_its_schedule(client: KubeClient, hollow: HollowNodes) -> None:
    client.create(PODS, bound_pod("short", hollow.names[0], **{RUN_SECONDS: "0.5"}))
    eventually(lambda: phase(client, "short") == "Running")
    eventually(lambda: phase(client, "short") == "Succeeded")
    status = client.get(PODS, "default", "short")["status"]
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert status["hostIP"]


def test_the_first_runs_of_a_name_fail_and_its_replacement_runs_on(client: KubeClient, hollow: HollowNodes) -> None:
    client.create(PODS, bound_pod("flaky", hollow.names[1], **{FAIL_RUNS: "1", FAIL_AFTER_SECONDS: "0.2"}))
    eventually(lambda: phase(client, "flaky") == "Failed")
    terminated = client.get(PODS, "default", "flaky")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 143
    client.delete(PODS, "default", "flaky")
    eventually(lambda: client.get_or_none(PODS, "default", "flaky") is None)
    client.create(PODS, bound_pod("flaky", hollow.names[2], **{FAIL_RUNS: "1", FAIL_AFTER_SECONDS: "0.2"}))
    eventually(lambda: phase(client, "flaky") == "Running")
    time.sleep(1.0)
    assert phase(client, "flaky") == "Running"  # the second pod of the name does not fail


def test_run_until_set_on_a_running_pod_ends_it(client: KubeClient, hollow: HollowNodes) -> None:
    client.create(PODS, bound_pod("long", hollow.names[0]))
    eventually(lambda: phase(client, "long") == "Running")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    client.patch(PODS, "default", "long", {"metadata": {"annotations": {RUN_UNTIL: now}}})
    eventually(lambda: phase(client, "long") == "Succeeded")


def test_a_deleted_pod_is_removed_as_a_kubelet_removes_it(client: KubeClient, hollow: HollowNodes) -> None:
    client.create(PODS, bound_pod("doomed", hollow.names[0]))
    eventually(lambda: phase(client, "doomed") == "Running")
    try:
        client.delete(PODS, "default", "doomed")
    except ApiError as exc:  # already gone is fine too
        assert exc.code == 404
    eventually(lambda: client.get_or_none(PODS, "default", "doomed") is None)


def test_pods_bound_elsewhere_are_left_alone(client: KubeClient, hollow: HollowNodes) -> None:
    client.create(PODS, bound_pod("elsewhere", "a-real-node", **{RUN_SECONDS: "0"}))
    client.create(PODS, bound_pod("here", hollow.names[0]))
    eventually(lambda: phase(client, "here") == "Running")
    assert phase(client, "elsewhere") in (None, "Pending")


def test_many_status_writes_are_in_flight_at_once() -> None:
    """A thousand nodes' pods are reported through one process: with a few writes in flight
    the API server's round trip capped them at ~30 a second. Here every write waits until
    24 are in flight together; with fewer writers none would ever get through."""
    import threading

    together = threading.Barrier(24, timeout=15)
    written: list[str] = []

    class Api:
        def patch(self, _resource: Any, _namespace: str, name: str, _body: Obj, subresource: str = "") -> None:
            together.wait()
            written.append(name)

    hollow = HollowNodes(Api(), node_names(3), capacity(cpu="4", memory="8Gi"))  # type: ignore[arg-type]
    try:
        for index in range(24):
            pod = bound_pod(f"p-{index}", hollow.names[index % 3])
            pod["metadata"]["uid"] = f"uid-{index}"
            hollow._on_pod("ADDED", pod, None)
        eventually(lambda: len(written) == 24 or together.broken)
        assert sorted(written) == sorted(f"p-{index}" for index in range(24))
    finally:
        hollow.stop()


def test_many_lease_renewals_are_in_flight_at_once() -> None:
    """A thousand nodes renew a hundred Leases a second: with 4 in flight a round trip over
    40 ms made the beats queue up, and the last nodes of each round went NotReady. Here
    every renewal waits until 24 are in flight together."""
    import threading

    together = threading.Barrier(24, timeout=15)
    renewed: set[str] = set()
    registered = threading.Event()

    class Api:
        def get_or_none(self, _resource: Any, _namespace: Any, name: str) -> Obj:
            return {"metadata": {"name": name, "labels": {HOLLOW_NODE_LABEL: "true"}}}

        def patch(self, resource: Any, _namespace: Any, name: str, _body: Obj, subresource: str = "") -> Obj:
            if resource is LEASES and registered.is_set():
                together.wait()
                renewed.add(name)
            return {}

        def delete(self, *_args: Any, **_kwargs: Any) -> None:
            pass

    hollow = HollowNodes(Api(), node_names(30), capacity(cpu="4", memory="8Gi"), heartbeat_seconds=0.5)  # type: ignore[arg-type]
    hollow.start(pods=False)  # registers every node, then beats
    registered.set()
    try:
        eventually(lambda: len(renewed) >= 24 or together.broken)
        assert len(renewed) >= 24 and not together.broken
    finally:
        together.abort()
        hollow.stop()


def test_a_status_write_without_events_to_record_reads_nothing_first() -> None:
    """A late round makes every hollow node post its status: one PATCH each, not a GET too
    (the GET only tells which conditions changed, for Events a hollow node does not record)."""
    from trainctl.cluster.kubelet.heartbeat import NodeHeartbeat

    calls: list[str] = []

    class Api:
        def get_or_none(self, *_args: Any) -> Obj:
            calls.append("get")
            return {}

        def patch(self, *_args: Any, **_kwargs: Any) -> Obj:
            calls.append("patch")
            return {}

    NodeHeartbeat(Api(), "hollow-1", capacity(cpu="4", memory="8Gi"), 10.0).write_status(  # type: ignore[arg-type]
        ready=True, message="kubelet is posting ready status")
    assert calls == ["patch"]
