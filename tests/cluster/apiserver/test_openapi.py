"""The OpenAPI documents: ``kubectl explain`` for CRDs and built-in kinds, kubectl's apply and
validation reading them, and the documents themselves (index, hashes, v2)."""

from __future__ import annotations

import json

import pytest
import requests

from tests.support.jobs import msjob, pytorchjob

pytestmark = pytest.mark.usefixtures("crds")


def get(apiserver, path: str, **headers: str) -> requests.Response:
    return requests.get(apiserver.url + path, timeout=30, verify=str(apiserver.ca_cert),
                        headers={"Authorization": f"Bearer {apiserver.token}", **headers})


def test_explain_custom_resources_from_their_crd_schemas(kubectl):
    elastic = kubectl("explain", "pytorchjob.spec.elasticPolicy")
    assert "KIND:       PyTorchJob" in elastic and "FIELD: elasticPolicy <Object>" in elastic
    assert "minReplicas\t<integer>" in elastic
    assert "Lower bound of Worker replicas" in elastic
    assert "enum: c10d, etcd, etcd-v2" in elastic
    spec = kubectl("explain", "msjob.spec")
    assert "msReplicaSpecs\t<map[string]Object> -required-" in spec
    assert "Scheduler, PS and Worker replica specs." in spec
    top = kubectl("explain", "pytorchjobs")
    assert "metadata\t<ObjectMeta>" in top and "PyTorchJob represents a distributed PyTorch training job." in top


@pytest.mark.parametrize(("field", "words"), [
    ("rdzvPort", "Port of the rendezvous endpoint"),
    ("rdzvHost", "Host of the rendezvous endpoint"),
    ("rdzvId", "Rendezvous id"),
    ("standalone", "torchrun --standalone"),
    ("maxRestarts", "torchrun --max-restarts"),
])
def test_explain_describes_every_elastic_field(kubectl, field, words):
    explained = kubectl("explain", f"pytorchjob.spec.elasticPolicy.{field}")
    assert f"FIELD: {field} <" in explained
    assert words in " ".join(explained.split())  # kubectl wraps descriptions


def test_explain_builtin_kinds_from_kubernetes_schemas(kubectl):
    containers = kubectl("explain", "pod.spec.containers")
    assert "FIELD: containers <[]Container>" in containers
    assert "List of containers belonging to the pod." in containers
    assert "imagePullPolicy\t<string>" in containers and "ports\t<[]ContainerPort>" in containers
    port = kubectl("explain", "pod.spec.containers.ports.containerPort")
    assert "Number of port to expose on the pod's IP address." in port
    pod = kubectl("explain", "pods")
    assert "spec\t<PodSpec>" in pod and "enum: v1" not in pod
    for kind in ("configmap.data", "service.spec.ports", "hpa.spec.scaleTargetRef", "namespace", "node.status",
                 "events.involvedObject", "lease.spec", "crd.spec.versions", "serviceaccount", "secret", "endpoints"):
        assert "DESCRIPTION:" in kubectl("explain", kind), kind
    resources = kubectl("explain", "pod.spec.containers.resources.requests")
    assert "<map[string]Quantity>" in resources


def test_explain_follows_a_crd_change(kubectl):
    assert "elasticPolicy" in kubectl("explain", "pytorchjob.spec")
    crd = kubectl.json("get", "crd", "pytorchjobs.kubeflow.org")
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["properties"]["addedForTheTest"] = {"type": "string", "description": "A field added by the test."}
    kubectl("replace", "-f", "-", input=json.dumps(crd))
    assert "A field added by the test." in kubectl("explain", "pytorchjob.spec.addedForTheTest")


def test_apply_uses_the_documents_and_strict_validation_reports_unknown_fields(kubectl):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}]}]}}
    assert "pod/p created" in kubectl("apply", "-f", "-", input=json.dumps(pod))
    pod["spec"]["containers"][0]["image"] = "busybox:1.37"
    assert "pod/p configured" in kubectl("apply", "-f", "-", input=json.dumps(pod))  # a strategic merge patch
    assert [(c["image"], len(c["env"])) for c in kubectl.json("get", "pod", "p")["spec"]["containers"]] == [
        ("busybox:1.37", 1)]
    pod["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    strict = kubectl.run("apply", "--validate=strict", "-f", "-", input=json.dumps(pod), check=False)
    assert strict.returncode == 1 and 'unknown field "spec.containers[0].imagePullPolicyy"' in strict.stderr

    job = pytorchjob("pt", restart="OnFailure", namespace=None, uid=None)
    assert "created" in kubectl("apply", "-f", "-", input=json.dumps(job))
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    assert "configured" in kubectl("apply", "-f", "-", input=json.dumps(job))  # a merge patch: CRs have no strategy
    job["spec"]["elasticPolicy"] = {"minReplica": 1}
    strict = kubectl.run("apply", "--validate=strict", "-f", "-", input=json.dumps(job), check=False)
    assert strict.returncode == 1 and 'unknown field "spec.elasticPolicy.minReplica"' in strict.stderr
    assert "created" in kubectl("apply", "--validate=strict", "-f", "-", input=json.dumps(msjob("ms", restart="Never", namespace=None, uid=None)))


def test_v3_index_hashes_and_documents(apiserver):
    index = get(apiserver, "/openapi/v3").json()["paths"]
    assert {"api/v1", "apis/kubeflow.org/v1", "apis/mindspore.gitee.com/v1", "apis/autoscaling/v2"} <= set(index)
    url = index["apis/kubeflow.org/v1"]["serverRelativeURL"]
    hashed = get(apiserver, url)
    assert hashed.headers["Cache-Control"].startswith("public, immutable")
    document = hashed.json()
    schemas = document["components"]["schemas"]
    assert schemas["org.kubeflow.v1.PyTorchJob"]["x-kubernetes-group-version-kind"] == [
        {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"}]
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
    patch = document["paths"]["/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    core = get(apiserver, index["api/v1"]["serverRelativeURL"]).json()
    pod_patch = core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" in pod_patch["requestBody"]["content"]
    containers = core["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert get(apiserver, "/openapi/v3/apis/nothing.example.com/v1").status_code == 404


def test_explain_from_openapi_v2_in_protobuf(kubectl):
    ports = kubectl("explain", "--output=plaintext-openapiv2", "pod.spec.containers.ports")
    assert "containerPort\t<integer> -required-" in ports and "Number of port to expose" in ports
    elastic = kubectl("explain", "--output=plaintext-openapiv2", "pytorchjob.spec.elasticPolicy")
    assert "VERSION:  kubeflow.org/v1" in elastic and "Lower bound of Worker replicas" in elastic
    assert "msReplicaSpecs" in kubectl("explain", "--output=plaintext-openapiv2", "msjob.spec")


def test_v2_is_served_as_json(apiserver):
    document = get(apiserver, "/openapi/v2", Accept="application/json").json()
    assert document["swagger"] == "2.0"
    definitions = document["definitions"]
    assert definitions["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Pod", "version": "v1"}]
    assert "org.kubeflow.v1.PyTorchJob" in definitions and "io.k8s.api.core.v1.Container" in definitions
    assert definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["items"] == {
        "$ref": "#/definitions/io.k8s.api.core.v1.Container"}
