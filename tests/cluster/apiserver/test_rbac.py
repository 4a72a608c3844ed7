"""The RBAC authorizer decides with plain dicts as kube-apiserver's RBAC authorizer does."""

from __future__ import annotations

from typing import Any

import pytest

from trainctl.cluster.apiserver import bootstrap_policy
from trainctl.cluster.apiserver.auth import rbac, request_info

Obj = dict[str, Any]

SA = {"user": "system:serviceaccount:team:runner",
      "groups": ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]}
ALICE = {"user": "alice", "groups": ["system:authenticated", "devs"]}


def role(name: str, rules: list[Obj], namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, "rules": rules}


def binding(name: str, role_kind: str, role_name: str, subjects: list[Obj], namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, "roleRef": {"apiGroup": rbac.RBAC_GROUP, "kind": role_kind, "name": role_name},
            "subjects": subjects}


def pods(verb: str, namespace: str = "team", name: str = "", subresource: str = "") -> Obj:
    return {"verb": verb, "group": "", "resource": "pods", "namespace": namespace, "name": name,
            "subresource": subresource}


def with_defaults(**kinds: list[Obj]) -> rbac.Policy:
    return rbac.Policy(cluster_roles=bootstrap_policy.cluster_roles() + kinds.get("cluster_roles", []),
                       cluster_role_bindings=bootstrap_policy.cluster_role_bindings() + kinds.get("cluster_role_bindings", []),
                       roles=kinds.get("roles", []), role_bindings=kinds.get("role_bindings", []))


POD_READER = role("pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}], "team")
SA_READS_PODS = binding("read-pods", "Role", "pod-reader", [{"kind": "ServiceAccount", "name": "runner", "namespace": "team"}],
                        "team")


def test_a_role_binding_grants_its_roles_rules_in_its_namespace_only() -> None:
    policy = with_defaults(roles=[POD_READER], role_bindings=[SA_READS_PODS])
    decision = rbac.authorize(policy, SA, pods("list"))
    assert decision.allowed
    assert decision.reason == ('RBAC: allowed by RoleBinding "read-pods/team" of Role "pod-reader" '
                               'to ServiceAccount "runner/team"')
    assert not rbac.authorize(policy, SA, pods("list", namespace="other")).allowed
    assert not rbac.authorize(policy, SA, pods("delete", name="p")).allowed
    assert not rbac.authorize(policy, SA, {**pods("list"), "namespace": ""}).allowed  # all namespaces


def test_nothing_is_allowed_without_a_binding() -> None:
    decision = rbac.authorize(with_defaults(roles=[POD_READER]), SA, pods("list"))
    assert decision == rbac.Decision(False, "")


def test_the_forbidden_message_is_kube_apiservers() -> None:
    assert rbac.forbidden_message({"user": "system:serviceaccount:default:x"}, pods("list", namespace="default")) == (
        'pods is forbidden: User "system:serviceaccount:default:x" cannot list resource "pods" in API group "" '
        'in the namespace "default"')
    assert rbac.forbidden_message(ALICE, {"verb": "get", "group": "kubeflow.org", "resource": "pytorchjobs",
                                          "subresource": "status", "name": "j", "namespace": "ns"}) == (
        'pytorchjobs.kubeflow.org "j" is forbidden: User "alice" cannot get resource "pytorchjobs/status" '
        'in API group "kubeflow.org" in the namespace "ns"')
    assert rbac.forbidden_message(ALICE, {"verb": "list", "group": "", "resource": "nodes"}) == (
        'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope')
    assert rbac.forbidden_message(ALICE, {"verb": "get", "path": "/metrics"}) == (
        'forbidden: User "alice" cannot get path "/metrics"')


def test_a_cluster_role_binding_grants_everywhere_and_a_role_binding_may_name_a_cluster_role() -> None:
    reader = role("reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
    everywhere = binding("all", "ClusterRole", "reader", [{"kind": "Group", "name": "devs"}])
    assert rbac.authorize(with_defaults(cluster_roles=[reader], cluster_role_bindings=[everywhere]), ALICE,
                          pods("list", namespace="anywhere")).allowed
    here = binding("here", "ClusterRole", "reader", [{"kind": "User", "name": "alice"}], "team")
    policy = with_defaults(cluster_roles=[reader], role_bindings=[here])
    assert rbac.authorize(policy, ALICE, pods("list")).allowed
    assert not rbac.authorize(policy, ALICE, pods("list", namespace="other")).allowed


def test_a_role_binding_cannot_reach_a_role_of_another_namespace() -> None:
    elsewhere = role("pod-reader", POD_READER["rules"], "other")
    assert not rbac.authorize(with_defaults(roles=[elsewhere], role_bindings=[SA_READS_PODS]), SA, pods("list")).allowed


@pytest.mark.parametrize(("subject", "matches"), [
    ({"kind": "ServiceAccount", "name": "runner"}, True),  # a RoleBinding's own namespace
    ({"kind": "ServiceAccount", "name": "runner", "namespace": "elsewhere"}, False),
    ({"kind": "ServiceAccount", "name": "other", "namespace": "team"}, False),
    ({"kind": "Group", "name": "system:serviceaccounts:team"}, True),
    ({"kind": "Group", "name": "system:serviceaccounts"}, True),
    ({"kind": "User", "name": "system:serviceaccount:team:runner"}, True),
    ({"kind": "User", "name": "runner"}, False),
])
def test_subjects_name_a_service_account_as_kube_does(subject: Obj, matches: bool) -> None:
    assert rbac.subject_matches(subject, SA, "team") is matches


@pytest.mark.parametrize(("resources", "subresource", "allowed"), [
    (["pods"], "", True),
    (["pods"], "log", False),
    (["pods/log"], "log", True),
    (["pods/log"], "", False),
    (["*"], "exec", True),
    (["*/log"], "log", True),
    (["*/log"], "", False),
    (["pods/*"], "log", False),  # kube knows no such form
])
def test_resources_and_subresources(resources: list[str], subresource: str, allowed: bool) -> None:
    rule = {"apiGroups": [""], "resources": resources, "verbs": ["get"]}
    assert rbac.rule_allows(rule, pods("get", name="p", subresource=subresource)) is allowed


def test_resource_names_allow_only_requests_naming_one() -> None:
    rule = {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"], "verbs": ["get", "list"]}
    assert rbac.rule_allows(rule, pods("get", name="p"))
    assert not rbac.rule_allows(rule, pods("get", name="q"))
    assert not rbac.rule_allows(rule, pods("list"))


def test_api_groups_and_verbs_must_match_or_be_a_wildcard() -> None:
    job = {"verb": "update", "group": "kubeflow.org", "resource": "pytorchjobs", "subresource": "status",
           "name": "j", "namespace": "ns"}
    assert not rbac.rule_allows({"apiGroups": [""], "resources": ["*"], "verbs": ["*"]}, job)
    assert rbac.rule_allows({"apiGroups": ["*"], "resources": ["pytorchjobs/status"], "verbs": ["*"]}, job)
    assert not rbac.rule_allows({"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs/status"], "verbs": ["get"]}, job)


def test_non_resource_urls_match_exactly_or_by_a_star_prefix() -> None:
    rule = {"nonResourceURLs": ["/apis/*", "/version"], "verbs": ["get"]}
    assert rbac.rule_allows(rule, {"verb": "get", "path": "/apis/kubeflow.org/v1"})
    assert rbac.rule_allows(rule, {"verb": "get", "path": "/version"})
    assert not rbac.rule_allows(rule, {"verb": "get", "path": "/version/x"})
    assert not rbac.rule_allows(rule, {"verb": "post", "path": "/version"})
    assert not rbac.rule_allows({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"verb": "get", "path": "/api"})


def test_masters_may_do_anything_without_a_binding() -> None:
    admin = {"user": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
    assert rbac.authorize(rbac.Policy(), admin, pods("delete", name="x")).allowed
    assert rbac.rules_for(rbac.Policy(), admin, "team")[0] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]


def test_every_authenticated_user_may_discover_and_ask_about_itself() -> None:
    policy = with_defaults()
    for path in ("/api", "/apis", "/apis/kubeflow.org/v1", "/version", "/openapi/v3"):
        assert rbac.authorize(policy, SA, {"verb": "get", "path": path}).allowed, path
    review = {"verb": "create", "group": "authorization.k8s.io", "resource": "selfsubjectaccessreviews",
              "namespace": "", "name": "", "subresource": ""}
    assert rbac.authorize(policy, SA, review).allowed
    whoami = {**review, "group": "authentication.k8s.io", "resource": "selfsubjectreviews"}
    assert rbac.authorize(policy, SA, whoami).allowed
    assert not rbac.authorize(policy, {"user": "system:anonymous", "groups": ["system:unauthenticated"]}, whoami).allowed
    assert not rbac.authorize(policy, SA, {"verb": "get", "path": "/metrics"}).allowed


def test_the_bootstrap_user_roles_grant_by_namespace() -> None:
    policy = with_defaults(role_bindings=[binding("v", "ClusterRole", "view", [{"kind": "User", "name": "alice"}], "team"),
                                          binding("e", "ClusterRole", "edit", [{"kind": "User", "name": "alice"}], "dev")])
    assert rbac.authorize(policy, ALICE, pods("get", name="p", subresource="log")).allowed
    assert not rbac.authorize(policy, ALICE, pods("create")).allowed
    assert not rbac.authorize(policy, ALICE, {**pods("get", name="s"), "resource": "secrets"}).allowed
    assert rbac.authorize(policy, ALICE, pods("create", namespace="dev", name="p", subresource="exec")).allowed
    assert not rbac.authorize(policy, ALICE, {**pods("create", namespace="dev"), "group": rbac.RBAC_GROUP,
                                              "resource": "rolebindings"}).allowed


def test_rules_for_lists_what_a_user_holds_in_a_namespace() -> None:
    policy = with_defaults(roles=[POD_READER], role_bindings=[SA_READS_PODS])
    resource_rules, non_resource_rules = rbac.rules_for(policy, SA, "team")
    assert {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]} in resource_rules
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]} in resource_rules
    assert any("/apis/*" in rule["nonResourceURLs"] for rule in non_resource_rules)
    assert not any("pods" in rule["resources"] for rule in rbac.rules_for(policy, SA, "other")[0])


def test_a_binding_to_a_missing_role_grants_nothing() -> None:
    dangling = binding("d", "ClusterRole", "gone", [{"kind": "User", "name": "alice"}])
    assert not rbac.authorize(with_defaults(cluster_role_bindings=[dangling]), ALICE, pods("list")).allowed


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/ns/pods", {}, {"verb": "list", "resource": "pods", "namespace": "ns", "name": ""}),
    ("GET", "/api/v1/pods", {"watch": "true"}, {"verb": "watch", "resource": "pods", "namespace": ""}),
    ("GET", "/api/v1/namespaces/ns/pods/p/log", {}, {"verb": "get", "subresource": "log", "name": "p"}),
    ("GET", "/api/v1/namespaces/ns/pods/p/exec", {}, {"verb": "create", "subresource": "exec"}),
    ("POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", {}, {"verb": "create", "resource": "serviceaccounts",
                                                                  "subresource": "token", "name": "sa"}),
    ("DELETE", "/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs", {}, {"verb": "deletecollection",
                                                                     "group": "kubeflow.org", "version": "v1"}),
    ("PUT", "/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs/j/status", {}, {"verb": "update", "subresource": "status"}),
    ("PATCH", "/api/v1/nodes/n", {}, {"verb": "patch", "resource": "nodes", "namespace": ""}),
    ("GET", "/api/v1/namespaces/team", {}, {"verb": "get", "resource": "namespaces", "name": "team", "namespace": "team"}),
    ("PUT", "/api/v1/namespaces/team/finalize", {}, {"verb": "update", "resource": "namespaces", "subresource": "finalize"}),
    ("GET", "/apis", {}, {"path": "/apis", "verb": "get"}),
    ("GET", "/apis/kubeflow.org/v1", {}, {"path": "/apis/kubeflow.org/v1", "verb": "get"}),
    ("GET", "/openapi/v3/apis/kubeflow.org/v1", {}, {"path": "/openapi/v3/apis/kubeflow.org/v1", "verb": "get"}),
    ("POST", "/metrics", {}, {"path": "/metrics", "verb": "post"}),
    # A proxy's path is not part of its subresource: the rule is on pods/proxy, services/proxy.
    ("GET", "/api/v1/namespaces/ns/pods/p:8080/proxy/a/b", {}, {"verb": "get", "resource": "pods", "name": "p:8080",
                                                               "subresource": "proxy"}),
    ("POST", "/api/v1/namespaces/ns/services/web:80/proxy/", {}, {"verb": "create", "subresource": "proxy"}),
    ("GET", "/api/v1/nodes/n/proxy/healthz", {}, {"verb": "get", "resource": "nodes", "subresource": "proxy"}),
    ("PATCH", "/api/v1/namespaces/ns/pods/p/ephemeralcontainers", {}, {"verb": "patch",
                                                                       "subresource": "ephemeralcontainers"}),
])
def test_request_attributes_are_read_from_method_and_path(method: str, path: str, query: dict[str, str],
                                                          expected: Obj) -> None:
    attributes = request_info.attributes(method, path, query)
    assert {key: attributes.get(key) for key in expected} == expected


@pytest.mark.parametrize(("owner", "requested", "missing"), [
    # a literal "*" asked for is held only by "*"
    ([{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get"]}],
     [{"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}],
     [{"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}]),
    ([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
     [{"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]}], []),
    # "*/log" holds the log of every resource; "pods" does not hold "pods/log"
    ([{"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]}],
     [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}], []),
    ([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
     [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}],
     [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]),
    # resource names: named holds only those names, unnamed holds every name
    ([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"], "verbs": ["get"]}],
     [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a", "b"], "verbs": ["get"]}],
     [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["b"], "verbs": ["get"]}]),
    ([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"], "verbs": ["get"]}],
     [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
     [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
    # non-resource URLs by a star prefix; verbs of one resource compacted into one rule
    ([{"nonResourceURLs": ["/healthz/*"], "verbs": ["get"]}],
     [{"nonResourceURLs": ["/healthz/etcd", "/metrics"], "verbs": ["get"]}],
     [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
    ([], [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
     [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]),
])
def test_not_held_breaks_rules_down_as_kubes_covers_does(owner: list[Obj], requested: list[Obj],
                                                         missing: list[Obj]) -> None:
    assert rbac.not_held(owner, requested) == missing


def test_the_escalation_message_prints_rules_as_kube_does() -> None:
    missing = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
               {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert rbac.escalation_message(ALICE, missing) == (
        'user "alice" (groups=["system:authenticated" "devs"]) is attempting to grant RBAC permissions not currently '
        'held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}\n{NonResourceURLs:["/metrics"], Verbs:["get"]}')
