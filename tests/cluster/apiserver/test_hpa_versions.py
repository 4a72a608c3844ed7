"""``autoscaling/v1`` and ``autoscaling/v2`` HPAs: the conversion on plain dicts, and one stored
object seen through both versions of a real API server, made by ``kubectl autoscale``."""

from __future__ import annotations

import json
from typing import Any

from trainctl.cluster.apiserver.apimachinery.hpa_conversion import BEHAVIOR, METRICS, to_v1, to_v2
from trainctl.kube.client import KubeClient
from trainctl.kube.restmapper import HPAS, Resource

from tests.support.kubectl import Kubectl

HPAS_V1 = Resource("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
Obj = dict[str, Any]

TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
MEMORY = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}


def v2(metrics: list[Obj], **spec: Any) -> Obj:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": TARGET, "minReplicas": 1, "maxReplicas": 3, "metrics": metrics, **spec}}


def test_a_cpu_utilization_metric_is_v1s_target_percentage_both_ways() -> None:
    stored = v2([CPU])
    stored["status"] = {"currentReplicas": 2, "desiredReplicas": 2, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 70}}}]}
    old = to_v1(stored)
    assert old["apiVersion"] == "autoscaling/v1"
    assert old["spec"] == {"scaleTargetRef": TARGET, "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}
    assert old["status"] == {"currentReplicas": 2, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 70}
    assert "annotations" not in old["metadata"]
    assert to_v2(old) == stored


def test_what_v1_cannot_say_rides_in_annotations_and_comes_back() -> None:
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 60}}
    stored = v2([CPU, MEMORY], behavior=behavior)
    old = to_v1(stored)
    annotations = old["metadata"]["annotations"]
    assert json.loads(annotations[METRICS]) == [MEMORY] and json.loads(annotations[BEHAVIOR]) == behavior
    assert old["spec"]["targetCPUUtilizationPercentage"] == 50
    assert to_v2(old) == stored


def test_a_v1_hpa_without_a_target_has_no_metrics() -> None:
    made = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": TARGET, "maxReplicas": 3}}
    assert to_v2(made)["spec"] == {"scaleTargetRef": TARGET, "maxReplicas": 3}


def test_kubectl_autoscale_writes_v1_and_the_same_hpa_reads_through_v2(kubectl: Kubectl, apiserver: Any) -> None:
    client = KubeClient.from_kubeconfig(str(apiserver.kubeconfig))
    try:
        kubectl("create", "deployment", "web", "--image=python:3.11")
        assert "horizontalpodautoscaler.autoscaling/web autoscaled" in kubectl(
            "autoscale", "deploy", "web", "--min=1", "--max=3", "--cpu-percent=50")
        stored = client.get(HPAS, "default", "web")
        assert stored["spec"]["scaleTargetRef"] == TARGET
        assert (stored["spec"]["minReplicas"], stored["spec"]["maxReplicas"], stored["spec"]["metrics"]) == (1, 3, [CPU])
        header, row = kubectl("get", "hpa").splitlines()
        assert header.split()[:6] == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS"]
        assert row.split()[:6] == ["web", "Deployment/web", "cpu:", "<unknown>/50%", "1", "3"]

        # The controller's view: v2 status, read back through v1 as kube's v1 fields.
        stored["status"] = {"currentReplicas": 2, "desiredReplicas": 2, "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40}}}]}
        client.replace(HPAS, stored, subresource="status")
        old = client.get(HPAS_V1, "default", "web")
        assert old["apiVersion"] == "autoscaling/v1" and old["spec"]["targetCPUUtilizationPercentage"] == 50
        assert old["status"]["currentCPUUtilizationPercentage"] == 40 and old["status"]["currentReplicas"] == 2
        assert old["metadata"]["resourceVersion"] == client.get(HPAS, "default", "web")["metadata"]["resourceVersion"]

        # A v1 edit changes the one stored object; v2-only fields survive through the annotations.
        stored = client.get(HPAS, "default", "web")
        stored["spec"]["metrics"].append(MEMORY)
        client.replace(HPAS, stored)
        kubectl("patch", "horizontalpodautoscalers.v1.autoscaling", "web", "--type=merge", "-p", '{"spec": {"targetCPUUtilizationPercentage": 70}}')
        metrics = client.get(HPAS, "default", "web")["spec"]["metrics"]
        assert metrics[0]["resource"]["target"]["averageUtilization"] == 70 and metrics[1:] == [MEMORY]
        assert "annotations" not in client.get(HPAS, "default", "web")["metadata"]

        kubectl("delete", "horizontalpodautoscalers.v1.autoscaling", "web")
        assert client.list(HPAS, "default")[0] == []
    finally:
        client.close()


def test_v1_keeps_kubes_replica_bounds(kubectl: Kubectl) -> None:
    made = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": TARGET, "minReplicas": 4, "maxReplicas": 3}}
    failed = kubectl.run("create", "-f", "-", input=json.dumps(made), check=False)
    assert failed.returncode != 0 and "must be greater than or equal to `minReplicas`" in failed.stderr
