"""Malformed input of every shape gets a Status error of the 4xx kind, never a 500 (an
internal error would mean a traceback in the server log and a useless message for the user).
Some of these bodies are acceptable for some kinds (a Service ignores unknown fields); those
must simply succeed."""

from __future__ import annotations

import json

import pytest
import requests

from tests.support.jobs import pytorchjob

pytestmark = pytest.mark.usefixtures("crds")

BODIES = [
    [], "x", 1, None, {"metadata": []}, {"metadata": {"name": 5}}, {"metadata": {"name": "ok", "labels": {"a": 1}}},
    {"metadata": {"name": "ok", "ownerReferences": [{"uid": 1}]}}, {"metadata": {"name": "ok"}, "spec": "x"},
    {"metadata": {"name": "ok"}, "spec": {"containers": "x"}}, {"metadata": {"name": "ok"}, "spec": {"containers": [1]}},
    {"metadata": {"name": "ok"}, "spec": {"ports": "x", "clusterIP": 7}},
    {"metadata": {"name": "ok"}, "spec": {"pytorchReplicaSpecs": {"Master": "x"}}},
    {"metadata": {"name": "Not_A_Name"}},
]
COLLECTIONS = [
    "/api/v1/namespaces/default/pods", "/api/v1/namespaces/default/services", "/api/v1/namespaces/default/configmaps",
    "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "/api/v1/namespaces",
]
PATCHES = [
    ("application/json-patch+json", '{"op": "add"}'), ("application/json-patch+json", '[{"op": "remove", "path": "/nope"}]'),
    ("application/json-patch+json", '[{"op": "replace", "path": "/metadata", "value": 3}]'),
    ("application/merge-patch+json", "[1]"), ("application/merge-patch+json", '{"metadata": {"name": "other"}}'),
    ("application/merge-patch+json", '{"metadata": {"finalizers": "x"}}'),
    ("application/apply-patch+yaml", "a: [b"), ("application/apply-patch+yaml", "- 1"),
    ("application/strategic-merge-patch+json", '{"spec": {"containers": [{"$patch": "delete"}]}}'),
    ("text/plain", "hello"),
]


@pytest.fixture
def call(apiserver):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {apiserver.token}"

    def request(method: str, path: str, body: str | None = None, content_type: str = "application/json"):
        response = session.request(method, apiserver.url + path, data=body, timeout=10, verify=str(apiserver.ca_cert),
                                   headers={"Content-Type": content_type})
        assert response.status_code < 500, (method, path, body, response.status_code, response.text)
        if response.status_code >= 400:
            assert response.json()["kind"] == "Status"
        return response.status_code

    yield request
    session.close()


def test_malformed_creates_are_client_errors(call):
    codes = [call("POST", path, json.dumps(body)) for path in COLLECTIONS for body in BODIES]
    assert sum(400 <= code < 500 for code in codes) >= len(codes) - 3  # all but what services ignore


def test_malformed_updates_patches_and_subresources_are_client_errors(apiserver, call):
    requests.post(
        apiserver.url + "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs",
        json=pytorchjob("job", restart="OnFailure", namespace=None, uid=None),
        headers={"Authorization": f"Bearer {apiserver.token}"},
        verify=str(apiserver.ca_cert),
        timeout=10,
    )
    requests.post(apiserver.url + "/api/v1/namespaces/default/pods", verify=str(apiserver.ca_cert), timeout=10,
                  headers={"Authorization": f"Bearer {apiserver.token}"},
                  json={"metadata": {"name": "pod"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    items = ["/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/job", "/api/v1/namespaces/default/pods/pod"]
    for path in items:
        for body in BODIES:
            call("PUT", path, json.dumps(body))
        for content_type, patch in PATCHES:
            call("PATCH", path, patch, content_type)
    for body in BODIES[:4]:
        call("PUT", items[0] + "/scale", json.dumps(body))
        call("POST", items[1] + "/binding", json.dumps(body))
    call("PATCH", items[0] + "/scale", '{"spec": {"replicas": "many"}}', "application/merge-patch+json")
    call("DELETE", items[1], '{"propagationPolicy": "Sometimes"}')
    call("DELETE", items[1], "{not json")


def crd(schema: object, **version: object) -> str:
    return json.dumps({"metadata": {"name": "things.example.com"}, "spec": {
        "group": "example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}, **version}]}})


def test_malformed_crds_are_invalid(call):
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    bad = [
        crd({"type": "object", "properties": "x"}),
        crd({"type": "object", "properties": {"spec": {"type": "float"}}}),
        crd({"type": "object", "required": "spec"}),
        crd({"type": "object", "x-kubernetes-validations": [{"rule": "self.a +"}]}),
        crd({"type": "object"}, additionalPrinterColumns=[{"name": "X", "type": "string", "jsonPath": ".status[?("}]),
        crd({"type": "object"}, subresources={"scale": {"specReplicasPath": ".spec.items[0].replicas"}}),
    ]
    for body in bad:
        assert call("POST", path, body) == 422, body
    assert call("GET", "/apis/example.com/v1/namespaces/default/things") == 404  # nothing was registered
