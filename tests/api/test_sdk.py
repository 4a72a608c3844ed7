"""Both directions with the real kubeflow-training SDK (1.9.4): its jobs parse here, ours parse there.

The SDK turns API dicts into models with its own ApiClient (``TrainingClient.get_job`` does
exactly ``ApiClient().deserialize(utils.FakeResponse(obj), "KubeflowOrgV1PyTorchJob")``) and
serialises models with ``ApiClient().sanitize_for_serialization``; these tests call the same.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubeflow.training import models
from kubeflow.training.api_client import ApiClient
from kubeflow.training.constants import constants
from kubeflow.training.utils import utils

from trainctl.api import default_job, parse_job, validate
from trainctl.api.crd import kind_crd
from trainctl.api.kinds import PYTORCHJOB

SDK_MODEL = constants.JOB_PARAMETERS["PyTorchJob"]["model"]


def sdk_serialize(job: Any) -> dict[str, Any]:
    return ApiClient().sanitize_for_serialization(job)


def sdk_deserialize(obj: dict[str, Any]) -> models.KubeflowOrgV1PyTorchJob:
    return ApiClient().deserialize(utils.FakeResponse(obj), SDK_MODEL)


def admit(obj: dict[str, Any]) -> dict[str, Any]:
    """What an API server stores: the object with the CRD schema's defaults applied."""
    schema = kind_crd(PYTORCHJOB)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return _apply_defaults(schema, copy.deepcopy(obj))


def _apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _apply_defaults(sub, value[name])
        if isinstance(schema.get("additionalProperties"), dict):
            for item in value.values():
                _apply_defaults(schema["additionalProperties"], item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _apply_defaults(schema["items"], item)
    return value


def container(name: str = "pytorch") -> models.V1Container:
    return utils.get_container_spec(name=name, base_image="pytorch/pytorch:2.5.1", command=["torchrun", "train.py"])


def test_job_built_with_sdk_models_parses_unchanged():
    template = utils.get_pod_template_spec(containers=[container()])
    job = models.KubeflowOrgV1PyTorchJob(
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        metadata=models.V1ObjectMeta(name="sdk-elastic", namespace="default", labels={"team": "a"}),
        spec=models.KubeflowOrgV1PyTorchJobSpec(
            run_policy=models.KubeflowOrgV1RunPolicy(
                clean_pod_policy="Running",
                backoff_limit=3,
                active_deadline_seconds=3600,
                ttl_seconds_after_finished=60,
                suspend=False,
                managed_by="kubeflow.org/training-operator",
                scheduling_policy=models.KubeflowOrgV1SchedulingPolicy(min_available=2, queue="research", priority_class="high"),
            ),
            elastic_policy=models.KubeflowOrgV1ElasticPolicy(
                rdzv_backend="c10d",
                rdzv_port=29400,
                rdzv_host="etcd",
                rdzv_id="run-1",
                rdzv_conf=[models.KubeflowOrgV1RDZVConf(key="join_timeout", value="900")],
                min_replicas=1,
                max_replicas=4,
                max_restarts=10,
                standalone=False,
            ),
            nproc_per_node="2",
            pytorch_replica_specs={
                "Worker": models.KubeflowOrgV1ReplicaSpec(replicas=2, restart_policy="OnFailure", template=template),
            },
        ),
    )
    wire = sdk_serialize(job)
    assert wire["spec"]["elasticPolicy"]["rdzvConf"] == [{"key": "join_timeout", "value": "900"}]
    assert parse_job(wire).dump() == wire
    assert validate(wire) == []


@pytest.mark.parametrize("num_workers", [1, 3])
def test_sdk_template_helper_builds_valid_jobs(num_workers):
    template = utils.get_pod_template_spec(containers=[container()])
    job = utils.get_pytorchjob_template(
        name="helper", namespace="default", num_workers=num_workers, worker_pod_template_spec=template, num_procs_per_worker=4
    )
    wire = sdk_serialize(job)
    assert wire["spec"]["runPolicy"] == {}
    assert parse_job(wire).dump() == wire
    assert validate(wire) == []


@pytest.mark.parametrize("sample", ["pytorch_mnist.yaml", "pytorch_elastic.yaml", "pytorch_full.yaml"])
def test_our_jobs_deserialize_in_the_sdk_once_admitted(load_sample, sample):
    obj = load_sample(sample)
    obj.get("spec", {}).get("runPolicy", {}).get("schedulingPolicy", {}).pop("minResources", None)
    obj["spec"].pop("futureField", None)
    stored = admit(parse_job(obj).dump())
    job = sdk_deserialize(stored)
    assert job.spec.run_policy is not None
    assert job.spec.pytorch_replica_specs.keys() == obj["spec"]["pytorchReplicaSpecs"].keys()
    for rtype, rspec in obj["spec"]["pytorchReplicaSpecs"].items():
        assert job.spec.pytorch_replica_specs[rtype].replicas == rspec["replicas"]
        assert job.spec.pytorch_replica_specs[rtype].template.spec.containers[0].name == "pytorch"
    # And back: what the SDK writes (update_job sends the whole object) parses here unchanged.
    back = sdk_serialize(job)
    assert parse_job(back).dump() == back
    assert validate(back) == []


def test_the_run_policy_trap_and_how_the_crd_default_closes_it(load_sample, mutate):
    obj = load_sample("pytorch_mnist.yaml")
    assert "runPolicy" not in obj
    with pytest.raises(ValueError, match="run_policy"):
        sdk_deserialize(obj)
    stored = admit(obj)
    assert stored["spec"]["runPolicy"] == {"suspend": False}
    assert sdk_deserialize(stored).spec.run_policy.suspend is False
    # The stored default changes nothing: it is what the controller assumes anyway.
    assert default_job(parse_job(stored)).dump() == mutate(
        default_job(parse_job(obj)).dump(), {("spec", "runPolicy", "suspend"): False}
    )


@pytest.mark.parametrize(
    "field,value,missing_model",
    [
        (("elasticPolicy", "metrics"), [{"type": "Resource", "resource": {"name": "cpu"}}], "K8sIoApiAutoscalingV2MetricSpec"),
        (("runPolicy", "schedulingPolicy", "minResources"), {"cpu": "2"}, "Quantity"),
    ],
)
def test_fields_the_sdk_itself_cannot_read(load_sample, field, value, missing_model):
    """SDK 1.9.4 names model classes it does not ship; no server can work around that."""
    obj = admit(load_sample("pytorch_elastic.yaml"))
    node = obj["spec"]
    for key in field[:-1]:
        node = node.setdefault(key, {})
    node[field[-1]] = value
    assert validate(obj) == []
    with pytest.raises(AttributeError, match=missing_model):
        sdk_deserialize(obj)
