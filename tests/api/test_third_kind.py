"""A third job kind is its model, its descriptor and its plugin, registered: nothing else.

A throwaway TFJob-like kind (kubeflow.org/v1, Chief and Workers, TF_CONFIG in the
``tensorflow`` container) is defined here, registered for one test, and goes through what
every kind goes through: validation, defaulting, ``trainctl render`` and the pure reconcile
core, plus the readers of the registry (CRD, REST resource, pipeline layout, timeline
order, ``--kind``). Unregistered, it is gone from all of them again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Callable, Literal, Optional

import pytest
import yaml
from pydantic import Field

from trainctl.api import constants as c
from trainctl.api import kinds
from trainctl.api.common import JobStatus, ObjectMeta, ReplicaSpec, RunPolicy, WireModel
from trainctl.api.crd import crds
from trainctl.api.defaults import default_job
from trainctl.api.errors import FieldError, show, supported
from trainctl.api.jobkind import JobKind, MakeReplica, Parameters
from trainctl.api.loader import parse_job
from trainctl.api.replicas import default_replicas, default_run_policy
from trainctl.api.rules import dict_at, int_or_none, validate_template
from trainctl.api.validation import validate
from trainctl.cli.main import build_parser, main
from trainctl.controller import frameworks
from trainctl.controller.frameworks import Framework, framework_for
from trainctl.controller.frameworks.base import ConditionChange, EnvContext, EnvFactory, JobFacts, env
from trainctl.kube.restmapper import resource_for
from trainctl.pipelines.jobspec import JobParameters, build
from trainctl.timeline.model import build_timeline

from tests.support.reconcile import Cluster, by_name, conditions, env_dict

CHIEF, WORKER = "Chief", "Worker"

# --- 1. the model -----------------------------------------------------------------------------


class TFJobSpec(WireModel):
    run_policy: Optional[RunPolicy] = None
    tf_replica_specs: dict[str, ReplicaSpec] = Field(description="Chief and Worker replica specs.")

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.tf_replica_specs


class TFJob(WireModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["TFJob"] = "TFJob"
    metadata: ObjectMeta = Field(default_factory=dict)
    spec: TFJobSpec
    status: Optional[JobStatus] = None


# --- 2. the descriptor, with the kind's defaulting, rules and layout ---------------------------


def default_tfjob(job: TFJob) -> TFJob:
    job.spec.run_policy = default_run_policy(job.spec.run_policy, "Running")
    job.spec.tf_replica_specs = default_replicas(job.spec.tf_replica_specs, TFJOB)
    return job


def validate_tfjob(obj: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    for rtype, rspec in dict_at(dict_at(obj, "spec"), TFJOB.replica_specs_field).items():
        path = TFJOB.replica_path(rtype)
        if rtype not in TFJOB.replica_types:
            errors.append(FieldError(path, "NotSupported", f"unsupported replica type {show(rtype)}; {supported(TFJOB.replica_types)}"))
        elif isinstance(rspec, dict):
            errors += validate_template(path, rspec, TFJOB.container)
            if rtype == CHIEF and int_or_none(rspec.get("replicas")) not in (None, 1):
                errors.append(FieldError(f"{path}.replicas", "Invalid", "must be 1"))
    return errors


def layout_tfjob(p: Parameters, replica: MakeReplica) -> dict[str, Any]:
    specs = {CHIEF: replica(1, True)}
    if p.replicas > 1:
        specs[WORKER] = replica(p.replicas - 1, True)
    return {TFJOB.replica_specs_field: specs}


TFJOB = JobKind(
    kind="TFJob",
    group="kubeflow.org",
    version="v1",
    plural="tfjobs",
    singular="tfjob",
    model=TFJob,
    replica_specs_field="tfReplicaSpecs",
    replica_types=(CHIEF, WORKER),
    container="tensorflow",
    port_name="tfjob-port",
    default_port=2222,
    default_restart_policy="Never",
    controller_name="tfjob-controller",
    framework="tensorflow",
    lead_replica_types=(CHIEF, WORKER),
    defaulter=default_tfjob,
    validator=validate_tfjob,
    layout=layout_tfjob,
    description="TFJob represents a distributed TensorFlow training job.",
)

# --- 3. the plugin ----------------------------------------------------------------------------


class TensorFlowFramework(Framework[TFJob]):
    job_kind = TFJOB
    restart_policy_event = "SetPodTemplateRestartPolicy"
    scheduler_name_event = "SetPodTemplateSchedulerName"
    limit_failure_reason = "TFJobFailed"
    restarting_message = "TFJob {name} is restarting because {rtype} replica(s) failed."

    def service_cluster_ip(self, rtype: str) -> Optional[str]:
        return "None"

    def env_containers(self, template: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
        return lambda container: container.get("name") == TFJOB.container

    def env_factory(self, job: TFJob, rtype: str, ctx: EnvContext) -> EnvFactory:
        cluster = {
            t.lower(): [f"{ctx.name}-{t.lower()}-{i}:{TFJOB.default_port}" for i in range(spec.replicas or 0)]
            for t, spec in job.spec.tf_replica_specs.items()
        }

        def factory(index: int) -> list[dict[str, Any]]:
            return [env("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": rtype.lower(), "index": index}}))]

        return factory

    def is_retryable(self, exit_code: int) -> bool:
        return exit_code >= 128

    def evaluate(self, facts: JobFacts[TFJob]) -> list[ConditionChange]:
        lead = CHIEF if CHIEF in facts.counts else WORKER
        if facts.counts[lead].succeeded >= (facts.job.spec.tf_replica_specs[lead].replicas or 0):
            return [self.change(c.CONDITION_SUCCEEDED, f"TFJob {facts.name} successfully completed.")]
        if any(counts.failed for counts in facts.counts.values()):
            return [self.change(c.CONDITION_FAILED, f"TFJob {facts.name} has failed.")]
        if any(counts.active for counts in facts.counts.values()):
            return [self.change(c.CONDITION_RUNNING, f"TFJob {facts.name} is running.", None)]
        return []


# --- the tests --------------------------------------------------------------------------------


@pytest.fixture
def tfjob_registered() -> Iterator[None]:
    with kinds.registered(TFJOB), frameworks.registered(TensorFlowFramework()):
        yield


def tfjob(name: str = "mnist", workers: int = 2, **chief: Any) -> dict[str, Any]:
    def replica(replicas: int) -> dict[str, Any]:
        return {"replicas": replicas, "template": {"spec": {"containers": [{"name": "tensorflow", "image": "tf:2"}]}}}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"tfReplicaSpecs": {CHIEF: {**replica(1), **chief}, WORKER: replica(workers)}},
    }


def test_an_unregistered_kind_is_not_a_training_job():
    assert [(e.path, e.type) for e in validate(tfjob())] == [("kind", "NotSupported")]
    with pytest.raises(ValueError, match="not a training job kind"):
        framework_for("TFJob")


def test_a_registered_kind_is_validated_by_the_shared_rules_and_its_own(tfjob_registered):
    assert validate(tfjob()) == []
    bad = tfjob(name="Bad_Name", replicas=2)
    bad["spec"]["tfReplicaSpecs"]["PS"] = {"replicas": 1}
    bad["spec"]["tfReplicaSpecs"][WORKER]["template"]["spec"]["containers"][0]["name"] = "main"
    assert {str(error) for error in validate(bad)} == {
        'metadata.name: invalid value "Bad_Name": a DNS-1035 label must consist of lower case letters, digits or '
        "'-', start with a letter and end with a letter or digit",
        "spec.tfReplicaSpecs[Chief].replicas: must be 1",
        'spec.tfReplicaSpecs[PS]: unsupported replica type "PS"; supported values: "Chief", "Worker"',
        "spec.tfReplicaSpecs[Worker].template.spec.containers: must have at least one container with name tensorflow",
    }


def test_a_registered_kind_is_defaulted_by_its_own_defaulter(tfjob_registered):
    job = tfjob()
    del job["spec"]["tfReplicaSpecs"][WORKER]["replicas"]
    defaulted = default_job(parse_job(job)).dump()
    worker = defaulted["spec"]["tfReplicaSpecs"][WORKER]
    assert (worker["replicas"], worker["restartPolicy"]) == (1, "Never")
    assert worker["template"]["spec"]["containers"][0]["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
    assert defaulted["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert "replicas" not in job["spec"]["tfReplicaSpecs"][WORKER]  # a copy was defaulted


def test_trainctl_render_prints_the_pods_its_plugin_makes(tfjob_registered, tmp_path, capsys):
    manifest = tfjob(workers=1)
    del manifest["metadata"]["uid"]
    path = tmp_path / "tfjob.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert main(["render", "-f", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    objects = list(yaml.safe_load_all(out))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Pod", "mnist-chief-0"), ("Pod", "mnist-worker-0"), ("Service", "mnist-chief-0"), ("Service", "mnist-worker-0"),
    ]
    worker = objects[1]
    assert worker["metadata"]["labels"] == {
        c.LABEL_OPERATOR_NAME: "tfjob-controller",
        c.LABEL_JOB_NAME: "mnist",
        c.LABEL_REPLICA_TYPE: "worker",
        c.LABEL_REPLICA_INDEX: "0",
    }
    assert worker["metadata"]["ownerReferences"][0]["kind"] == "TFJob"
    tf_config = json.loads(env_dict(worker)["TF_CONFIG"])
    assert tf_config == {"cluster": {"chief": ["mnist-chief-0:2222"], "worker": ["mnist-worker-0:2222"]}, "task": {"type": "worker", "index": 0}}
    assert objects[2]["spec"]["clusterIP"] == "None"


def test_the_reconcile_core_drives_it_through_its_plugin(tfjob_registered):
    cluster = Cluster(tfjob(workers=2))
    plan = cluster.step()
    pods = by_name([o for o in plan.creates if o["kind"] == "Pod"])
    assert list(pods) == ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1"]
    assert json.loads(env_dict(pods["mnist-worker-1"])["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
    assert pods["mnist-chief-0"]["spec"]["restartPolicy"] == "Never"
    assert ("Created", "True", "TFJobCreated") in conditions(cluster.job["status"])

    cluster.set_all("Running")
    cluster.step()
    assert ("Running", "True", "TFJobRunning") in conditions(cluster.job["status"])

    cluster.set_phase("mnist-chief-0", "Succeeded")
    cluster.step()
    assert ("Succeeded", "True", "TFJobSucceeded") in conditions(cluster.job["status"])
    assert cluster.job["status"]["replicaStatuses"][CHIEF] == {"succeeded": 1}


def test_every_reader_of_the_registry_serves_it_while_it_is_registered(tfjob_registered):
    assert "kubeflow.org_tfjobs.yaml" in crds()
    assert resource_for("kubeflow.org/v1", "TFJob").path("default", "mnist") == "/apis/kubeflow.org/v1/namespaces/default/tfjobs/mnist"
    built = build(TFJOB, "steps", JobParameters(image="tf:2", replicas=3))
    assert validate(built) == []
    assert {t: s["replicas"] for t, s in built["spec"]["tfReplicaSpecs"].items()} == {CHIEF: 1, WORKER: 2}
    pods = [
        {"metadata": {"name": f"t-{rtype}-0", "uid": rtype, "labels": {c.LABEL_REPLICA_TYPE: rtype, c.LABEL_REPLICA_INDEX: "0"},
                      "ownerReferences": [{"uid": "uid-t", "controller": True}]}}
        for rtype in ("worker", "chief")
    ]
    timeline = build_timeline(job={"kind": "TFJob", "metadata": {"name": "t", "uid": "uid-t"}}, pods=pods, now=0.0)
    assert [row.replica_type for row in timeline.rows] == [CHIEF, WORKER]
    args = build_parser().parse_args(["timeline", "mnist", "--kind", "tfjob"])
    assert args.kind == "tfjob"


def test_unregistered_it_is_gone_from_every_reader():
    with kinds.registered(TFJOB), frameworks.registered(TensorFlowFramework()):
        assert framework_for("TFJob").kind == "TFJob"
    assert kinds.find("TFJob") is None
    assert "kubeflow.org_tfjobs.yaml" not in crds()
    with pytest.raises(KeyError):
        resource_for("kubeflow.org/v1", "TFJob")
    with pytest.raises(ValueError, match="not a training job kind"):
        framework_for("TFJob")


def test_a_plugin_needs_its_kind_registered_and_names_are_unique():
    with pytest.raises(ValueError, match="register the job kind 'TFJob'"):
        frameworks.register(TensorFlowFramework())
    with pytest.raises(ValueError, match="'PyTorchJob' is registered already"):
        kinds.register(kinds.PYTORCHJOB)
    assert [k.kind for k in kinds.KINDS] == ["PyTorchJob", "MSJob"]
