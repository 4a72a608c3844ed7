"""Environment and command line as the kubelet computes them."""

import base64

import pytest

from trainctl.cluster.kubelet.env import ConfigError, command_line, container_env, expand

POD = {
    "metadata": {"name": "job-worker-0", "namespace": "team", "uid": "u-1", "labels": {"app": "x"},
                 "annotations": {"note": "hi"}},
    "spec": {"nodeName": "trainctl-local", "containers": []},
    "status": {"podIP": "127.128.0.7", "hostIP": "127.0.0.1"},
}
CONFIGMAPS = {("team", "settings"): {"metadata": {"namespace": "team"}, "data": {"LR": "0.1", "bad name": "x"}}}
SECRETS = {("team", "creds"): {"data": {"TOKEN": base64.b64encode(b"s3cret").decode()}}}


def env_of(container):
    return container_env(POD, container, lambda ns, n: CONFIGMAPS.get((ns, n)), lambda ns, n: SECRETS.get((ns, n)),
                         {"cpu": "2", "memory": "1Gi"})


def test_expand_follows_kubernetes_rules():
    assert expand("$(A)-$(B)-$$(A)-$(", {"A": "1"}) == "1-$(B)-$(A)-$("
    assert expand("cost: $5 $", {}) == "cost: $5 $"


def test_value_from_sources():
    container = {"name": "c", "resources": {"limits": {"cpu": "1500m"}}, "env": [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LR"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "TOKEN"}}},
        {"name": "ADDR", "value": "$(POD_IP):$(PORT)"},
    ]}
    env = env_of(container)
    assert env == {"POD_NAME": "job-worker-0", "POD_IP": "127.128.0.7", "NS": "team", "APP": "x",
                   "NODE": "trainctl-local", "CPUS": "2", "MEM_MI": "1024", "LR": "0.1", "TOKEN": "s3cret",
                   "ADDR": "127.128.0.7:$(PORT)"}


def test_env_from_with_prefix_skips_invalid_names_and_env_wins():
    container = {"name": "c", "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
                                          {"secretRef": {"name": "creds"}}],
                 "env": [{"name": "CFG_LR", "value": "0.5"}]}
    assert env_of(container) == {"CFG_LR": "0.5", "TOKEN": "s3cret"}


def test_missing_configmap_is_a_config_error_unless_optional():
    with pytest.raises(ConfigError, match='configmap "nope" not found'):
        env_of({"name": "c", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}]})
    optional = {"name": "c", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k",
                                                                                     "optional": True}}}]}
    assert env_of(optional) == {}


def test_command_line_expands_and_needs_something_to_run():
    env = {"EPOCHS": "3"}
    assert command_line({"command": ["python"], "args": ["train.py", "--epochs=$(EPOCHS)"]}, env) == \
        ["python", "train.py", "--epochs=3"]
    assert command_line({"args": ["python", "-V"]}, env) == ["python", "-V"]
    with pytest.raises(ConfigError, match="no command or args"):
        command_line({"name": "c"}, env)
