"""The kind registry: one descriptor per kind, read by the api, the plugins and the shell."""

from trainctl.api import kinds
from trainctl.api.crd import crds
from trainctl.controller.frameworks import FRAMEWORKS
from trainctl.kube.restmapper import job_resources, resource_for
from trainctl.launch.job_kinds import kind_of, lead_replica


def test_every_kind_has_its_plugin_and_resource():
    assert [fw.job_kind for fw in FRAMEWORKS.values()] == list(kinds.KINDS)
    assert [(r.api_version, r.kind) for r in job_resources()] == [(k.api_version, k.kind) for k in kinds.KINDS]
    for kind in kinds.KINDS:
        assert resource_for(kind.api_version, kind.kind).plural == kind.plural


def test_crds_come_from_the_descriptors():
    by_kind = {crd["spec"]["names"]["kind"]: crd for crd in crds().values()}
    assert set(by_kind) == set(kinds.BY_KIND)
    scale = by_kind["PyTorchJob"]["spec"]["versions"][0]["subresources"]["scale"]
    assert scale["specReplicasPath"] == ".spec.pytorchReplicaSpecs.Worker.replicas"
    assert "scale" not in by_kind["MSJob"]["spec"]["versions"][0]["subresources"]


def test_lead_replica_is_the_master_else_worker_0():
    with_master = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {"master": {}, "Worker": {}}}}
    workers_only = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {"Worker": {}}}}
    msjob = {"apiVersion": "mindspore.gitee.com/v1", "kind": "MSJob", "spec": {"msReplicaSpecs": {"Scheduler": {}, "Worker": {}}}}
    assert lead_replica(with_master, kind_of(with_master)) == ("master", "0")
    assert lead_replica(workers_only, kind_of(workers_only)) == ("worker", "0")
    assert lead_replica(msjob, kind_of(msjob)) == ("worker", "0")


def test_of_needs_kind_and_api_version_to_match():
    assert kinds.of({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}) is kinds.PYTORCHJOB
    assert kinds.of({"apiVersion": "kubeflow.org/v2", "kind": "PyTorchJob"}) is None
    assert kinds.of({"apiVersion": "mindspore.gitee.com/v1", "kind": "TFJob"}) is None
    assert kinds.of(["not", "a", "job"]) is None
