"""NodeRestriction, from a compromised kubelet's side: node A's identity, whatever RBAC grants
it, writes only its own Node and Lease and the status of pods bound to it.

A node's identity is ``system:node:NAME`` in ``system:nodes``; here it is reached through
impersonation, which kube-apiserver treats exactly as that identity authenticating."""

from __future__ import annotations

import json
from typing import Any

from trainctl.cluster.apiserver.process import ApiServerHandle

from tests.cluster.apiserver.test_access import call
from tests.support.kubectl import Kubectl

NODE_A = {"Impersonate-User": "system:node:node-a", "Impersonate-Group": "system:nodes"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def bound_pod(name: str, node_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "x"}]}}


def as_node_a(apiserver: ApiServerHandle, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    headers = {**NODE_A, **(MERGE if method == "PATCH" else {})}
    return call(apiserver, path, apiserver.token, method, body, headers=headers)


def test_a_kubelet_cannot_write_another_nodes_status_or_pods(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    for name in ("node-a", "node-b"):
        kubectl("apply", "-f", "-", input=json.dumps(node(name)))
    for name, on in (("mine", "node-a"), ("theirs", "node-b")):
        kubectl("apply", "-f", "-", input=json.dumps(bound_pod(name, on)))
    # RBAC lets every node write every node and pod: NodeRestriction still holds each to its own.
    kubectl("create", "clusterrole", "kubelets", "--verb=get,create,update,patch,delete",
            "--resource=nodes,nodes/status,pods,pods/status")
    kubectl("create", "clusterrolebinding", "kubelets", "--clusterrole=kubelets", "--group=system:nodes")
    not_ready = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Hijacked"}]}}

    code, status = as_node_a(apiserver, "/api/v1/nodes/node-b/status", "PATCH", not_ready)
    assert (code, status["message"]) == (
        403, 'nodes "node-b" is forbidden: node "node-a" is not allowed to modify node "node-b"'), status
    assert as_node_a(apiserver, "/api/v1/nodes/node-b", "PATCH", {"metadata": {"labels": {"x": "y"}}})[0] == 403
    assert as_node_a(apiserver, "/api/v1/nodes/node-b", "DELETE")[0] == 403
    assert as_node_a(apiserver, "/api/v1/nodes", "POST", node("node-c"))[0] == 403
    assert "Hijacked" not in json.dumps(kubectl.json("get", "node", "node-b"))

    code, status = as_node_a(apiserver, "/api/v1/namespaces/default/pods/theirs/status", "PATCH",
                             {"status": {"phase": "Failed"}})
    assert (code, status["message"]) == (403, 'pods "theirs" is forbidden: node "node-a" can only update pod status '
                                              "for pods with spec.nodeName set to itself")
    assert as_node_a(apiserver, "/api/v1/namespaces/default/pods/theirs", "DELETE")[0] == 403
    code, status = as_node_a(apiserver, "/api/v1/namespaces/default/pods", "POST", bound_pod("new", "node-a"))
    assert code == 403 and "can only create mirror pods" in status["message"]

    # Its own node and pods it may write, as RBAC allows.
    assert as_node_a(apiserver, "/api/v1/nodes/node-a/status", "PATCH", not_ready)[0] == 200
    assert as_node_a(apiserver, "/api/v1/namespaces/default/pods/mine/status", "PATCH",
                     {"status": {"phase": "Running"}})[0] == 200
    assert as_node_a(apiserver, "/api/v1/namespaces/default/pods/mine", "DELETE")[0] == 200


def test_other_users_are_governed_by_rbac_alone(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(node("node-b")))
    kubectl("create", "serviceaccount", "node-doctor", "-n", "default")
    kubectl("create", "clusterrole", "node-status", "--verb=patch", "--resource=nodes/status")
    kubectl("create", "clusterrolebinding", "node-doctor", "--clusterrole=node-status",
            "--serviceaccount=default:node-doctor")
    token = kubectl("create", "token", "node-doctor", "-n", "default").strip()
    assert call(apiserver, "/api/v1/nodes/node-b/status", token, "PATCH", {"status": {"capacity": {"cpu": "2"}}},
                headers=MERGE)[0] == 200
    # An identity named like a node but outside system:nodes is no node.
    kubectl("create", "clusterrolebinding", "fake-node", "--clusterrole=node-status", "--user=system:node:node-a")
    assert call(apiserver, "/api/v1/nodes/node-b/status", apiserver.token, "PATCH", {"status": {}},
                headers={"Impersonate-User": "system:node:node-a", **MERGE})[0] == 200
