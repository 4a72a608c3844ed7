"""Jobs built from the components' common parameters are the reference shapes and pass validation."""

from __future__ import annotations

import pytest

from trainctl.api.kinds import MSJOB, PYTORCHJOB
from trainctl.api.validation import validate
from trainctl.pipelines.jobspec import JobParameters, build


def pytorchjob(name: str, p: JobParameters) -> dict:
    return build(PYTORCHJOB, name, p)


def msjob(name: str, p: JobParameters) -> dict:
    return build(MSJOB, name, p)


def containers(job: dict, replica_field: str) -> dict[str, dict]:
    return {rtype: spec["template"]["spec"]["containers"][0] for rtype, spec in job["spec"][replica_field].items()}


def test_static_pytorchjob_is_one_master_and_the_rest_workers():
    job = pytorchjob("mnist", JobParameters(image="img:1", command=["python", "train.py"], args=["--steps", "5"], replicas=3))
    assert validate(job) == []
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert {t: s["replicas"] for t, s in specs.items()} == {"Master": 1, "Worker": 2}
    assert containers(job, "pytorchReplicaSpecs")["Master"] == {
        "name": "pytorch", "image": "img:1", "command": ["python", "train.py"], "args": ["--steps", "5"],
    }
    assert job["metadata"] == {"name": "mnist"}
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "None"}  # the SDK cannot read a job without runPolicy


def test_a_single_replica_pytorchjob_has_no_workers():
    job = pytorchjob("", JobParameters(image="img:1"))
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Master"]
    assert job["metadata"] == {"generateName": "pytorchjob-"}
    assert validate(job) == []


def test_elastic_pytorchjob_is_workers_within_the_bounds():
    job = pytorchjob("elastic", JobParameters(image="img:1", replicas=1, min_replicas=2, max_replicas=4, nproc_per_node="2"))
    assert validate(job) == []
    assert job["spec"]["elasticPolicy"] == {"minReplicas": 2, "maxReplicas": 4}
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Worker"]
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert job["spec"]["nprocPerNode"] == "2"


def test_gpus_npus_cpu_and_memory_are_limits_and_requests():
    job = pytorchjob("gpu", JobParameters(image="img:1", cpu="4", memory="8Gi", gpus=2, npus=1))
    resources = containers(job, "pytorchReplicaSpecs")["Master"]["resources"]
    expected = {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 2, "huawei.com/Ascend910": 1}
    assert resources == {"limits": expected, "requests": expected}
    assert validate(job) == []


@pytest.mark.parametrize(("replicas", "types"), [(1, {"Worker": 1}), (4, {"Scheduler": 1, "Worker": 4})])
def test_msjob_adds_the_scheduler_mindspore_needs_for_several_workers(replicas, types):
    job = msjob("ms", JobParameters(image="ms:1", command=["python", "train.py"], replicas=replicas, npus=8))
    assert validate(job) == []
    assert {t: s["replicas"] for t, s in job["spec"]["msReplicaSpecs"].items()} == types
    assert containers(job, "msReplicaSpecs")["Worker"]["resources"]["limits"] == {"huawei.com/Ascend910": 8}
    if "Scheduler" in types:
        assert "resources" not in containers(job, "msReplicaSpecs")["Scheduler"]  # no accelerator for the scheduler


def test_bad_parameters_are_each_one_line():
    problems = JobParameters(image="", replicas=0, min_replicas=5, max_replicas=2, gpus=-1).problems()
    assert problems == [
        "image: required when no manifest is given",
        "replicas: must be at least 1, got 0",
        "min_replicas (5) must be between 1 and max_replicas (2)",
        "gpus, npus: must not be negative",
    ]


@pytest.mark.parametrize(("kind", "port_name"), [(PYTORCHJOB, "pytorchjob-port"), (MSJOB, "msjob-port")])
def test_a_port_names_the_framework_port_of_every_replica(kind, port_name):
    job = build(kind, "p", JobParameters(image="img:1", replicas=2, port=29500))
    assert validate(job) == []
    ports = [c.get("ports") for c in containers(job, kind.replica_specs_field).values()]
    assert ports and all(p == [{"name": port_name, "containerPort": 29500}] for p in ports)
    assert "ports" not in containers(build(kind, "p", JobParameters(image="img:1", replicas=2)), kind.replica_specs_field)["Worker"]


def test_a_port_out_of_range_is_a_problem():
    assert JobParameters(image="img:1", port=70000).problems() == [
        "port: must be between 1 and 65535 (0: the kind's default), got 70000"]
