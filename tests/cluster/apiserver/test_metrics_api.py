"""The Metrics API (metrics.k8s.io/v1beta1): fed through the kubelet's publishing helper,
read by kubectl top and the Python client as they read metrics-server."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from trainctl.cluster import metrics_publish
from trainctl.kube.client import ApiError, KubeClient


def node(name: str, *, cpu: str = "4", memory: str = "8Gi") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                       "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def pod(name: str, namespace: str = "default", **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}, {"name": "side", "image": "busybox:1.36"}]}}


def node_metrics(name: str, cpu: str, memory: str) -> dict:
    return {"metadata": {"name": name}, "timestamp": "2026-01-01T00:00:00Z", "window": "10s",
            "usage": {"cpu": cpu, "memory": memory}}


def pod_metrics(name: str, namespace: str = "default", *, cpu: str = "250m", memory: str = "64Mi") -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "timestamp": "2026-01-01T00:00:00Z", "window": "10s",
            "containers": [{"name": "main", "usage": {"cpu": cpu, "memory": memory}},
                           {"name": "side", "usage": {"cpu": "10m", "memory": "1Mi"}}]}


@pytest.fixture
def kube(api):
    return KubeClient.for_api_client(api)


@pytest.fixture
def cluster(kubectl):
    """Two nodes and three pods, as kubectl users would create them."""
    for obj in (node("n1"), node("n2", cpu="2", memory="4Gi"), pod("web-1", app="web"), pod("web-2", app="web"),
                pod("db", app="db")):
        kubectl("create", "-f", "-", input=json.dumps(obj))
    kubectl("create", "namespace", "other")
    kubectl("create", "-f", "-", input=json.dumps(pod("job", "other", app="web")))


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_kubectl_top_pods_and_nodes_read_what_the_kubelets_published(kubectl, kube, cluster):
    metrics_publish.publish(kube, "n1", node_metrics("n1", "1", "2Gi"),
                            [pod_metrics("web-1", cpu="250m", memory="64Mi"), pod_metrics("db", cpu="1500m", memory="1Gi")])
    metrics_publish.publish(kube, "n2", node_metrics("n2", "500m", "1Gi"),
                            [pod_metrics("web-2", cpu="5m", memory="3Mi"), pod_metrics("job", "other")])

    top_nodes = rows(kubectl("top", "nodes"))
    assert top_nodes[0] == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    assert top_nodes[1:] == [["n1", "1000m", "25%", "2048Mi", "25%"], ["n2", "500m", "25%", "1024Mi", "25%"]]

    top_pods = rows(kubectl("top", "pods"))
    assert top_pods[0] == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert sorted(top_pods[1:]) == [["db", "1510m", "1025Mi"], ["web-1", "260m", "65Mi"], ["web-2", "15m", "4Mi"]]
    # The selector chooses by the pod's labels, which each PodMetrics carries.
    assert sorted(r[0] for r in rows(kubectl("top", "pods", "-l", "app=web"))[1:]) == ["web-1", "web-2"]
    assert [r[:2] for r in rows(kubectl("top", "pods", "-A", "-l", "app=web"))[1:]] == [
        ["default", "web-1"], ["default", "web-2"], ["other", "job"]]
    assert rows(kubectl("top", "pod", "db", "--containers"))[1:] == [["db", "main", "1500m", "1024Mi"],
                                                                     ["db", "side", "10m", "1Mi"]]
    assert rows(kubectl("top", "node", "n2"))[1][0] == "n2"
    assert [r[0] for r in rows(kubectl("top", "nodes", "-l", "kubernetes.io/hostname=n2"))[1:]] == ["n2"]


def test_metrics_are_discovered_and_read_only(kubectl, kube, cluster):
    listed = rows(kubectl("api-resources", "--api-group=metrics.k8s.io", "-o", "wide"))
    assert [r[0] for r in listed[1:]] == ["nodes", "pods"]
    assert all(r[-1] == "get,list" for r in listed[1:])
    assert "usage" not in kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1")
    before = kubectl.run("top", "pods", check=False)  # pods exist, no kubelet has published yet
    assert "Metrics API not available" not in before.stderr and "metrics not available yet" in before.stderr
    metrics_publish.publish(kube, "n1", node_metrics("n1", "1", "2Gi"), [pod_metrics("web-1")])
    got = json.loads(kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1"))
    assert got["kind"] == "PodMetrics" and got["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert got["metadata"]["labels"] == {"app": "web"} and got["window"] == "10s"
    result = kubectl.run("delete", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1", check=False)
    assert result.returncode != 0 and "MethodNotAllowed" in result.stderr
    result = kubectl.run("create", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes", "-f", "-", input="{}", check=False)
    assert result.returncode != 0


def test_python_client_reads_metrics_with_selectors(api, kube, cluster):
    metrics_publish.publish(kube, "n1", node_metrics("n1", "1", "2Gi"), [pod_metrics("web-1"), pod_metrics("db")])
    custom = client.CustomObjectsApi(api)
    pods = custom.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", "default", "pods", label_selector="app=db")
    assert pods["kind"] == "PodMetricsList" and [p["metadata"]["name"] for p in pods["items"]] == ["db"]
    by_field = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "pods", field_selector="metadata.name=web-1")
    assert [p["metadata"]["name"] for p in by_field["items"]] == ["web-1"]
    nodes = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
    assert [(n["metadata"]["name"], n["usage"]) for n in nodes["items"]] == [("n1", {"cpu": "1", "memory": "2Gi"})]
    assert nodes["items"][0]["metadata"]["labels"] == {"kubernetes.io/hostname": "n1"}


def test_a_publication_replaces_the_nodes_previous_one(kube, kubectl, cluster):
    metrics_publish.publish(kube, "n1", node_metrics("n1", "1", "2Gi"), [pod_metrics("web-1"), pod_metrics("db")])
    metrics_publish.publish(kube, "n1", node_metrics("n1", "2", "2Gi"), [pod_metrics("db", cpu="3")])
    assert [r[0] for r in rows(kubectl("top", "pods"))[1:]] == ["db"]
    assert rows(kubectl("top", "nodes"))[1][1] == "2000m"


def test_metrics_vanish_with_their_pod_or_node_and_when_not_refreshed(kube, kubectl, cluster):
    metrics_publish.publish(kube, "n1", node_metrics("n1", "1", "2Gi"), [pod_metrics("web-1"), pod_metrics("db")])
    kubectl("delete", "pod", "db", "--grace-period=0", "--force")
    assert [r[0] for r in rows(kubectl("top", "pods"))[1:]] == ["web-1"]
    kubectl("create", "-f", "-", input=json.dumps(pod("db", app="db")))  # the same name, another pod
    missing = kubectl.run("top", "pod", "db", check=False)
    assert missing.returncode != 0 and 'podmetrics.metrics.k8s.io "default/db" not found' in missing.stderr

    metrics_publish.publish(kube, "n2", node_metrics("n2", "1", "1Gi"), [pod_metrics("web-2")], interval=0.5)
    assert [r[0] for r in rows(kubectl("top", "nodes"))[1:]] == ["n1", "n2"]
    deadline = time.monotonic() + 30
    while "web-2" in kubectl("top", "pods") and time.monotonic() < deadline:
        time.sleep(0.3)
    # n2 was not refreshed within 3 intervals: kubectl lists the Node without metrics.
    assert [r[:2] for r in rows(kubectl("top", "nodes"))[1:]] == [["n1", "1000m"], ["n2", "<unknown>"]]
    assert [r[0] for r in rows(kubectl("top", "pods"))[1:]] == ["web-1"]

    kubectl("delete", "node", "n1")
    kubectl("create", "-f", "-", input=json.dumps(node("n1")))  # the same name, another Node
    assert "metrics not available yet" in kubectl.run("top", "nodes", check=False).stderr


def test_publishing_for_an_unknown_node_or_a_malformed_report_is_refused(kube, cluster):
    with pytest.raises(ApiError) as unknown:
        metrics_publish.publish(kube, "ghost", node_metrics("ghost", "1", "1Gi"), [])
    assert unknown.value.code == 404
    with pytest.raises(ApiError) as mismatched:
        metrics_publish.publish(kube, "n1", node_metrics("n2", "1", "1Gi"), [])
    assert mismatched.value.code == 400
    with pytest.raises(ApiError) as bad_pod:
        metrics_publish.publish(kube, "n1", node_metrics("n1", "1", "1Gi"), [{"metadata": {"name": "x"}}])
    assert bad_pod.value.code == 400
