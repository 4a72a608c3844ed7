"""The node lifecycle loop on a real API server, with a node played by hand: a silent
Lease makes the node Unknown and tainted, its pods not ready and then Terminating (no kubelet
finishes them, as on an unreachable node); a renewed Lease and Ready=True heal it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from trainctl.cluster.controlplane import node_lifecycle, taints
from trainctl.cluster.controlplane.node_lifecycle_controller import NodeLifecycleController
from trainctl.cluster.controlplane.units import format_time
from trainctl.kube import restmapper as r

from .conftest import FakeMetricsClient, eventually

Obj = dict[str, Any]


def now_micro() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def post_ready(client: FakeMetricsClient, status: str, name: str = "worker-1") -> None:
    node = client.get(r.NODES, None, name)
    stamp = format_time(datetime.now(timezone.utc))
    node["status"] = {"conditions": [{"type": "Ready", "status": status, "reason": "KubeletReady", "message": "kubelet is posting ready status",
                                      "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}
    client.replace(r.NODES, node, subresource="status")


def renew(client: FakeMetricsClient, name: str = "worker-1") -> None:
    lease = client.get(r.LEASES, "kube-node-lease", name)
    lease["spec"]["renewTime"] = now_micro()
    client.replace(r.LEASES, lease)


def register(client: FakeMetricsClient, name: str) -> None:
    client.create(r.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}})
    post_ready(client, "True", name)
    client.create(r.LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                             "metadata": {"name": name, "namespace": "kube-node-lease"},
                             "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()}})


@contextlib.contextmanager
def heartbeat(client: FakeMetricsClient, name: str) -> Iterator[None]:
    """A healthy node: its Lease renewed every 0.3 s (a lone lost node would be a full disruption)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.3):
            renew(client, name)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def bound_pod(client: FakeMetricsClient, name: str, tolerations: list[Obj]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"nodeName": "worker-1", "tolerations": tolerations,
                    "containers": [{"name": "main", "image": "python:3.11", "command": ["sleep", "1000"]}]}}
    created = client.create(r.PODS, pod).object
    assert created is not None
    stamp = format_time(datetime.now(timezone.utc))
    created["status"] = {"phase": "Running", "startTime": stamp,
                         "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": stamp}]}
    client.replace(r.PODS, created, subresource="status")


def ready_status(obj: Obj) -> str:
    return next((c["status"] for c in obj.get("status", {}).get("conditions") or () if c["type"] == "Ready"), "")


def test_silent_node_is_tainted_its_pods_evicted_and_it_heals(client: FakeMetricsClient) -> None:
    register(client, "worker-1")
    register(client, "worker-2")
    # The API server gives every pod 300 s of toleration (DefaultTolerationSeconds); one that
    # tolerates the taint for 0 s is evicted at once.
    bound_pod(client, "plain", [{"key": taints.UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}])
    bound_pod(client, "tolerating", [{"key": taints.UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 4}])

    config = node_lifecycle.NodeLifecycleConfig(node_monitor_grace_period=2)
    controller = NodeLifecycleController(client, config=config, monitor_period=0.25)
    controller.start()
    try:
        with heartbeat(client, "worker-2"):
            node = eventually(lambda: (n := client.get(r.NODES, None, "worker-1")) and ready_status(n) == "Unknown" and n,
                              what="node Ready=Unknown")
            ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
            assert (ready["reason"], ready["message"]) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")
            node = eventually(lambda: (n := client.get(r.NODES, None, "worker-1")) and n["spec"].get("taints") and n, what="taints")
            assert {(x["key"], x["effect"]) for x in node["spec"]["taints"]} == {(taints.UNREACHABLE, "NoExecute"), (taints.UNREACHABLE, "NoSchedule")}

            plain = eventually(lambda: (p := client.get(r.PODS, "default", "plain"))["metadata"].get("deletionTimestamp") and p,
                               what="plain pod Terminating")
            assert any(c["type"] == "DisruptionTarget" and c["reason"] == "DeletionByTaintManager" for c in plain["status"]["conditions"])
            tolerating = eventually(lambda: (p := client.get(r.PODS, "default", "tolerating")) and ready_status(p) == "False" and p,
                                    what="tolerating pod Ready=False")
            assert not tolerating["metadata"].get("deletionTimestamp")  # it tolerates the taint for 4 s
            eventually(lambda: client.get(r.PODS, "default", "tolerating")["metadata"].get("deletionTimestamp"), timeout=30,
                       what="tolerating pod Terminating once its toleration expired")
            # Nobody finishes the pods: they stay Terminating while the node is away.
            assert client.get(r.PODS, "default", "plain")["metadata"]["deletionTimestamp"]

            renew(client)
            post_ready(client, "True")
            eventually(lambda: not client.get(r.NODES, None, "worker-1")["spec"].get("taints"), what="taints removed")
            assert ready_status(client.get(r.NODES, None, "worker-1")) == "True"
            assert not client.get(r.NODES, None, "worker-2")["spec"].get("taints")
    finally:
        controller.stop()
    events, _ = client.list(r.EVENTS, "default")
    reasons = {(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) for e in events}
    assert {("Node", "worker-1", "NodeNotReady"), ("Pod", "plain", "TaintManagerEviction"),
            ("Pod", "tolerating", "TaintManagerEviction"), ("Pod", "tolerating", "NodeNotReady")} <= reasons


def test_a_silent_node_is_judged_when_its_grace_runs_out_not_at_the_next_monitor_pass(client: FakeMetricsClient) -> None:
    register(client, "worker-1")
    config = node_lifecycle.NodeLifecycleConfig(node_monitor_grace_period=2)
    # A monitor period longer than the test: every pass comes from a Lease renewal or a grace running out.
    controller = NodeLifecycleController(client, config=config, monitor_period=600)
    controller.start()
    try:
        eventually(lambda: controller.loop.passes > 0, what="the first pass")
        renew(client)
        last_renewal = datetime.now(timezone.utc)
        node = eventually(lambda: (n := client.get(r.NODES, None, "worker-1")) and ready_status(n) == "Unknown" and n,
                          what="node Ready=Unknown before the next monitor pass")
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        judged = datetime.strptime(ready["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        # not before the grace period after the last renewal (the stamp has whole seconds)
        assert (judged - last_renewal).total_seconds() > config.node_monitor_grace_period - 1, (judged, last_renewal)
    finally:
        controller.stop()
