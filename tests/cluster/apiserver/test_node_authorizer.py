"""The Node authorizer: a node gets the objects its own pods name, and nothing else."""

from __future__ import annotations

from typing import Any

from trainctl.cluster.apiserver.auth.node_authorizer import NodeAuthorizer, references

NODE = {"user": "system:node:a", "groups": ["system:nodes", "system:authenticated"]}
POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "team"},
    "spec": {"nodeName": "a", "serviceAccountName": "runner", "imagePullSecrets": [{"name": "pull"}],
             "volumes": [{"name": "v1", "secret": {"secretName": "vol-secret"}},
                         {"name": "v2", "configMap": {"name": "vol-config"}},
                         {"name": "v3", "persistentVolumeClaim": {"claimName": "claim"}},
                         {"name": "v4", "projected": {"sources": [{"secret": {"name": "proj-secret"}},
                                                                  {"configMap": {"name": "proj-config"}}]}}],
             "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-secret"}}]}],
             "containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"configMapKeyRef": {"name": "env-config",
                                                                                                   "key": "k"}}}],
                             "envFrom": [{"configMapRef": {"name": "from-config"}}]}]}}
ELSEWHERE: dict[str, Any] = {"metadata": {"name": "q", "namespace": "team"},
                             "spec": {"nodeName": "b", "volumes": [{"name": "v", "secret": {"secretName": "b-only"}}]}}


def _authorizer() -> NodeAuthorizer:
    return NodeAuthorizer(lambda namespace: [POD, ELSEWHERE] if namespace == "team" else [])


def _get(resource: str, name: str, namespace: str = "team", **more: str) -> dict[str, str]:
    return {"verb": "get", "group": "", "resource": resource, "namespace": namespace, "name": name, **more}


def test_every_kind_of_reference_counts() -> None:
    assert references(POD) == {("secrets", "pull"), ("secrets", "vol-secret"), ("configmaps", "vol-config"),
                               ("persistentvolumeclaims", "claim"), ("secrets", "proj-secret"),
                               ("configmaps", "proj-config"), ("secrets", "init-secret"),
                               ("configmaps", "env-config"), ("configmaps", "from-config")}


def test_a_node_gets_what_its_pods_name_and_no_more() -> None:
    authorizer = _authorizer()
    for resource, name in references(POD):
        assert authorizer.allows(NODE, _get(resource, name))
    assert not authorizer.allows(NODE, _get("secrets", "b-only"))  # another node's pod's
    assert not authorizer.allows(NODE, _get("secrets", "vol-secret", namespace="other"))
    assert not authorizer.allows(NODE, {**_get("secrets", "vol-secret"), "verb": "list"})
    assert not authorizer.allows(NODE, {**_get("secrets", ""), "verb": "list"})
    assert not authorizer.allows(NODE, {**_get("secrets", "vol-secret"), "verb": "update"})
    b = {"user": "system:node:b", "groups": ["system:nodes"]}
    assert authorizer.allows(b, _get("secrets", "b-only")) and not authorizer.allows(b, _get("secrets", "vol-secret"))


def test_a_node_asks_tokens_for_its_pods_accounts_only() -> None:
    authorizer = _authorizer()
    token = {"verb": "create", "group": "", "resource": "serviceaccounts", "subresource": "token", "namespace": "team"}
    assert authorizer.allows(NODE, {**token, "name": "runner"})
    assert authorizer.allows(NODE, _get("serviceaccounts", "runner"))
    assert not authorizer.allows(NODE, {**token, "name": "default"})
    assert not authorizer.allows(NODE, {**token, "name": "runner", "verb": "get"})


def test_nobody_else_is_judged_here() -> None:
    authorizer = _authorizer()
    for user in ({"user": "system:node:a", "groups": []}, {"user": "alice", "groups": ["system:nodes"]},
                 {"user": "system:serviceaccount:team:runner", "groups": ["system:serviceaccounts"]}):
        assert not authorizer.allows(user, _get("secrets", "vol-secret"))


def test_malformed_pods_stored_before_validation_are_read_as_referencing_nothing() -> None:
    from trainctl.cluster.apiserver.auth.node_authorizer import references

    assert references({"spec": "garbage"}) == set()
    assert references({"spec": {"volumes": ["x", {"secret": "y"}], "containers": [{"env": ["x", {"valueFrom": "z"}]}]}}) == set()
