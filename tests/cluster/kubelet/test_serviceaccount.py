"""A pod's identity as the kubelet gives it: token files, KUBERNETES_* env, the kubernetes
Service's proxy rule from its Endpoints."""

from __future__ import annotations

from typing import Any

from trainctl.cluster.kubelet.service_rules import ServiceRules, endpoint_backends
from trainctl.cluster.kubelet.serviceaccount import api_server_env, automount

KUBERNETES = {"metadata": {"name": "kubernetes", "namespace": "default"},
              "spec": {"clusterIP": "127.96.4.1", "ports": [{"name": "https", "port": 443, "targetPort": 40123}]}}
ENDPOINTS = {"metadata": {"name": "kubernetes", "namespace": "default"},
             "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 40123}]}]}


def test_the_env_names_the_cluster_ip_through_the_proxy() -> None:
    env = api_server_env(KUBERNETES, ENDPOINTS, lambda ip: ip, through_proxy=True)
    assert env == {"KUBERNETES_SERVICE_HOST": "127.96.4.1", "KUBERNETES_SERVICE_PORT": "443",
                   "KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": "tcp://127.96.4.1:443",
                   "KUBERNETES_PORT_443_TCP": "tcp://127.96.4.1:443", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
                   "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "127.96.4.1"}


def test_a_node_of_several_gives_its_own_address_for_the_cluster_ip() -> None:
    env = api_server_env(KUBERNETES, ENDPOINTS, lambda ip: "127.64.8.1", through_proxy=True)
    assert env["KUBERNETES_SERVICE_HOST"] == "127.64.8.1"


def test_without_the_proxy_on_443_the_env_names_the_api_server_itself() -> None:
    env = api_server_env(KUBERNETES, ENDPOINTS, lambda ip: ip, through_proxy=False)
    assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == ("127.0.0.1", "40123")


def test_no_service_no_env() -> None:
    assert api_server_env(None, None, lambda ip: ip, through_proxy=True) == {}
    assert api_server_env(KUBERNETES, None, lambda ip: ip, through_proxy=False) == {}


def test_automount_follows_the_pod_then_its_account() -> None:
    assert automount({"spec": {}}, {"metadata": {}})
    assert not automount({"spec": {}}, {"automountServiceAccountToken": False})
    assert automount({"spec": {"automountServiceAccountToken": True}}, {"automountServiceAccountToken": False})
    assert not automount({"spec": {"automountServiceAccountToken": False}}, None)


def test_a_service_without_selector_forwards_to_its_endpoints() -> None:
    assert endpoint_backends(ENDPOINTS, {"name": "https", "port": 443}) == [("127.0.0.1", 40123)]
    assert endpoint_backends(ENDPOINTS, {"name": "other", "port": 443}) == []
    assert endpoint_backends(None, {"name": "https", "port": 443}) == []


class Recorder:
    def __init__(self) -> None:
        self.rules: dict[Any, Any] = {}
        self.addresses: dict[str, str] = {}

    def update(self, rules: dict[Any, Any]) -> None:
        self.rules = rules

    def write(self, addresses: dict[str, str]) -> None:
        self.addresses = addresses


class Names:
    def resolve(self, namespace: str, name: str, index: Any = None) -> str:
        return "127.96.4.1"

    def service_address(self, cluster_ip: str) -> str:
        return cluster_ip


def test_the_kubernetes_service_is_proxied_to_the_api_server() -> None:
    recorder = Recorder()
    ServiceRules(Names(), recorder, recorder).sync([], [KUBERNETES], [ENDPOINTS])  # type: ignore[arg-type]
    assert recorder.rules[("127.96.4.1", 443)] == [("127.0.0.1", 40123)]
    assert recorder.addresses["kubernetes.default.svc.cluster.local"] == "127.96.4.1"

