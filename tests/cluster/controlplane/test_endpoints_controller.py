"""The endpoint controllers on a real API server: kubectl get ep / endpointslices show a Service's pods."""

from __future__ import annotations

import json
from typing import Any

from trainctl.cluster.controlplane.api_resources import ENDPOINT_SLICES
from trainctl.cluster.controlplane.endpoints_controller import EndpointsController
from trainctl.kube import restmapper as r
from trainctl.kube.client import KubeClient

from tests.cluster.controlplane.conftest import eventually
from tests.support.kubectl import Kubectl

Obj = dict[str, Any]


def running_pod(client: KubeClient, name: str, ip: str, *, ready: bool = True) -> None:
    client.create(r.PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
                           "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "ports": [{"name": "http", "containerPort": 8080}]}]}})
    pod = client.get(r.PODS, "default", name)
    pod["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                     "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    client.replace(r.PODS, pod, subresource="status")


def test_a_services_endpoints_follow_its_pods_and_go_with_it(client: KubeClient, kube_env: dict[str, str]) -> None:
    kubectl = Kubectl(kube_env)
    kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}))
    running_pod(client, "web-a", "10.244.0.5")
    running_pod(client, "web-b", "10.244.0.6", ready=False)
    controller = EndpointsController(client, resync_period=1.0)
    controller.start()
    try:
        def endpoints_listed() -> bool:
            table = kubectl("get", "ep", "web").splitlines()
            return table[0].split()[:2] == ["NAME", "ENDPOINTS"] and table[1].split()[:2] == ["web", "10.244.0.5:8080"]
        eventually(endpoints_listed, what="kubectl get ep web listing the ready pod")
        stored = client.get(r.ENDPOINTS, "default", "web")
        assert [a["ip"] for a in stored["subsets"][0]["notReadyAddresses"]] == ["10.244.0.6"]

        def sliced() -> list[str] | None:
            slices, _ = client.list(ENDPOINT_SLICES, "default", label_selector="kubernetes.io/service-name=web")
            return sorted(a for s in slices for e in s["endpoints"] for a in e["addresses"]) or None
        assert eventually(sliced, what="an EndpointSlice for web") == ["10.244.0.5", "10.244.0.6"]
        table = kubectl("get", "endpointslices").splitlines()
        assert table[0].split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
        assert table[1].split()[1:4] == ["IPv4", "8080", "10.244.0.5,10.244.0.6"]

        client.delete(r.PODS, "default", "web-a", grace_period_seconds=0)
        eventually(lambda: "subsets" not in client.get(r.ENDPOINTS, "default", "web") or
                   not client.get(r.ENDPOINTS, "default", "web")["subsets"][0].get("addresses"), what="web-a leaving the endpoints")

        kubectl("delete", "service", "web")
        eventually(lambda: client.get_or_none(r.ENDPOINTS, "default", "web") is None, what="the Endpoints deleted with the Service")
        eventually(lambda: not client.list(ENDPOINT_SLICES, "default")[0], what="the slices deleted with the Service")
    finally:
        controller.stop()


def test_kubectl_describes_a_service_whose_port_has_no_name(client: KubeClient, kube_env: dict[str, str]) -> None:
    kubectl = Kubectl(kube_env)
    kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "plain", "namespace": "default"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}))
    running_pod(client, "web-c", "10.244.0.7")
    controller = EndpointsController(client, resync_period=1.0)
    controller.start()
    try:
        def described() -> str | None:
            out = kubectl("describe", "service", "plain")
            return out if "10.244.0.7:8080" in out else None
        out = eventually(described, what="kubectl describe svc listing the pod's address")
        assert any(line.split() == ["Endpoints:", "10.244.0.7:8080"] for line in out.splitlines()), out
    finally:
        controller.stop()
