"""An OOMKilled replica is relaunched with more memory, end to end through the embedded API server.

The test plays the kubelet: it reports the Worker's container as restarted in place after an
OOM kill (``lastState.terminated.reason: OOMKilled``), as a kubelet does under OnFailure.
The API server must keep ``status.oomMemory`` (the CRD's schema declares it). Run under the
cluster lock.
"""

from __future__ import annotations

import logging
from typing import Any

from trainctl.kube.restmapper import NODES, PODS, PYTORCHJOBS

from tests.support.controller import job_events
from tests.support.jobs import pytorchjob
from tests.support.podphase import PodPhaseDriver, pod_status


def oom_job(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    job: dict[str, Any] = pytorchjob(name, master=False, workers=1, restart="OnFailure", uid=None)
    job["metadata"]["annotations"] = annotations
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"memory": "512Mi"}, "requests": {"memory": "512Mi"}}
    return job


def report_oom_kill(kube, pod: dict[str, Any], restarts: int = 1) -> None:
    """What a kubelet reports after restarting the container in place from an OOM kill."""
    status = pod_status("Running")
    status["containerStatuses"][0].update(
        restartCount=restarts, lastState={"terminated": {"exitCode": 137, "reason": "OOMKilled"}})
    kube.replace(PODS, {**pod, "status": status}, subresource="status")


def running(pods, name: str) -> dict[str, Any]:
    return pods.wait(lambda: (p := pods.get(name)) and p["status"].get("phase") == "Running" and p, what=f"{name} running")


def replaced(pods, first: dict[str, Any]) -> dict[str, Any]:
    name, uid = first["metadata"]["name"], first["metadata"]["uid"]
    return pods.wait(lambda: (p := pods.get(name)) and p["metadata"]["uid"] != uid and p, what=f"the relaunched {name}")


def test_an_oom_killed_worker_comes_back_with_more_memory(kube, start_manager, pods, jobs, events):
    start_manager()
    driver = PodPhaseDriver(kube, "default", lambda pod, running: None).start()
    try:
        kube.create(PYTORCHJOBS, oom_job("oom", {"trainctl.io/oom-memory-factor": "1.5", "trainctl.io/oom-memory-max": "1Gi"}))
        first = running(pods, "oom-worker-0")
        report_oom_kill(kube, first)
        relaunched = replaced(pods, first)
        increased = events.wait(
            lambda: [e for e in job_events(events, "oom") if e["reason"] == "OOMMemoryIncreased"], what="OOMMemoryIncreased"
        )
        stored = jobs.wait(lambda: (j := jobs.get("oom")) and j.get("status", {}).get("oomMemory") and j["status"],
                           what="status.oomMemory")
    finally:
        driver.stop()
    assert relaunched["spec"]["containers"][0]["resources"] == {"limits": {"memory": "768Mi"}, "requests": {"memory": "768Mi"}}
    assert relaunched["metadata"]["annotations"]["trainctl.io/oom-memory"] == "512Mi -> 768Mi"
    assert [e["message"] for e in increased] == [
        "Pod oom-worker-0 was OOMKilled with memory limit 512Mi: replica Worker-0 is relaunched with 768Mi"]
    assert stored["oomMemory"] == {"Worker-0": {"memory": "768Mi", "previous": "512Mi", "relaunches": 1}}
    assert stored["restartCount"] == 1


def test_a_bad_annotation_is_one_warning_event_and_no_traceback(kube, start_manager, pods, jobs, events, caplog):
    """factor "inf" once raised in every reconcile of the job, with no Event. Now: one
    InvalidOOMMemory Warning naming the value, however many passes follow, and the OOM kill
    is left to the restart policy (no controller factor to fall back on)."""
    manager = start_manager()
    driver = PodPhaseDriver(kube, "default", lambda pod, running: None).start()
    try:
        kube.create(PYTORCHJOBS, oom_job("badoom", {"trainctl.io/oom-memory-factor": "inf"}))
        pod = running(pods, "badoom-worker-0")
        report_oom_kill(kube, pod)
        warned = events.wait(lambda: [e for e in job_events(events, "badoom") if e["reason"] == "InvalidOOMMemory"],
                             what="InvalidOOMMemory")
        for restarts in (2, 3):  # more passes over the same problem
            passes = manager.reconciles
            report_oom_kill(kube, kube.get(PODS, "default", "badoom-worker-0"), restarts)
            jobs.wait(lambda p=passes: manager.reconciles > p, what="another reconcile")
        kept = pods.get("badoom-worker-0")
        # A barrier: the pod's recreation, written after every earlier pass's Events.
        kube.delete(PODS, "default", "badoom-worker-0", grace_period_seconds=0)
        events.wait(lambda: [e for e in job_events(events, "badoom")
                             if e["reason"] == "SuccessfulCreatePod" and e.get("count", 1) >= 2], what="the pod recreated")
        after = [e for e in job_events(events, "badoom") if e["reason"] == "InvalidOOMMemory"]
    finally:
        driver.stop()
    assert [(e["type"], e["message"], e.get("count", 1)) for e in after] == [(
        "Warning", "annotation trainctl.io/oom-memory-factor='inf' is not a number above 1 and at most 16; "
        "no OOM relaunch (the controller's --oom-memory-factor is not set)", 1)], after
    assert warned[0]["metadata"]["uid"] == after[0]["metadata"]["uid"]
    assert kept["metadata"]["uid"] == pod["metadata"]["uid"]  # not relaunched: no factor applies
    errors = manager.metrics.registry.get_sample_value(
        "trainctl_reconcile_duration_seconds_count", {"framework": "pytorch", "result": "error"})
    assert not errors, f"{errors} reconciles failed"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a traceback in the controller's log"


def test_a_relaunch_asks_for_no_more_memory_than_the_largest_node_has(kube, start_manager, pods, jobs, events):
    """No maximum, a factor of 2: 512Mi would become 1Gi, but the only Node (added while the
    controller runs) offers 640Mi, so the replica comes back with 640Mi and stays schedulable."""
    start_manager()
    kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "small"}})
    small = kube.get(NODES, None, "small")
    kube.replace(NODES, {**small, "status": {"allocatable": {"cpu": "4", "memory": "640Mi"},
                                             "capacity": {"cpu": "4", "memory": "1Gi"}}}, subresource="status")
    driver = PodPhaseDriver(kube, "default", lambda pod, running: None).start()
    try:
        kube.create(PYTORCHJOBS, oom_job("nodeoom", {"trainctl.io/oom-memory-factor": "2"}))
        first = running(pods, "nodeoom-worker-0")
        report_oom_kill(kube, first)
        relaunched = replaced(pods, first)
    finally:
        driver.stop()
    assert relaunched["spec"]["containers"][0]["resources"] == {"limits": {"memory": "640Mi"}, "requests": {"memory": "640Mi"}}
    assert relaunched["metadata"]["annotations"]["trainctl.io/oom-memory"] == "512Mi -> 640Mi"
