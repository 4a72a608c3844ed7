"""The scheduler component against a real API server: what it does before its caches are in."""

from __future__ import annotations

import time

from trainctl.cluster.scheduler.component import SchedulerComponent
from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import EVENTS, NODES, PODS

from tests.support.pods import create, pod

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                   "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


def _wait(event, timeout=10.0):
    assert event.wait(timeout)


def test_no_pass_runs_until_the_nodes_are_listed(apiserver):
    """A pass over listed pods and not-yet-listed nodes would call every pod unschedulable
    on "0/0 nodes"; kube-scheduler waits for its caches, and so does this one."""
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0, max_attempts=1)
    try:
        client.create(NODES, NODE)
        create(client, pod("early", "pass"))
        component = SchedulerComponent(client)
        component.pods.start()
        component.namespaces.start()
        component.budgets.start()
        try:
            _wait(component.pods.synced)
            component.sync()
            assert "nodeName" not in client.get(PODS, "default", "early")["spec"]
            assert not client.get(PODS, "default", "early").get("status", {}).get("conditions")

            component.nodes.start()
            _wait(component.nodes.synced)
            component.sync()
            deadline = time.monotonic() + 10
            while "nodeName" not in client.get(PODS, "default", "early")["spec"]:
                assert time.monotonic() < deadline, "the pod was never bound"
                time.sleep(0.05)
            assert client.get(PODS, "default", "early")["spec"]["nodeName"] == "node-a"
        finally:
            component.pods.stop()
            component.nodes.stop()
            component.namespaces.stop()
            component.budgets.stop()
    finally:
        client.close()


def _events_of(client, name):
    return [e for e in client.list(EVENTS, "default")[0] if (e.get("involvedObject") or {}).get("name") == name]


def test_events_name_the_scheduler_and_the_pod(apiserver):
    """Scheduled for a bound pod and FailedScheduling for one that fits nowhere, from
    default-scheduler, about the Pod, as kubectl describe reads them."""
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0, max_attempts=1)
    component = SchedulerComponent(client)
    try:
        client.create(NODES, NODE)
        create(client, pod("small", "pass"))
        create(client, pod("huge", "pass", resources={"requests": {"cpu": "3"}}))
        component.start()
        deadline = time.monotonic() + 20
        while not (_events_of(client, "small") and _events_of(client, "huge")):
            assert time.monotonic() < deadline, client.list(EVENTS, "default")[0]
            time.sleep(0.1)
        (scheduled,), (failed,) = _events_of(client, "small"), _events_of(client, "huge")
        huge = client.get(PODS, "default", "huge")
        assert (scheduled["type"], scheduled["reason"], scheduled["message"]) == (
            "Normal", "Scheduled", "Successfully assigned default/small to node-a")
        message = ("0/1 nodes are available: 1 Insufficient cpu. "
                   "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
        assert (failed["type"], failed["reason"], failed["message"]) == ("Warning", "FailedScheduling", message)
        assert next(c for c in huge["status"]["conditions"] if c["type"] == "PodScheduled")["message"] == message
        for event in (scheduled, failed):
            assert event["source"]["component"] == event["reportingComponent"] == "default-scheduler"
        involved = failed["involvedObject"]
        assert (involved["apiVersion"], involved["kind"], involved["uid"]) == ("v1", "Pod", huge["metadata"]["uid"])
    finally:
        component.stop()
        client.close()


def test_a_pod_created_after_a_cordon_never_lands_on_the_cordoned_node(apiserver):
    """The Nodes watch can lag the Pods watch: here it is stopped before the cordon, so the
    pass sees the node uncordoned. The node is checked before the binding, and the pod,
    created after the cordon was written, is found unschedulable, not bound to it."""
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0, max_attempts=1)
    component = SchedulerComponent(client)
    informers = (component.pods, component.nodes, component.namespaces, component.budgets)
    try:
        client.create(NODES, NODE)
        for informer in informers:
            informer.start()
        for informer in informers:
            _wait(informer.synced)
        component.nodes.stop()
        client.patch(NODES, None, "node-a", {"spec": {"unschedulable": True}})
        create(client, pod("late", "pass"))
        deadline = time.monotonic() + 20
        while not any(p["metadata"]["name"] == "late" for p in component.views.pods()[1]):
            assert time.monotonic() < deadline, "the Pods watch never brought the pod"
            time.sleep(0.05)
        while True:
            component.sync()
            late = client.get(PODS, "default", "late")
            assert "nodeName" not in late["spec"], "bound to the cordoned node"
            conditions = late.get("status", {}).get("conditions") or []
            if conditions:
                break
            assert time.monotonic() < deadline, "the pod was never found unschedulable"
            time.sleep(0.05)
        assert "1 node(s) were unschedulable" in conditions[0]["message"]
    finally:
        for informer in informers:
            informer.stop()
        component.stop()
        client.close()


def test_a_higher_priority_pod_preempts_and_is_bound_once_its_victim_is_gone(apiserver):
    """The low pod fills the node; the urgent one is nominated to it, the low one is marked a
    DisruptionTarget of preemption, deleted gracefully (it waits for its kubelet) with a
    Preempted Event; when it is gone the urgent pod is bound there."""
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig), qps=0, max_attempts=1)
    component = SchedulerComponent(client)
    try:
        client.create(NODES, NODE)
        full = {"requests": {"cpu": "2"}}
        create(client, {**pod("low", "pass", resources=full)})
        component.start()
        deadline = time.monotonic() + 20
        while not client.get(PODS, "default", "low")["spec"].get("nodeName"):
            assert time.monotonic() < deadline, "the low pod was never bound"
            time.sleep(0.05)
        urgent = pod("urgent", "pass", resources=full)
        urgent["spec"]["priorityClassName"] = "system-cluster-critical"  # one of kube's built-in classes
        uid = create(client, urgent)["metadata"]["uid"]
        while not client.get(PODS, "default", "low")["metadata"].get("deletionTimestamp"):
            assert time.monotonic() < deadline, "the low pod was never preempted"
            time.sleep(0.05)
        low = client.get(PODS, "default", "low")
        assert low["metadata"]["deletionGracePeriodSeconds"] == 30  # graceful: its own grace period
        target = next(c for c in low["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (target["status"], target["reason"], target["message"]) == (
            "True", "PreemptionByScheduler", "default-scheduler: preempting to accommodate a higher priority pod")
        assert client.get(PODS, "default", "urgent")["status"]["nominatedNodeName"] == "node-a"
        while not any(e["reason"] == "Preempted" for e in _events_of(client, "low")):
            assert time.monotonic() < deadline, "no Preempted Event"
            time.sleep(0.05)
        (preempted,) = [e for e in _events_of(client, "low") if e["reason"] == "Preempted"]
        assert (preempted["type"], preempted["message"], preempted["source"]["component"]) == (
            "Normal", f"Preempted by pod {uid} on node node-a", "default-scheduler")
        assert "nodeName" not in client.get(PODS, "default", "urgent")["spec"]  # the victim is still there

        client.delete(PODS, "default", "low", grace_period_seconds=0)  # what its kubelet does once it stopped
        while client.get(PODS, "default", "urgent")["spec"].get("nodeName") != "node-a":
            assert time.monotonic() < deadline + 10, "the urgent pod was never bound"
            time.sleep(0.05)
    finally:
        component.stop()
        client.close()
