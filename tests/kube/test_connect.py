"""Which cluster a component talks to: the one precedence rule of ``connect``."""

from __future__ import annotations

import pytest
import yaml
from kubernetes.config import incluster_config

from trainctl.kube import connect
from trainctl.kube.client import KubeClient


def kubeconfig(path, server: str, namespace: str = "") -> str:
    context = {"cluster": "c", "user": "u", **({"namespace": namespace} if namespace else {})}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "contexts": [{"name": "c", "context": context}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))
    return str(path)


@pytest.fixture
def world(tmp_path, monkeypatch):
    """No KUBECONFIG, an empty home, no service account: nothing configured yet."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    account = tmp_path / "serviceaccount"
    account.mkdir()
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(account / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(account / "ca.crt"))
    return tmp_path


def in_a_pod(world, monkeypatch, namespace: str = "team-a") -> None:
    account = world / "serviceaccount"
    (account / "token").write_text("pod-token")
    (account / "ca.crt").write_text("not read until a TLS handshake")
    (account / "namespace").write_text(namespace)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


def home_config(world, server: str = "https://home:6443", namespace: str = "") -> str:
    (world / "home" / ".kube").mkdir(exist_ok=True)
    return kubeconfig(world / "home" / ".kube" / "config", server, namespace)


def server_of(api) -> str:
    return api.configuration.host


def test_nothing_configured_is_no_cluster(world):
    with pytest.raises(connect.NoClusterConfigured):
        connect.connect()
    assert connect.default_namespace() == "default"


def test_an_explicit_kubeconfig_wins_over_everything(world, monkeypatch):
    in_a_pod(world, monkeypatch)
    home_config(world)
    monkeypatch.setenv("KUBECONFIG", kubeconfig(world / "env", "https://env:6443"))
    explicit = kubeconfig(world / "explicit", "https://explicit:6443", namespace="mine")
    assert server_of(connect.connect(explicit)) == "https://explicit:6443"
    assert connect.default_namespace(explicit) == "mine"


def test_kubeconfig_env_wins_over_the_service_account_and_home(world, monkeypatch):
    in_a_pod(world, monkeypatch)
    home_config(world)
    monkeypatch.setenv("KUBECONFIG", kubeconfig(world / "env", "https://env:6443"))
    assert server_of(connect.connect()) == "https://env:6443"


def test_kubeconfig_env_is_read_at_call_time_and_merges_a_list(world, monkeypatch):
    first = kubeconfig(world / "first", "https://first:6443", namespace="ns1")
    second = world / "second"
    second.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [], "users": []}))
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    assert server_of(connect.connect()) == "https://first:6443"
    assert connect.default_namespace() == "ns1"


def test_in_a_pod_the_service_account_wins_over_home(world, monkeypatch):
    in_a_pod(world, monkeypatch, namespace="team-a")
    home_config(world)
    api = connect.connect()
    assert server_of(api) == "https://10.0.0.1:443"
    assert api.configuration.api_key["authorization"].endswith(" pod-token")
    assert connect.default_namespace() == "team-a"


def test_home_config_is_the_last_resort(world):
    home_config(world, namespace="homens")
    assert server_of(connect.connect()) == "https://home:6443"
    assert connect.default_namespace() == "homens"


def test_a_broken_kubeconfig_is_one_line_naming_it(world):
    broken = world / "broken"
    broken.write_text("clusters: [\n  - {name: c\n")
    with pytest.raises(connect.ClusterConfigError) as caught:
        connect.connect(str(broken))
    assert not isinstance(caught.value, connect.NoClusterConfigured)
    assert str(broken) in str(caught.value) and "\n" not in str(caught.value)


def test_the_controller_client_follows_the_same_rule(world, monkeypatch):
    in_a_pod(world, monkeypatch)
    monkeypatch.setenv("KUBECONFIG", kubeconfig(world / "env", "https://env:6443"))
    client = KubeClient.from_kubeconfig(qps=0, pool_size=5)
    assert client.host == "https://env:6443"
    assert client.configuration.connection_pool_maxsize == 5
    assert client.configuration.retries is False  # KubeClient decides what is retried
