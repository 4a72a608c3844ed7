"""The client's error policy, against the real API server (faults injected by the proxy)."""

from __future__ import annotations

import ssl
import time

import pytest
from kubernetes import client as k8s_client

from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.restmapper import SERVICES

from tests.support.faultproxy import FaultProxy


def service(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterIP": "None"},
    }


@pytest.fixture
def proxied(apiserver, kube):
    """A client whose requests go through a fault proxy; yields (client, proxy)."""
    tls = ssl.create_default_context(cafile=kube.configuration.ssl_ca_cert)
    with FaultProxy(apiserver.url, ssl_context=tls, retry_after=1) as proxy:
        configuration = k8s_client.Configuration()
        configuration.host = proxy.url
        configuration.api_key = {"authorization": f"Bearer {apiserver.token}"}
        yield KubeClient(configuration, qps=0), proxy


def test_429_is_retried_after_the_servers_retry_after(proxied):
    client, proxy = proxied
    proxy.script = [429]
    started = time.monotonic()
    created = client.create(SERVICES, service("patient"))
    assert not created.existed and created.object["metadata"]["name"] == "patient"
    assert time.monotonic() - started >= 1.0, "Retry-After: 1 was not honoured"
    assert len(proxy.requests) == 2


def test_5xx_is_retried_and_4xx_is_not(proxied):
    client, proxy = proxied
    proxy.script = [500, 503, 500]
    assert [s["metadata"]["name"] for s in client.list(SERVICES, "default")[0]] == ["kubernetes"]  # every cluster's
    assert len(proxy.requests) == 4
    proxy.requests.clear()
    with pytest.raises(ApiError) as refused:
        client.create(
            SERVICES,
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "Not_A_DNS_Name", "namespace": "default"}, "spec": {}},
        )
    assert refused.value.code == 422 and not refused.value.retryable
    assert len(proxy.requests) == 1


def test_already_exists_and_not_found_count_as_success(proxied):
    client, proxy = proxied
    assert not client.create(SERVICES, service("twice")).existed
    assert client.create(SERVICES, service("twice")).existed
    live = client.get(SERVICES, "default", "twice")
    assert client.delete(SERVICES, "default", "twice", uid="someone-else") is False  # precondition: not ours
    assert client.get_or_none(SERVICES, "default", "twice") is not None
    assert client.delete(SERVICES, "default", "twice", uid=live["metadata"]["uid"]) is True
    assert client.delete(SERVICES, "default", "twice") is False
    assert client.get_or_none(SERVICES, "default", "twice") is None


def test_a_delete_with_a_stale_resource_version_is_a_conflict_not_a_delete(kube):
    seen = kube.create(SERVICES, service("versioned")).object["metadata"]
    changed = kube.get(SERVICES, "default", "versioned")
    changed["metadata"].setdefault("labels", {})["touched"] = "yes"
    kube.replace(SERVICES, changed)
    with pytest.raises(ApiError) as stale:
        kube.delete(SERVICES, "default", "versioned", uid=seen["uid"], resource_version=seen["resourceVersion"])
    assert stale.value.code == 409 and "ResourceVersion in precondition" in stale.value.message
    assert kube.get_or_none(SERVICES, "default", "versioned") is not None
    current = kube.get(SERVICES, "default", "versioned")["metadata"]
    assert kube.delete(SERVICES, "default", "versioned", uid=seen["uid"], resource_version=current["resourceVersion"]) is True
    assert kube.get_or_none(SERVICES, "default", "versioned") is None


def test_an_unreachable_server_is_a_connection_error_after_the_retries():
    configuration = k8s_client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens
    client = KubeClient(configuration, qps=0, max_attempts=2)
    with pytest.raises(ApiError) as failed:
        client.list(SERVICES, "default")
    assert failed.value.code == 0 and failed.value.retryable
