"""APIServices are served (the Python client's ``create_from_yaml`` registers one in its own
e2e suite) and say truthfully that nothing is behind them: this server does not aggregate."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException


def wardle(name: str = "v1alpha1.wardle.k8s.io") -> dict:
    """The client's e2e manifest (``test_yaml/api-service.yaml``)."""
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name},
            "spec": {"insecureSkipTLSVerify": True, "group": "wardle.k8s.io", "groupPriorityMinimum": 1000,
                     "versionPriority": 15, "service": {"name": "api", "namespace": "wardle"}, "version": "v1alpha1"}}


def test_an_apiservice_is_registered_once_and_reported_unavailable(api: client.ApiClient) -> None:
    registration = client.ApiregistrationV1Api(api)
    created = registration.create_api_service(wardle())
    assert created.spec.group == "wardle.k8s.io"
    (available,) = created.status.conditions
    assert (available.type, available.status, available.reason) == ("Available", "False", "FailedDiscoveryCheck")
    assert registration.read_api_service("v1alpha1.wardle.k8s.io").spec.version == "v1alpha1"

    with pytest.raises(ApiException) as again:
        registration.create_api_service(wardle())
    assert again.value.status == 409
    assert json.loads(again.value.body)["message"] == 'apiservices.apiregistration.k8s.io "v1alpha1.wardle.k8s.io" already exists'
    registration.delete_api_service("v1alpha1.wardle.k8s.io")
    assert [s.metadata.name for s in registration.list_api_service().items] == []


def test_an_apiservice_named_other_than_its_version_and_group_is_refused(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as refused:
        client.ApiregistrationV1Api(api).create_api_service(wardle("wardle"))
    assert refused.value.status == 422
    assert 'metadata.name: Invalid value: "wardle": must be `spec.version+"."+spec.group`: "v1alpha1.wardle.k8s.io"' in (
        json.loads(refused.value.body)["message"])
