"""A PyTorchJob whose pods exceed a ResourceQuota, against the embedded API server: the
controller reports the API server's 403 as a ``FailedCreatePod`` Warning on the job (as
training-operator does), keeps retrying instead of crashing, and creates the pod once the
quota has room."""

from __future__ import annotations

from trainctl.kube.restmapper import PYTORCHJOBS, Resource

from tests.support.controller import job_events
from tests.support.jobs import pytorchjob

QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")


def test_a_pod_over_quota_is_a_warning_on_the_job_and_is_created_once_there_is_room(kube, start_manager, events, pods):
    kube.create(QUOTAS, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods", "namespace": "default"},
                         "spec": {"hard": {"pods": "1"}}})
    manager = start_manager()
    kube.create(PYTORCHJOBS, pytorchjob("quota", workers=1, restart="OnFailure", uid=None))
    warning = events.wait(lambda: [e for e in job_events(events, "quota") if e["reason"] == "FailedCreatePod"],
                          what="FailedCreatePod event")
    assert warning[0]["type"] == "Warning"
    assert "is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1" in warning[0]["message"]
    events.wait(lambda: manager.queue.failures(("PyTorchJob", "default", "quota")) >= 2, what="the job retried")
    quota = kube.get(QUOTAS, "default", "pods")
    quota["spec"]["hard"]["pods"] = "2"
    kube.replace(QUOTAS, quota)
    names = pods.wait(lambda: sorted(p["metadata"]["name"] for p in pods.list()
                                     if p["metadata"]["name"].startswith("quota-")) == ["quota-master-0", "quota-worker-0"],
                      what="both pods created once the quota has room")
    assert names
