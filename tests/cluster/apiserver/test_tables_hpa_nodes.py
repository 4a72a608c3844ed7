"""kubectl get hpa, nodes and pods -o wide print the columns kube-apiserver's printers give."""

from __future__ import annotations

import json

from trainctl.cluster.apiserver.serving import tables


def hpa(name: str, metrics: list[dict], *, min_replicas: int | None = 1, status: dict | None = None) -> dict:
    spec: dict = {"scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "elastic"},
                  "maxReplicas": 4, "metrics": metrics}
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def cpu_utilization(target: int) -> dict:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}}


def memory_average(value: str) -> dict:
    return {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": value}}}


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_kubectl_get_hpa_prints_reference_targets_and_replicas(kubectl):
    kubectl("create", "-f", "-", input=json.dumps(hpa("fresh", [cpu_utilization(50)])))
    table = rows(kubectl("get", "hpa"))
    assert table[0] == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    # Before the autoscaler has measured anything the current value is unknown.
    assert table[1][:7] == ["fresh", "PyTorchJob/elastic", "cpu:", "<unknown>/50%", "1", "4", "0"]

    kubectl("patch", "hpa", "fresh", "--subresource=status", "--type=merge", "-p", json.dumps({"status": {
        "currentReplicas": 3, "desiredReplicas": 3,
        "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45,
                                                                                         "averageValue": "450m"}}}]}}))
    line = kubectl("get", "hpa", "fresh", "--no-headers")
    assert line.split()[:7] == ["fresh", "PyTorchJob/elastic", "cpu:", "45%/50%", "1", "4", "3"]


def test_hpa_targets_cover_every_metric_kind_and_shorten_after_two():
    measured = {"currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 80}}},
        {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "300Mi"}}}]}
    assert tables.hpa_targets(hpa("a", [cpu_utilization(60), memory_average("1Gi")], status=measured)) == \
        "cpu: 80%/60%, memory: 300Mi/1Gi"
    pods = {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}
    external = {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "30"}}}
    assert tables.hpa_targets(hpa("b", [cpu_utilization(50), pods, external])) == \
        "cpu: <unknown>/50%, <unknown>/10 + 1 more..."
    auto = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}
    assert tables.hpa_targets(hpa("c", [auto, external])) == "cpu: <unknown>/<auto>, <unknown>/30"
    assert tables.hpa_targets(hpa("d", [])) == "<none>"


def test_hpa_without_min_replicas_prints_unset(kubectl):
    kubectl("create", "-f", "-", input=json.dumps(hpa("nomin", [memory_average("512Mi")], min_replicas=None)))
    assert rows(kubectl("get", "hpa", "--no-headers"))[0][:6] == ["nomin", "PyTorchJob/elastic", "memory:",
                                                                    "<unknown>/512Mi", "<unset>", "4"]


def node(name: str, *, ready: str | None, unschedulable: bool = False, labels: dict | None = None) -> dict:
    info = {"kubeletVersion": "v1.32.0-trainctl", "osImage": "Debian GNU/Linux 12 (bookworm)", "kernelVersion": "6.1.0",
            "containerRuntimeVersion": "trainctl://0.1", "machineID": "m", "systemUUID": "u", "bootID": "b",
            "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}
    status: dict = {"nodeInfo": info,
                    "addresses": [{"type": "Hostname", "address": name}, {"type": "InternalIP", "address": "127.0.0.1"}]}
    if ready is not None:
        status["conditions"] = [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"unschedulable": unschedulable}, "status": status}


def test_kubectl_get_nodes_prints_status_roles_and_wide_columns(kubectl):
    for obj in (node("a-ready", ready="True"), node("b-down", ready="False"), node("c-lost", ready="Unknown"),
                node("d-new", ready=None), node("e-cordoned", ready="True", unschedulable=True,
                                                labels={"node-role.kubernetes.io/control-plane": "",
                                                        "kubernetes.io/role": "worker"})):
        kubectl("create", "-f", "-", input=json.dumps(obj))
    table = rows(kubectl("get", "nodes"))
    assert table[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [(r[0], r[1], r[2], r[4]) for r in table[1:]] == [
        ("a-ready", "Ready", "<none>", "v1.32.0-trainctl"),
        ("b-down", "NotReady", "<none>", "v1.32.0-trainctl"),
        ("c-lost", "NotReady", "<none>", "v1.32.0-trainctl"),
        ("d-new", "Unknown", "<none>", "v1.32.0-trainctl"),
        ("e-cordoned", "Ready,SchedulingDisabled", "control-plane,worker", "v1.32.0-trainctl"),
    ]
    wide = kubectl("get", "node", "a-ready", "-o", "wide").splitlines()
    assert wide[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
                               "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    assert wide[1].split()[5:7] == ["127.0.0.1", "<none>"] and "Debian GNU/Linux 12 (bookworm)" in wide[1]
    assert wide[1].split()[-2:] == ["6.1.0", "trainctl://0.1"]


def test_kubectl_get_pods_wide_shows_the_node(kubectl):
    kubectl("create", "-f", "-", input=json.dumps(node("n1", ready="True")))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "busybox:1.36"}]}}
    kubectl("create", "-f", "-", input=json.dumps(pod))
    table = rows(kubectl("get", "pods", "-o", "wide"))
    assert table[0][:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert table[1][0] == "p" and table[1][6] == "n1"
