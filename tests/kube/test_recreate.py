"""A job re-created under the name of one whose children are still going (embedded API server).

``kubectl delete pytorchjob X --wait=false; kubectl apply -f X.yaml``: the old job's pods are
still terminating when the new job's creates reach the server, which answers AlreadyExists.
That object is not the new job's, so the create failed: the job is retried with back-off and
reconciled again the moment the old object goes, instead of waiting out an expectation that
only its own pod could meet (five minutes). PodPhaseDriver plays the kubelet.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from trainctl.controller.reconcile.plan import Plan
from trainctl.kube.restmapper import PODS, PYTORCHJOBS, SERVICES

from tests.support.controller import job_events
from tests.support.jobs import pytorchjob
from tests.support.podphase import PodPhaseDriver

NS = "default"
KEY = ("PyTorchJob", NS, "again")


def owned_by(objects: list[dict[str, Any]], uid: str) -> list[dict[str, Any]]:
    return [o for o in objects if any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences") or ())]


def warnings_about(events, name: str, uid: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in job_events(events, name) if e["reason"] == reason and e["involvedObject"].get("uid") == uid]


def job_on_a_node(name: str) -> dict[str, Any]:
    """A job whose pods are placed at once, so that deleting them leaves them terminating."""
    job = pytorchjob(name, workers=1, restart="OnFailure", uid=None)
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["nodeName"] = "node-a"
    return job


def test_a_job_recreated_while_its_old_pods_terminate_starts_once_they_are_gone(
    kube, start_manager, jobs, pods, events, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trainctl.controller")
    manager = start_manager()
    driver = PodPhaseDriver(kube, NS, lambda pod, running: None).start()
    try:
        old_uid = kube.create(PYTORCHJOBS, job_on_a_node("again")).object["metadata"]["uid"]
        old = pods.wait(
            lambda: (found := [p for p in owned_by(pods.list(), old_uid) if p["status"].get("phase") == "Running"])
            and len(found) == 2 and found,
            what="the first job's pods running",
        )
        # kubectl delete --wait=false: the job goes at once, the collector marks its pods
        # terminating, and nothing removes them until the test (their kubelet) says so.
        kube.delete(PYTORCHJOBS, NS, "again")
        pods.wait(lambda: all((p := pods.get(o["metadata"]["name"])) and p["metadata"].get("deletionTimestamp") for o in old),
                  what="the old pods terminating")
        new_uid = kube.create(PYTORCHJOBS, job_on_a_node("again")).object["metadata"]["uid"]

        warning = events.wait(lambda: warnings_about(events, "again", new_uid, "FailedCreatePod"), what="FailedCreatePod")[0]
        assert warning["type"] == "Warning"
        assert "already exists" in warning["message"] and old_uid in warning["message"], warning["message"]
        # A failure: retried with back-off, and counted in the log line.
        events.wait(lambda: manager.queue.failures(KEY) >= 1, what="a retry with back-off")
        applied = [r for r in caplog.records if r.getMessage() == "applied plan" and getattr(r, "job", "") == "default/again"]
        assert any(getattr(r, "errors", 0) >= 1 for r in applied), [vars(r) for r in applied]
        assert not owned_by(pods.list(), new_uid)

        for pod in old:  # their kubelet has stopped them
            kube.delete(PODS, NS, pod["metadata"]["name"], uid=pod["metadata"]["uid"], grace_period_seconds=0)
        # Well inside the expectation timeout (300 s): the old pods' deletion requeues the job.
        new = pods.wait(lambda: (found := owned_by(pods.list(), new_uid)) and len(found) == 2 and found,
                        timeout=30, what="the new job's pods")
    finally:
        driver.stop()
    assert sorted(p["metadata"]["name"] for p in new) == ["again-master-0", "again-worker-0"]


def test_a_service_in_the_way_is_a_failed_create_retried_until_it_goes(kube, start_manager, services, events) -> None:
    # Someone else's Service under the name the job's master needs.
    squatter = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "taken-master-0", "namespace": NS},
        "spec": {"ports": [{"port": 80}], "clusterIP": "None"},
    }
    kube.create(SERVICES, squatter)
    manager = start_manager()
    uid = kube.create(PYTORCHJOBS, pytorchjob("taken", workers=None, restart="OnFailure", uid=None)).object["metadata"]["uid"]
    warning = events.wait(lambda: warnings_about(events, "taken", uid, "FailedCreateService"), what="FailedCreateService")[0]
    assert 'services "taken-master-0" already exists' in warning["message"], warning["message"]
    events.wait(lambda: manager.queue.failures(("PyTorchJob", NS, "taken")) >= 1, what="a retry with back-off")
    assert not owned_by(services.list(), uid)

    kube.delete(SERVICES, NS, "taken-master-0")
    mine = services.wait(lambda: owned_by(services.list(), uid), timeout=30, what="the job's own Service")
    assert [s["metadata"]["name"] for s in mine] == ["taken-master-0"]
    # The same conflict is reported once, not at every retry.
    assert len(warnings_about(events, "taken", uid, "FailedCreateService")) == 1


def test_a_create_that_meets_the_jobs_own_object_is_success(kube, start_manager, pods, events) -> None:
    """AlreadyExists for a pod the job owns (a create that landed twice) is not an error."""
    manager = start_manager()
    job = kube.create(PYTORCHJOBS, pytorchjob("mine", workers=None, restart="OnFailure", uid=None)).object
    uid = job["metadata"]["uid"]
    pod = pods.wait(lambda: owned_by(pods.list(), uid), what="the job's pod")[0]
    events.wait(lambda: manager.caches.lookup(("Pod", NS, pod["metadata"]["name"])), what="the pod in the controller's cache")
    again = {"apiVersion": "v1", "kind": "Pod", "spec": pod["spec"],
             "metadata": {k: pod["metadata"][k] for k in ("name", "namespace", "labels", "ownerReferences")}}
    manager.apply(KEY[:2] + ("mine",), job, Plan(creates=[again]), manager.clock())  # raises ApplyError on a failure
    assert not warnings_about(events, "mine", uid, "FailedCreatePod")
