"""Built-in objects are checked as kube-apiserver checks them: types, names, ports, quantities,
required fields, on create, update and patch, with a 422 that names each field."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from kubernetes import client, config

from trainctl.cluster.apiserver.admission.builtin_rules import OBJECT_RULES

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = sorted(p for p in (ROOT / "samples").rglob("*.yaml") if "pipelines" not in p.parts)
PODS = "/api/v1/namespaces/default/pods"


def pod(name: str = "p", /, **container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1"],
                                     "ports": [{"containerPort": 8080}],
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}, **container}]}}


class Api:
    def __init__(self, apiserver: Any) -> None:
        self.url = apiserver.url
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {apiserver.token}"
        self.ca_cert = str(apiserver.ca_cert)

    def send(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             **params: str) -> requests.Response:
        data = body if isinstance(body, str) or body is None else json.dumps(body)
        return self.session.request(method, self.url + path, data=data, params=params, timeout=10,
                                    verify=self.ca_cert, headers={"Content-Type": content_type})


@pytest.fixture
def api(apiserver: Any) -> Iterator[Api]:
    client = Api(apiserver)
    yield client
    client.session.close()


def causes(response: requests.Response) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    status = response.json()
    assert status["kind"] == "Status" and status["reason"] == "Invalid"
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


def with_container(**fields: Any) -> dict[str, Any]:
    return pod(**fields)


INVALID_PODS = [
    (with_container(command="sleep 1"), "spec.containers[0].command", "FieldValueTypeInvalid"),
    (with_container(args={"a": 1}), "spec.containers[0].args", "FieldValueTypeInvalid"),
    (with_container(resources={"requests": {"cpu": "abc"}}), "spec.containers[0].resources.requests[cpu]",
     "FieldValueInvalid"),
    (with_container(resources={"limits": {"memory": "-1Gi"}}), "spec.containers[0].resources.limits[memory]",
     "FieldValueInvalid"),
    (with_container(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
     "spec.containers[0].resources.requests[cpu]", "FieldValueInvalid"),
    (with_container(ports=[{"containerPort": 99999}]), "spec.containers[0].ports[0].containerPort", "FieldValueInvalid"),
    (with_container(ports=[{"containerPort": 0}]), "spec.containers[0].ports[0].containerPort", "FieldValueInvalid"),
    (with_container(ports=[{"name": "http"}]), "spec.containers[0].ports[0].containerPort", "FieldValueRequired"),
    (with_container(ports=[{"containerPort": 80, "protocol": "HTTP"}]), "spec.containers[0].ports[0].protocol",
     "FieldValueNotSupported"),
    (with_container(name="../escape"), "spec.containers[0].name", "FieldValueInvalid"),
    (with_container(name="a/b"), "spec.containers[0].name", "FieldValueInvalid"),
    (with_container(name="x" * 64), "spec.containers[0].name", "FieldValueInvalid"),
    (with_container(env=[{"name": "A=B", "value": "1"}]), "spec.containers[0].env[0].name", "FieldValueInvalid"),
    (with_container(env=[{"value": "1"}]), "spec.containers[0].env[0].name", "FieldValueRequired"),
    (with_container(env=[{"name": "A", "value": 1}]), "spec.containers[0].env[0].value", "FieldValueTypeInvalid"),
    (with_container(imagePullPolicy="Sometimes"), "spec.containers[0].imagePullPolicy", "FieldValueNotSupported"),
    (with_container(tty="yes"), "spec.containers[0].tty", "FieldValueTypeInvalid"),
    (with_container(livenessProbe={"periodSeconds": 5}), "spec.containers[0].livenessProbe", "FieldValueRequired"),
    (with_container(readinessProbe={"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}),
     "spec.containers[0].readinessProbe.tcpSocket", "FieldValueForbidden"),
    (with_container(livenessProbe={"exec": {"command": ["true"]}, "successThreshold": 2}),
     "spec.containers[0].livenessProbe.successThreshold", "FieldValueInvalid"),
    (with_container(startupProbe={"exec": {"command": ["true"]}, "successThreshold": 3}),
     "spec.containers[0].startupProbe.successThreshold", "FieldValueInvalid"),
    (with_container(readinessProbe={"tcpSocket": {"port": 80}, "failureThreshold": -1}),
     "spec.containers[0].readinessProbe.failureThreshold", "FieldValueInvalid"),
    (with_container(readinessProbe={"tcpSocket": {"port": 80}, "terminationGracePeriodSeconds": 5}),
     "spec.containers[0].readinessProbe.terminationGracePeriodSeconds", "FieldValueInvalid"),
    (with_container(livenessProbe={"httpGet": {"port": 99999}}), "spec.containers[0].livenessProbe.httpGet.port",
     "FieldValueInvalid"),
    (with_container(livenessProbe={"httpGet": {"port": 80, "scheme": "FTP"}}),
     "spec.containers[0].livenessProbe.httpGet.scheme", "FieldValueNotSupported"),
    (with_container(livenessProbe={"exec": {}}), "spec.containers[0].livenessProbe.exec.command", "FieldValueRequired"),
    (with_container(readinessProbe={"tcpSocket": {}}), "spec.containers[0].readinessProbe.tcpSocket.port",
     "FieldValueRequired"),
]


@pytest.mark.parametrize(("body", "field", "reason"), INVALID_PODS, ids=[c[1] + ":" + c[2] for c in INVALID_PODS])
def test_invalid_pods_are_refused_with_the_field_path(api, body, field, reason):
    response = api.send("POST", PODS, body)
    assert (field, reason) in causes(response)
    assert api.send("GET", f"{PODS}/p").status_code == 404


def test_invalid_message_has_kube_apiservers_shape(api):
    response = api.send("POST", PODS, pod("x", ports=[{"containerPort": 99999}]))
    assert response.json()["message"] == ('Pod "x" is invalid: spec.containers[0].ports[0].containerPort: '
                                          "Invalid value: 99999: must be between 1 and 65535, inclusive")
    several = api.send("POST", PODS, pod("x", name="a/b", command="run", ports=[{"containerPort": 99999}]))
    assert len(causes(several)) == 3
    assert several.json()["message"].startswith('Pod "x" is invalid: [')


def test_probe_problems_read_as_kube_apiservers(api):
    response = api.send("POST", PODS, pod("x", livenessProbe={"tcpSocket": {"port": 80}, "successThreshold": 2}))
    assert response.json()["message"] == ('Pod "x" is invalid: spec.containers[0].livenessProbe.successThreshold: '
                                          "Invalid value: 2: must be 1")
    no_handler = api.send("POST", PODS, pod("x", startupProbe={"periodSeconds": 1}))
    assert no_handler.json()["message"] == ('Pod "x" is invalid: spec.containers[0].startupProbe: '
                                            "Required value: must specify a handler type")
    init = pod("x")
    init["spec"]["initContainers"] = [{"name": "setup", "image": "busybox", "command": ["true"],
                                       "readinessProbe": {"exec": {"command": ["true"]}}}]
    assert causes(api.send("POST", PODS, init)) == [("spec.initContainers[0].readinessProbe", "FieldValueForbidden")]
    fine = pod("fine", readinessProbe={"httpGet": {"path": "/healthz", "port": 8080}, "successThreshold": 2},
               livenessProbe={"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 5},
               startupProbe={"tcpSocket": {"port": "http"}, "failureThreshold": 30, "periodSeconds": 1})
    created = api.send("POST", PODS, fine)
    assert created.status_code == 201
    readiness = created.json()["spec"]["containers"][0]["readinessProbe"]
    assert readiness == {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "successThreshold": 2,
                         "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3}


def test_pod_spec_and_names_beyond_containers(api):
    bad_restart = pod()
    bad_restart["spec"]["restartPolicy"] = "Sometimes"
    assert ("spec.restartPolicy", "FieldValueNotSupported") in causes(api.send("POST", PODS, bad_restart))
    no_containers = pod()
    del no_containers["spec"]["containers"]
    assert ("spec.containers", "FieldValueRequired") in causes(api.send("POST", PODS, no_containers))
    bad_label = pod()
    bad_label["metadata"]["labels"] = {"a/b/c": "x", "ok": "not valid!"}
    assert causes(api.send("POST", PODS, bad_label)) == [("metadata.labels", "FieldValueInvalid")] * 2
    bad_volume = pod()
    bad_volume["spec"]["volumes"] = [{"name": "Data", "emptyDir": {}}]
    assert ("spec.volumes[0].name", "FieldValueInvalid") in causes(api.send("POST", PODS, bad_volume))


def test_other_builtin_kinds(api):
    configmaps = "/api/v1/namespaces/default/configmaps"
    cm = {"metadata": {"name": "cm"}, "data": {"n": 1, "l": [1], "bad key": "x"}}
    assert sorted(causes(api.send("POST", configmaps, cm))) == [
        ("data[bad key]", "FieldValueInvalid"), ("data[l]", "FieldValueTypeInvalid"), ("data[n]", "FieldValueTypeInvalid")]
    services = "/api/v1/namespaces/default/services"
    service = {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 70000, "targetPort": "Not_A_Port"}]}}
    assert causes(api.send("POST", services, service)) == [
        ("spec.ports[0].port", "FieldValueInvalid"), ("spec.ports[0].targetPort", "FieldValueInvalid")]
    assert ("metadata.name", "FieldValueInvalid") in causes(
        api.send("POST", services, {"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}}))
    assert ("metadata.name", "FieldValueInvalid") in causes(api.send("POST", "/api/v1/namespaces", {"metadata": {"name": "a.b"}}))
    hpa = {"metadata": {"name": "h"}, "spec": {"minReplicas": "one"}}
    assert sorted(causes(api.send("POST", "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", hpa))) == [
        ("spec.maxReplicas", "FieldValueRequired"), ("spec.minReplicas", "FieldValueTypeInvalid"),
        ("spec.scaleTargetRef", "FieldValueRequired")]


HPAS = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"


def hpa(low: Any, high: Any, name: str = "h") -> dict[str, Any]:
    spec: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j"},
                            "maxReplicas": high}
    if low is not None:
        spec["minReplicas"] = low
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(("low", "high", "expected"), [
    (5, 2, [("spec.maxReplicas", "Invalid value: 2: must be greater than or equal to `minReplicas`")]),
    (0, 3, [("spec.minReplicas", "Invalid value: 0: must be greater than or equal to 1")]),
    (None, 0, [("spec.maxReplicas", "Invalid value: 0: must be greater than 0")]),
    (1, 0, [("spec.maxReplicas", "Invalid value: 0: must be greater than 0"),
            ("spec.maxReplicas", "Invalid value: 0: must be greater than or equal to `minReplicas`")]),
])
def test_hpa_replica_bounds_are_kube_apiservers(api, low, high, expected):
    """An HPA whose bounds cross (or that could scale its target to nothing) would flip the
    target between them: kube-apiserver refuses it, with these paths and words."""
    response = api.send("POST", HPAS, hpa(low, high))
    assert causes(response)  # a 422
    assert [(c["field"], c["message"]) for c in response.json()["details"]["causes"]] == expected
    assert api.send("GET", f"{HPAS}/h").status_code == 404


def test_hpa_bounds_are_checked_on_update(api):
    assert api.send("POST", HPAS, hpa(1, 3)).status_code == 201
    crossed = {"spec": {"minReplicas": 5, "maxReplicas": 2}}
    assert causes(api.send("PATCH", f"{HPAS}/h", crossed, "application/merge-patch+json")) == [
        ("spec.maxReplicas", "FieldValueInvalid")]
    assert api.send("GET", f"{HPAS}/h").json()["spec"]["maxReplicas"] == 3
    assert api.send("PATCH", f"{HPAS}/h", {"spec": {"maxReplicas": 4}}, "application/merge-patch+json").status_code == 200


def test_an_hpa_stored_with_min_replicas_0_may_keep_it():
    """kube-apiserver allows minReplicas 0 on update when the stored HPA has it (it was created
    under the HPAScaleToZero gate), so an old object is not stuck."""
    rule = OBJECT_RULES[("autoscaling", "HorizontalPodAutoscaler")]
    assert rule(hpa(0, 4), hpa(0, 3)) == []
    assert [c.field for c in rule(hpa(0, 4), hpa(1, 3))] == ["spec.minReplicas"]


def test_updates_and_patches_are_validated_on_their_result(api):
    assert api.send("POST", PODS, pod()).status_code == 201
    port = [{"op": "replace", "path": "/spec/containers/0/ports/0/containerPort", "value": 99999}]
    assert causes(api.send("PATCH", f"{PODS}/p", json.dumps(port), "application/json-patch+json")) == [
        ("spec.containers[0].ports[0].containerPort", "FieldValueInvalid")]
    strategic = {"spec": {"containers": [{"name": "main", "command": "sleep"}]}}
    assert ("spec.containers[0].command", "FieldValueTypeInvalid") in causes(
        api.send("PATCH", f"{PODS}/p", strategic, "application/strategic-merge-patch+json"))
    current = api.send("GET", f"{PODS}/p").json()
    current["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    assert ("spec.containers[0].resources.requests[cpu]", "FieldValueInvalid") in causes(api.send("PUT", f"{PODS}/p", current))
    labels = {"metadata": {"labels": {"team": "ml"}}}
    assert api.send("PATCH", f"{PODS}/p", labels, "application/merge-patch+json").status_code == 200
    configmaps = "/api/v1/namespaces/default/configmaps"
    assert api.send("POST", configmaps, {"metadata": {"name": "cm"}, "data": {"a": "1"}}).status_code == 201
    assert causes(api.send("PATCH", f"{configmaps}/cm", {"data": {"a": 2}}, "application/merge-patch+json")) == [
        ("data[a]", "FieldValueTypeInvalid")]
    assert api.send("GET", f"{configmaps}/cm").json()["data"] == {"a": "1"}


def test_unknown_fields_are_dropped_with_a_warning_or_refused_when_strict(api):
    body = pod(livenessProbes=[])
    body["spec"]["nodeSelectorz"] = {}
    refused = api.send("POST", PODS, body, fieldValidation="Strict")
    assert refused.status_code == 400
    assert 'unknown field "spec.containers[0].livenessProbes"' in refused.json()["message"]
    assert 'unknown field "spec.nodeSelectorz"' in refused.json()["message"]
    created = api.send("POST", PODS, body)
    assert created.status_code == 201
    assert 'unknown field "spec.nodeSelectorz"' in created.headers["Warning"]
    stored = api.send("GET", f"{PODS}/p").json()
    assert "nodeSelectorz" not in stored["spec"] and "livenessProbes" not in stored["spec"]["containers"][0]


def test_pods_and_objects_the_controller_creates_for_every_sample_pass(api):
    kinds = {"Pod": PODS, "Service": "/api/v1/namespaces/default/services",
             "HorizontalPodAutoscaler": "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"}
    rendered = subprocess.run([sys.executable, "-m", "trainctl.cli.main", "render", *[a for p in SAMPLES for a in ("-f", str(p))]],
                              capture_output=True, text=True, check=True, timeout=120).stdout
    created = 0
    for obj in yaml.safe_load_all(rendered):
        if obj is None or obj["kind"] not in kinds:
            continue
        obj = copy.deepcopy(obj)
        obj["metadata"].pop("namespace", None)
        if obj["kind"] == "Service":
            obj["spec"].pop("clusterIP", None)  # a placeholder address; the server assigns its own
        response = api.send("POST", kinds[obj["kind"]], obj)
        assert response.status_code == 201, (obj["metadata"], response.text)
        assert "Warning" not in response.headers, response.headers["Warning"]
        created += 1
    assert created >= 2 * len(SAMPLES)


def test_kubectl_apply_prints_the_field_error(kubectl):
    result = kubectl.run("apply", "-f", "-", input=json.dumps(pod("bad", ports=[{"containerPort": 99999}])), check=False)
    assert result.returncode == 1
    assert 'The Pod "bad" is invalid: spec.containers[0].ports[0].containerPort: Invalid value: 99999: ' \
           "must be between 1 and 65535, inclusive" in result.stderr
    typo = pod("typo", imagePullPolicyy="Always")
    strict = kubectl.run("apply", "--validate=strict", "-f", "-", input=json.dumps(typo), check=False)
    assert strict.returncode == 1
    assert 'unknown field "spec.containers[0].imagePullPolicyy"' in strict.stderr
    assert "pod/ok created" in kubectl("apply", "-f", "-", input=json.dumps(pod("ok")))


def test_vendored_schemas_match_the_package_they_are_generated_from():
    spec = importlib.util.spec_from_file_location("gen_builtin_schemas", ROOT / "hack" / "gen_builtin_schemas.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.main(["--check"]) == 0


def test_python_client_gets_the_422_with_its_causes(apiserver):
    api_client = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        with pytest.raises(client.ApiException) as refused:
            client.CoreV1Api(api_client).create_namespaced_config_map(
                "default", {"metadata": {"name": "cm"}, "data": {"replicas": 3}})
    finally:
        api_client.close()
    assert refused.value.status == 422
    body = json.loads(refused.value.body)
    assert body["details"]["causes"] == [{"reason": "FieldValueTypeInvalid", "field": "data[replicas]", "message":
                                          'Invalid value: 3: data[replicas] in body must be of type string: 3'}]
