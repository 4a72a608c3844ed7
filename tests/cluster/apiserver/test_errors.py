"""Refusals over plain HTTPS: each is a ``metav1.Status`` with the right code and reason,
and a refused write stores nothing."""

from __future__ import annotations

import json
import os
import stat

import pytest
import requests

from tests.support.jobs import pytorchjob

pytestmark = pytest.mark.usefixtures("crds")
JOBS = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"


@pytest.fixture
def http(apiserver):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {apiserver.token}"
    base, ca = apiserver.url, str(apiserver.ca_cert)

    def call(method: str, path: str, **kwargs):
        return session.request(method, base + path, timeout=10, verify=ca, **kwargs)

    yield call
    session.close()


def status_of(response) -> dict:
    body = response.json()
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == response.status_code
    return body


def stored_jobs(http) -> list[str]:
    return [j["metadata"]["name"] for j in http("GET", JOBS).json()["items"]]


def test_requests_without_the_token_are_unauthorized(apiserver):
    for headers in ({}, {"Authorization": "Bearer not-the-token"}):
        response = requests.get(apiserver.url + "/api/v1/pods", headers=headers, verify=str(apiserver.ca_cert), timeout=10)
        assert response.status_code == 401
        assert status_of(response)["reason"] == "Unauthorized"
    assert requests.get(apiserver.url + "/healthz", verify=str(apiserver.ca_cert), timeout=10).text == "ok"
    for name in ("kubeconfig", "token"):
        assert stat.S_IMODE(os.stat(apiserver.dir / name).st_mode) == 0o600


def test_malformed_json_is_a_bad_request(http):
    response = http(
        "POST", JOBS, data=b'{"apiVersion": "kubeflow.org/v1", "kind": ', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert status_of(response)["reason"] == "BadRequest"
    assert stored_jobs(http) == []


def test_unknown_resource_is_not_found(http):
    for path in ("/apis/kubeflow.org/v1/namespaces/default/tfjobs", "/apis/nope.example.com/v1/things", "/api/v2/pods"):
        response = http("GET", path)
        assert response.status_code == 404, path
        assert status_of(response)["reason"] == "NotFound"


def test_schema_violations_are_invalid_with_every_field(http):
    job = pytorchjob("bad", restart="OnFailure", namespace=None, uid=None)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    response = http("POST", JOBS, json=job)
    assert response.status_code == 422
    body = status_of(response)
    assert body["reason"] == "Invalid"
    assert body["details"]["kind"] == "PyTorchJob" and body["details"]["group"] == "kubeflow.org"
    fields = {c["field"]: c["reason"] for c in body["details"]["causes"]}
    # The CEL rules wait for the types to be right, and one cause says so (as kube-apiserver's).
    assert fields == {"spec.pytorchReplicaSpecs[Worker].replicas": "FieldValueTypeInvalid",
                      "spec.pytorchReplicaSpecs[Worker].restartPolicy": "FieldValueNotSupported",
                      "<nil>": "FieldValueInvalid"}
    assert stored_jobs(http) == []


def test_cel_rules_are_enforced_on_create_and_as_transition_rules(http):
    job = pytorchjob("cel", restart="OnFailure", namespace=None, uid=None)
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    response = http("POST", JOBS, json=job)
    assert response.status_code == 422
    causes = status_of(response)["details"]["causes"]
    assert [(c["field"], c["message"]) for c in causes] == [
        ("spec.pytorchReplicaSpecs", 'Invalid value: "object": Master replicas must be 1')]
    assert stored_jobs(http) == []

    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 1
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "a"}}
    assert http("POST", JOBS, json=job).status_code == 201
    moved = http("PATCH", f"{JOBS}/cel", data=json.dumps({"spec": {"runPolicy": {"schedulingPolicy": {"queue": "b"}}}}),
                 headers={"Content-Type": "application/merge-patch+json"})
    assert moved.status_code == 422
    assert "queue is immutable" in status_of(moved)["message"]
    assert http("GET", f"{JOBS}/cel").json()["spec"]["runPolicy"]["schedulingPolicy"]["queue"] == "a"


def test_unknown_fields_strict_is_refused_warn_is_pruned_with_a_warning(http):
    job = pytorchjob("strict", restart="OnFailure", namespace=None, uid=None)
    job["spec"]["surprise"] = 1
    strict = http("POST", JOBS + "?fieldValidation=Strict", json=job)
    assert strict.status_code == 400
    assert 'unknown field "spec.surprise"' in status_of(strict)["message"]
    warned = http("POST", JOBS, json=job)
    assert warned.status_code == 201
    assert 'unknown field \\"spec.surprise\\"' in warned.headers["Warning"] or "spec.surprise" in warned.headers["Warning"]
    assert "surprise" not in warned.json()["spec"]


def test_strategic_merge_patch_on_a_custom_resource_is_unsupported(http):
    assert http("POST", JOBS, json=pytorchjob("smp", restart="OnFailure", namespace=None, uid=None)).status_code == 201
    response = http("PATCH", f"{JOBS}/smp", data="{}", headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert response.status_code == 415
    assert status_of(response)["reason"] == "UnsupportedMediaType"


def test_missing_namespace_and_wrong_kind(http):
    response = http("POST", "/api/v1/namespaces/nowhere/configmaps", json={"metadata": {"name": "x"}})
    assert response.status_code == 404 and status_of(response)["message"] == 'namespaces "nowhere" not found'
    response = http("POST", "/api/v1/namespaces/default/configmaps", json={"kind": "Secret", "metadata": {"name": "x"}})
    assert response.status_code == 400
    assert http("GET", "/api/v1/namespaces/default/configmaps").json()["items"] == []


def test_bad_query_parameters_are_bad_requests(http):
    for query in ("watch=maybe", "labelSelector=a%20in%20(", "fieldSelector=spec.secret%3Dx", "limit=ten"):
        response = http("GET", "/api/v1/namespaces/default/pods?" + query)
        assert response.status_code == 400, query
        assert status_of(response)["reason"] == "BadRequest"


def test_unchanged_values_are_not_revalidated_after_a_schema_tightens(http):
    def widget_crd(maximum: int | None) -> dict:
        size = {"type": "integer"} if maximum is None else {"type": "integer", "maximum": maximum}
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                         "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                             "type": "object", "properties": {"spec": {"type": "object", "properties": {
                                 "size": size, "color": {"type": "string"}}}}}}}]}}

    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    widgets = "/apis/example.com/v1/namespaces/default/widgets"
    merge = {"Content-Type": "application/merge-patch+json"}
    assert http("POST", crds, json=widget_crd(None)).status_code == 201
    assert http("POST", widgets, json={"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                                       "spec": {"size": 10}}).status_code == 201
    current = http("GET", f"{crds}/widgets.example.com").json()
    tightened = widget_crd(5)
    tightened["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    assert http("PUT", f"{crds}/widgets.example.com", json=tightened).status_code == 200
    assert http("PATCH", f"{widgets}/w", data='{"spec": {"color": "red"}}', headers=merge).status_code == 200
    refused = http("PATCH", f"{widgets}/w", data='{"spec": {"size": 9}}', headers=merge)
    assert refused.status_code == 422
    assert status_of(refused)["details"]["causes"][0]["field"] == "spec.size"


def test_a_path_nobody_serves_is_a_404_with_empty_details(http):
    """As kube-apiserver's: clients read ``details`` without checking it is there."""
    for path in ("/api/v1/namespaces/default/pods/p/nosuchsubresource", "/apis/nothing.example/v1/things", "/nope"):
        body = status_of(http("GET", path))
        assert body["reason"] == "NotFound" and body["details"] == {}


def test_a_forbidden_namespace_delete_names_what_was_refused(http):
    body = status_of(http("DELETE", "/api/v1/namespaces/default"))
    assert body["code"] == 403 and body["details"] == {"name": "default", "kind": "namespaces"}


def test_an_already_exists_body_is_kubes_byte_for_byte(http):
    """The Python client's ``create_from_yaml`` quotes the body verbatim in its error, and its
    own e2e suite compares that text: kube's field order, no empty ``group`` for the core group,
    a final newline."""
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "twice"}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "twice"},
                  "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {
                      "metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    for path, body, expected in (
            ("/api/v1/namespaces/default/configmaps", configmap,
             b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
             b'"message":"configmaps \\"twice\\" already exists","reason":"AlreadyExists",'
             b'"details":{"name":"twice","kind":"configmaps"},"code":409}\n'),
            ("/apis/apps/v1/namespaces/default/deployments", deployment,
             b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
             b'"message":"deployments.apps \\"twice\\" already exists","reason":"AlreadyExists",'
             b'"details":{"name":"twice","group":"apps","kind":"deployments"},"code":409}\n')):
        assert http("POST", path, json=body).status_code == 201
        again = http("POST", path, json=body)
        assert again.status_code == 409
        assert again.content == expected
