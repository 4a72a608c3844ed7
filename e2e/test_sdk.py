"""The kubeflow-training SDK's TrainingClient, unchanged, driving a real job through trainctl.

Pipeline authors and notebooks use this client against Kubeflow's training-operator; the
same calls must work against trainctl's controller on the embedded cluster, with real
training processes behind them.
"""

from __future__ import annotations

import pytest
from kubeflow.training import TrainingClient
from kubeflow.training.utils import utils as sdk_utils
from kubernetes import client

from tests.support.cluster import E2E
from tests.support.net import free_port

pytestmark = pytest.mark.e2e


def test_training_client_runs_a_job_end_to_end(e2e: E2E) -> None:
    sdk = TrainingClient(config_file=str(e2e.cluster.kubeconfig), namespace="default")
    container = sdk_utils.get_container_spec(
        name="pytorch",
        base_image="trainctl/samples:0.1.0",
        command=["python", "samples/pytorch/train.py"],
        args=["--steps=30", "--checkpoint-dir=checkpoints/sdk-ddp"],
    )
    # The SDK always names port 23456; a user of a shared machine picks another the same way.
    container.ports = [client.V1ContainerPort(name="pytorchjob-port", container_port=free_port("0.0.0.0"))]
    template = sdk_utils.get_pod_template_spec(containers=[container])
    job = sdk_utils.get_pytorchjob_template(
        name="sdk-ddp",
        namespace="default",
        num_workers=2,  # the SDK's meaning: one Master and one Worker
        worker_pod_template_spec=template,
        master_pod_template_spec=template,
    )
    sdk.create_job(job)

    finished = sdk.wait_for_job_conditions("sdk-ddp", wait_timeout=180, polling_interval=1)
    assert sdk.is_job_succeeded("sdk-ddp")
    assert finished.status.conditions[-1].type == "Succeeded"
    assert finished.status.completion_time is not None

    pods = sorted(p.metadata.name for p in sdk.get_job_pods("sdk-ddp"))
    assert pods == ["sdk-ddp-master-0", "sdk-ddp-worker-0"]
    assert [p.metadata.name for p in sdk.get_job_pods("sdk-ddp", is_master=True)] == ["sdk-ddp-master-0"]

    logs, _ = sdk.get_job_logs("sdk-ddp")
    assert "[start] RANK=0 WORLD_SIZE=2 " in logs["sdk-ddp-master-0"], logs
    worker_logs, _ = sdk.get_job_logs("sdk-ddp", is_master=False, replica_type="worker", replica_index=0)
    assert "[start] RANK=1 WORLD_SIZE=2 " in worker_logs["sdk-ddp-worker-0"], worker_logs

    sdk.delete_job("sdk-ddp")
    with pytest.raises(RuntimeError):
        sdk.get_job("sdk-ddp")
