"""The kubeflow-training SDK's TrainingClient against the embedded API server (no
controller: the test plays the operator by writing status and pods itself)."""

from __future__ import annotations

import json

import pytest
from kubeflow.training import TrainingClient, models
from kubernetes import client

from tests.support.jobs import pytorchjob

pytestmark = pytest.mark.usefixtures("crds")


def job_model(name: str, workers: int) -> models.KubeflowOrgV1PyTorchJob:
    container = client.V1Container(name="pytorch", image="trainctl/samples:0.1.0", command=["python", "train.py"])
    template = client.V1PodTemplateSpec(spec=client.V1PodSpec(containers=[container]))
    replica = lambda count: models.KubeflowOrgV1ReplicaSpec(replicas=count, restart_policy="OnFailure", template=template)  # noqa: E731
    return models.KubeflowOrgV1PyTorchJob(
        api_version="kubeflow.org/v1", kind="PyTorchJob", metadata=client.V1ObjectMeta(name=name),
        spec=models.KubeflowOrgV1PyTorchJobSpec(
            pytorch_replica_specs={"Master": replica(1), "Worker": replica(workers)},
            run_policy=models.KubeflowOrgV1RunPolicy(clean_pod_policy="None")))


def operator_pod(job: str, replica_type: str, index: int) -> dict:
    labels = {"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": replica_type,
              "training.kubeflow.org/replica-index": str(index)}
    if replica_type == "master":
        labels["training.kubeflow.org/job-role"] = "master"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{job}-{replica_type}-{index}", "labels": labels},
            "spec": {"containers": [{"name": "pytorch", "image": "trainctl/samples:0.1.0"}]}}


def test_training_client_lifecycle(apiserver, api):
    sdk = TrainingClient(config_file=str(apiserver.kubeconfig), namespace="default")
    sdk.create_job(job_model("sdk", workers=2))

    job = sdk.get_job("sdk")
    assert job.spec.pytorch_replica_specs["Worker"].replicas == 2
    assert [j.metadata.name for j in sdk.list_jobs()] == ["sdk"]
    assert sdk.is_job_succeeded("sdk") is False

    core = client.CoreV1Api(api)
    for replica_type, index in (("master", 0), ("worker", 0), ("worker", 1)):
        core.create_namespaced_pod("default", operator_pod("sdk", replica_type, index))
    assert sorted(p.metadata.name for p in sdk.get_job_pods("sdk")) == ["sdk-master-0", "sdk-worker-0", "sdk-worker-1"]
    assert [p.metadata.name for p in sdk.get_job_pods("sdk", is_master=True)] == ["sdk-master-0"]
    assert [p.metadata.name for p in sdk.get_job_pods("sdk", replica_type="worker", replica_index=1)] == ["sdk-worker-1"]

    custom = client.CustomObjectsApi(api)
    custom.patch_namespaced_custom_object_status(
        "kubeflow.org", "v1", "default", "pytorchjobs", "sdk",
        {"status": {"conditions": [{"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded",
                                    "message": "done", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    finished = sdk.wait_for_job_conditions("sdk", wait_timeout=10, polling_interval=1)
    assert finished.status.conditions[-1].type == "Succeeded"
    assert sdk.is_job_succeeded("sdk") is True

    job = sdk.get_job("sdk")
    job.spec.pytorch_replica_specs["Worker"].replicas = 3
    sdk.update_job(job, "sdk")  # a merge patch of the whole object, status and resourceVersion included
    updated = sdk.get_job("sdk")
    assert updated.spec.pytorch_replica_specs["Worker"].replicas == 3
    assert updated.metadata.generation == 2
    assert updated.status.conditions[-1].type == "Succeeded"

    with pytest.raises(Exception) as stale:
        sdk.update_job(job, "sdk")  # the resourceVersion it carries is now old
    assert "409" in str(stale.value) or "Conflict" in str(stale.value)

    sdk.delete_job("sdk")
    with pytest.raises(RuntimeError, match="404|not found"):
        sdk.get_job("sdk")


def test_job_created_by_kubectl_without_run_policy_reads_through_the_sdk(apiserver, kubectl):
    """The CRD's schema default for runPolicy keeps the SDK's non-nullable model happy."""
    job = pytorchjob("bare", restart="OnFailure", namespace=None, uid=None)
    assert "runPolicy" not in job["spec"]
    kubectl("apply", "-f", "-", input=json.dumps(job))
    sdk = TrainingClient(config_file=str(apiserver.kubeconfig), namespace="default")
    assert sdk.get_job("bare").spec.run_policy is not None
    assert [j.metadata.name for j in sdk.list_jobs()] == ["bare"]
