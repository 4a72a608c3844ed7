"""An OOMKilled replica is relaunched with more memory, end to end through the embedded API server.

The test plays the kubelet: it reports the Worker's container as restarted in place after an
OOM kill (``lastState.terminated.reason: OOMKilled``), as a kubelet does under OnFailure.
The API server must keep ``status.oomMemory`` (the CRD's schema declares it). Run under the
cluster lock.
"""

from __future__ import annotations

from typing import Any

from trainctl.kube.resources import PODS, PYTORCHJOBS

from tests.support.controller import job_events
from tests.support.jobs import pytorchjob
from tests.support.podphase import PodPhaseDriver, pod_status


def test_an_oom_killed_worker_comes_back_with_more_memory(kube, start_manager, pods, jobs, events):
    start_manager()
    job: dict[str, Any] = pytorchjob("oom", master=False, workers=1, restart="OnFailure", uid=None)
    job["metadata"]["annotations"] = {"trainctl.io/oom-memory-factor": "1.5", "trainctl.io/oom-memory-max": "1Gi"}
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"memory": "512Mi"}, "requests": {"memory": "512Mi"}}
    driver = PodPhaseDriver(kube, "default", lambda pod, running: None).start()
    try:
        kube.create(PYTORCHJOBS, job)
        first = pods.wait(lambda: (p := pods.get("oom-worker-0")) and p["status"].get("phase") == "Running" and p,
                          what="oom-worker-0 running")
        status = pod_status("Running")
        status["containerStatuses"][0].update(
            restartCount=1, lastState={"terminated": {"exitCode": 137, "reason": "OOMKilled"}})
        kube.replace(PODS, {**first, "status": status}, subresource="status")
        relaunched = pods.wait(
            lambda: (p := pods.get("oom-worker-0")) and p["metadata"]["uid"] != first["metadata"]["uid"] and p,
            what="the relaunched oom-worker-0",
        )
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
