"""``kubectl debug`` against the API server: the pods it writes (``--copy-to``, ``node/X``,
sent as protobuf) and the ``ephemeralcontainers`` subresource it patches."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.usefixtures("crds")

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "labels": {"app": "web"}},
       "spec": {"containers": [{
           "name": "main", "image": "python", "command": ["sleep", "60"], "ports": [{"containerPort": 8080}],
           "env": [{"name": "MODE", "value": "serve"}], "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
           "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 3},
           "securityContext": {"runAsNonRoot": False, "capabilities": {"drop": ["NET_RAW"]}}}],
           "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
                       {"name": "settings", "configMap": {"name": "settings", "optional": True}}]}}


def test_debug_copy_to_sends_the_whole_pod_as_protobuf(kubectl):
    kubectl("apply", "-f", "-", input=json.dumps(POD))
    kubectl("debug", "app", "--copy-to=app-debug", "--image=busybox", "--container=dbg", "--", "sleep", "30")
    copy = kubectl.json("get", "pod", "app-debug")
    containers = {c["name"]: c for c in copy["spec"]["containers"]}
    assert set(containers) == {"main", "dbg"}
    assert containers["dbg"]["image"] == "busybox" and containers["dbg"]["command"] == ["sleep", "30"]
    main = containers["main"]
    assert main["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 8080, "scheme": "HTTP"}
    assert main["securityContext"]["capabilities"] == {"drop": ["NET_RAW"]}
    assert main["volumeMounts"][0]["mountPath"] == "/scratch" and main["env"] == [{"name": "MODE", "value": "serve"}]
    volumes = {v["name"]: v for v in copy["spec"]["volumes"]}
    assert volumes["scratch"]["emptyDir"] == {"sizeLimit": "1Gi"}
    assert volumes["settings"]["configMap"]["name"] == "settings" and volumes["settings"]["configMap"]["optional"]


def test_debug_node_runs_a_host_namespaced_pod_on_that_node(kubectl):
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-x"}}
    kubectl("apply", "-f", "-", input=json.dumps(node))
    out = kubectl("debug", "node/node-x", "--image=busybox", "--", "true")
    name = next(word for word in out.split() if word.startswith("node-debugger-node-x-"))
    pod = kubectl.json("get", "pod", name)
    spec = pod["spec"]
    assert spec["nodeName"] == "node-x"
    assert spec["hostNetwork"] and spec["hostPID"] and spec["hostIPC"]
    assert [v["hostPath"]["path"] for v in spec["volumes"] if v["name"] == "host-root"] == ["/"]
    assert {"mountPath": "/host", "name": "host-root"} in spec["containers"][0]["volumeMounts"]
    assert spec["tolerations"] == [{"operator": "Exists"}]
