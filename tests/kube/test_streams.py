"""What the kubelet and the launcher need from the one client, against the real API server:
field selectors, merge patches, subresource creates, log streams that can be stopped from
another thread, and informers that hand over an error retrying cannot fix."""

from __future__ import annotations

import ssl
import threading

import pytest
from kubernetes import client as k8s_client

from trainctl.kube.client import ApiError, KubeClient
from trainctl.kube.informer import Informer
from trainctl.kube.restmapper import NODES, PODS, Resource

from tests.support.faultproxy import FaultProxy

NS = "default"


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "main", "image": "x"}]}}


def write_cri_log(root, obj: dict, container: str, lines: list[str]) -> None:
    """A log as the kubelet writes it: DIR/pods/<uid>/<container>/<restartCount>.log, CRI format."""
    path = root / "pods" / obj["metadata"]["uid"] / container / "0.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        for text in lines:
            handle.write(f"2026-01-01T00:00:00Z stdout F {text}\n")


def test_field_selectors_narrow_lists_and_watches(kube):
    for name in ("alpha", "beta"):
        kube.create(PODS, pod(name))
    items, version = kube.list(PODS, NS, field_selector="metadata.name=beta")
    assert [p["metadata"]["name"] for p in items] == ["beta"]
    stream = kube.watch(PODS, NS, version, field_selector="metadata.name=alpha", timeout_seconds=10)
    try:
        kube.patch(PODS, NS, "beta", {"metadata": {"labels": {"touched": "yes"}}})
        kube.patch(PODS, NS, "alpha", {"metadata": {"labels": {"touched": "yes"}}})
        event = next(e for e in stream if e["type"] != "BOOKMARK")
    finally:
        stream.close()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("MODIFIED", "alpha")
    assert event["object"]["metadata"]["labels"] == {"touched": "yes"}


def test_binding_is_created_on_the_pods_subresource_and_status_is_merge_patched(kube):
    kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "local"}})
    created = kube.create(PODS, pod("bound")).object
    binding = {"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "bound", "namespace": NS, "uid": created["metadata"]["uid"]},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "local"}}
    kube.create(PODS, binding, subresource="binding")
    kube.patch(PODS, NS, "bound", {"status": {"phase": "Running"}}, subresource="status")
    stored = kube.get(PODS, NS, "bound")
    assert (stored["spec"]["nodeName"], stored["status"]["phase"]) == ("local", "Running")
    assert {("create", "", "pods/binding"), ("patch", "", "pods/status")} <= kube.calls


def test_a_followed_log_streams_lines_and_stops_at_once_from_another_thread(apiserver, kube):
    created = kube.create(PODS, pod("trainer")).object
    kube.patch(PODS, NS, "trainer", {"status": {"phase": "Running", "containerStatuses": [
        {"name": "main", "restartCount": 0, "ready": True, "image": "x", "imageID": "", "state": {"running": {}}}]}},
        subresource="status")
    write_cri_log(apiserver.dir, created, "main", ["step 1", "step 2"])
    assert list(kube.log(NS, "trainer", container="main")) == ["step 1", "step 2"]

    stream = kube.log(NS, "trainer", container="main", follow=True)
    seen: list[str] = []
    two_lines = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for line in stream:
                seen.append(line)
                if len(seen) == 2:
                    two_lines.set()
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert two_lines.wait(10), seen
    stream.close()  # the container still runs: only close() can end this read
    reader.join(5)
    assert not reader.is_alive() and not errors
    assert seen == ["step 1", "step 2"]
    assert ("get", "", "pods/log") in kube.calls


def test_a_closed_client_ends_its_open_streams(kube):
    _, version = kube.list(PODS, NS)
    stream = kube.watch(PODS, NS, version, timeout_seconds=30)
    ended = threading.Event()
    reader = threading.Thread(target=lambda: (list(stream), ended.set()), daemon=True)
    reader.start()
    kube.close()
    assert ended.wait(5)


def test_4xx_is_reported_at_once_without_retries(apiserver, kube):
    tls = ssl.create_default_context(cafile=kube.configuration.ssl_ca_cert)
    with FaultProxy(apiserver.url, ssl_context=tls) as proxy:
        configuration = k8s_client.Configuration()
        configuration.host = proxy.url
        configuration.api_key = {"authorization": "Bearer not-the-token"}
        stranger = KubeClient(configuration, qps=0)
        with pytest.raises(ApiError) as refused:
            stranger.list(PODS, NS)
        assert refused.value.code == 401 and not refused.value.retryable
        assert len(proxy.requests) == 1


def test_an_informer_with_on_error_stops_and_reports_what_retrying_cannot_fix(kube):
    widgets = Resource("example.com", "v1", "widgets", "Widget")  # no such CRD: 404
    reported: list[ApiError] = []
    done = threading.Event()
    informer = Informer(kube, widgets, namespace=NS, on_error=lambda exc: (reported.append(exc), done.set()))
    informer.start()
    assert done.wait(10)
    informer._thread.join(5)
    assert not informer._thread.is_alive()
    assert [e.code for e in reported] == [404] and not informer.synced.is_set()


def test_on_synced_follows_every_list_with_the_listed_objects_in_the_store(kube):
    kube.create(PODS, pod("listed"))
    seen: list[list[str]] = []
    synced = threading.Event()
    informer = Informer(kube, PODS, namespace=NS, field_selector="metadata.name=listed")
    informer.on_synced = lambda: (seen.append([p["metadata"]["name"] for p in informer.store.list()]), synced.set())
    informer.start()
    try:
        assert synced.wait(10)
    finally:
        informer.stop()
    assert seen == [["listed"]]
