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


def _ephemeral(kubectl, pod: str, containers: list[dict], check: bool = True):
    patch = {"spec": {"ephemeralContainers": containers}}
    return kubectl.run("patch", "pod", pod, "--subresource=ephemeralcontainers", "--type=strategic",
                       "-p", json.dumps(patch), check=check)


def test_ephemeral_containers_are_only_added_through_their_subresource(kubectl):
    kubectl("apply", "-f", "-", input=json.dumps(POD))
    debugger = {"name": "dbg", "image": "busybox", "command": ["sh"], "targetContainerName": "main", "stdin": True}
    _ephemeral(kubectl, "app", [debugger])
    pod = kubectl.json("get", "pod", "app")
    assert [c["name"] for c in pod["spec"]["ephemeralContainers"]] == ["dbg"]
    assert pod["spec"]["ephemeralContainers"][0]["targetContainerName"] == "main"
    assert json.loads(kubectl("get", "--raw", "/api/v1/namespaces/default/pods/app/ephemeralcontainers"))["kind"] == "Pod"

    # An update of the pod itself keeps them: it can neither add nor remove one.
    pod["spec"]["ephemeralContainers"] = [{"name": "sneaky", "image": "busybox"}]
    kubectl("replace", "-f", "-", input=json.dumps(pod))
    assert [c["name"] for c in kubectl.json("get", "pod", "app")["spec"]["ephemeralContainers"]] == ["dbg"]

    refused = _ephemeral(kubectl, "app", [{"name": "main", "image": "busybox"}], check=False)
    assert refused.returncode == 1 and 'spec.ephemeralContainers[1].name: Duplicate value: "main"' in refused.stderr
    refused = _ephemeral(kubectl, "app", [{"name": "web", "image": "busybox", "ports": [{"containerPort": 80}],
                                           "readinessProbe": {"exec": {"command": ["true"]}},
                                           "resources": {"limits": {"cpu": "1"}}}], check=False)
    for field in ("ports", "readinessProbe", "resources"):
        assert f"spec.ephemeralContainers[1].{field}: Forbidden: cannot be set for an Ephemeral Container" in refused.stderr
    refused = _ephemeral(kubectl, "app", [{"name": "t", "image": "busybox", "targetContainerName": "nosuch"}], check=False)
    assert 'spec.ephemeralContainers[1].targetContainerName: Not found: "nosuch"' in refused.stderr
    changed = kubectl.run("patch", "pod", "app", "--subresource=ephemeralcontainers", "--type=json", "-p",
                          json.dumps([{"op": "replace", "path": "/spec/ephemeralContainers/0/image", "value": "alpine"}]),
                          check=False)
    assert 'existing ephemeral containers "dbg" may not be changed' in changed.stderr
    removed = kubectl.run("patch", "pod", "app", "--subresource=ephemeralcontainers", "--type=json", "-p",
                          json.dumps([{"op": "remove", "path": "/spec/ephemeralContainers/0"}]), check=False)
    assert 'existing ephemeral containers "dbg" may not be removed' in removed.stderr
    # The subresource writes nothing else of the pod.
    _ephemeral(kubectl, "app", [{"name": "dbg2", "image": "busybox"}])
    labelled = kubectl.run("patch", "pod", "app", "--subresource=ephemeralcontainers", "--type=merge",
                           "-p", json.dumps({"metadata": {"labels": {"app": "other"}}}))
    assert labelled.returncode == 0
    assert kubectl.json("get", "pod", "app")["metadata"]["labels"] == {"app": "web"}


def test_a_pod_is_not_created_with_ephemeral_containers(kubectl):
    pod = json.loads(json.dumps(POD))
    pod["spec"]["ephemeralContainers"] = [{"name": "dbg", "image": "busybox"}]
    refused = kubectl.run("apply", "-f", "-", input=json.dumps(pod), check=False)
    assert refused.returncode == 1 and "spec.ephemeralContainers: Forbidden: cannot be set on create" in refused.stderr


def test_kubectl_debug_adds_an_ephemeral_container(kubectl):
    kubectl("apply", "-f", "-", input=json.dumps(POD))
    kubectl("debug", "app", "--image=busybox", "--target=main", "--container=debugger", "--", "true")
    added = kubectl.json("get", "pod", "app")["spec"]["ephemeralContainers"]
    assert [(c["name"], c["image"], c["targetContainerName"], c["command"]) for c in added] == [
        ("debugger", "busybox", "main", ["true"])]


def test_adding_an_ephemeral_container_needs_its_own_permission(kubectl):
    kubectl("apply", "-f", "-", input=json.dumps(POD))
    kubectl("create", "role", "editor", "--verb=get,list,watch,update,patch", "--resource=pods")
    kubectl("create", "rolebinding", "editor", "--role=editor", "--user=alice")
    refused = kubectl.run("--as=alice", "debug", "app", "--image=busybox", "--", "true", check=False)
    assert refused.returncode == 1
    assert 'cannot patch resource "pods/ephemeralcontainers"' in refused.stderr, refused.stderr
    # Nor through the pod itself: its update keeps the ephemeral containers it has.
    pod = kubectl.json("get", "pod", "app")
    pod["spec"]["ephemeralContainers"] = [{"name": "sneaky", "image": "busybox", "command": ["sh"]}]
    kubectl("--as=alice", "replace", "-f", "-", input=json.dumps(pod))
    assert "ephemeralContainers" not in kubectl.json("get", "pod", "app")["spec"]
    kubectl("create", "role", "debugger", "--verb=patch", "--resource=pods/ephemeralcontainers")
    kubectl("create", "rolebinding", "debugger", "--role=debugger", "--user=alice")
    kubectl("--as=alice", "debug", "app", "--image=busybox", "--container=dbg", "--", "true")
    assert [c["name"] for c in kubectl.json("get", "pod", "app")["spec"]["ephemeralContainers"]] == ["dbg"]
