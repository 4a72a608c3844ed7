"""DefaultTolerationSeconds: pods created through kubectl and the Python client get the
not-ready and unreachable NoExecute tolerations (300 s) unless they already tolerate them."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}


def pod(name: str, tolerations: list[dict] | None = None) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def created_tolerations(kubectl, obj: dict) -> list[dict]:
    kubectl("create", "-f", "-", input=json.dumps(obj))
    return kubectl.json("get", "pod", obj["metadata"]["name"])["spec"]["tolerations"]


def test_a_pod_without_tolerations_gets_both_defaults(kubectl):
    assert created_tolerations(kubectl, pod("plain")) == [NOT_READY, UNREACHABLE]


def test_the_defaults_follow_the_pods_own_tolerations(kubectl):
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert created_tolerations(kubectl, pod("gpu", [gpu])) == [gpu, NOT_READY, UNREACHABLE]


@pytest.mark.parametrize("own, added", [
    # The pod's own toleration of one taint stays as it is (its seconds included); the other is added.
    ({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10},
     [NOT_READY]),
    # Equal with a value still counts: the plugin looks at key and effect only.
    ({"key": "node.kubernetes.io/not-ready", "operator": "Equal", "value": "x", "effect": "NoExecute"}, [UNREACHABLE]),
    # An empty effect matches every effect.
    ({"key": "node.kubernetes.io/not-ready", "operator": "Exists"}, [UNREACHABLE]),
    # An empty key with Exists tolerates every taint.
    ({"operator": "Exists"}, []),
    ({"operator": "Exists", "effect": "NoExecute"}, []),
    # Another effect of the same key does not.
    ({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}, [NOT_READY, UNREACHABLE]),
])
def test_existing_tolerations_count_by_key_and_effect(kubectl, own, added):
    assert created_tolerations(kubectl, pod("p", [own])) == [own, *added]


def test_pods_created_by_the_python_client_get_them_too(api):
    core = client.CoreV1Api(api)
    created = core.create_namespaced_pod("default", pod("py"))
    assert [(t.key, t.operator, t.effect, t.toleration_seconds) for t in created.spec.tolerations] == [
        ("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300)]
