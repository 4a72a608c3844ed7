"""RBAC escalation prevention, from the attacker's side: a ServiceAccount that may write Roles
or RoleBindings cannot grant itself, or anyone, more than it holds (kube-apiserver's
``ConfirmNoEscalation`` and ``BindingAuthorized``)."""

from __future__ import annotations

from typing import Any

from trainctl.cluster.apiserver.process import ApiServerHandle

from tests.cluster.apiserver.test_access import NS, call
from tests.support.kubectl import Kubectl

RBAC = "/apis/rbac.authorization.k8s.io/v1"
ATTACKER = f"system:serviceaccount:{NS}:attacker"
GROUPS = f'(groups=["system:serviceaccounts" "system:serviceaccounts:{NS}" "system:authenticated"])'


def attacker(kubectl: Kubectl, *rules: tuple[str, str]) -> str:
    """ServiceAccount ``attacker`` in ``team``, allowed (verbs, resources) in ``team`` only; its token."""
    kubectl("create", "namespace", NS)
    kubectl("create", "serviceaccount", "attacker", "-n", NS)
    for i, (verbs, resources) in enumerate(rules):
        kubectl("create", "role", f"attacker-{i}", f"--verb={verbs}", f"--resource={resources}", "-n", NS)
        kubectl("create", "rolebinding", f"attacker-{i}", f"--role=attacker-{i}", f"--serviceaccount={NS}:attacker", "-n", NS)
    return kubectl("create", "token", "attacker", "-n", NS).strip()


def role_binding(name: str, kind: str, role: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "attacker", "namespace": NS}]}


def role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules}


def test_a_service_account_that_may_create_role_bindings_cannot_bind_cluster_admin(
        apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    token = attacker(kubectl, ("create", "rolebindings"), ("get", "pods"))
    kubectl("create", "secret", "generic", "db", "--from-literal=password=hunter2", "-n", NS)
    code, status = call(apiserver, f"{RBAC}/namespaces/{NS}/rolebindings", token, "POST",
                        role_binding("pwn", "ClusterRole", "cluster-admin"))
    assert (code, status["reason"]) == (403, "Forbidden"), status
    assert status["message"].startswith(
        f'rolebindings.rbac.authorization.k8s.io "pwn" is forbidden: user "{ATTACKER}" {GROUPS} is attempting to '
        "grant RBAC permissions not currently held:\n"), status["message"]
    assert "{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}" in status["message"]
    assert call(apiserver, f"/api/v1/namespaces/{NS}/secrets/db", token)[0] == 403
    assert kubectl.run("get", "rolebinding", "pwn", "-n", NS, check=False).returncode != 0

    # A role whose every rule it holds, it may bind (here: reading pods).
    kubectl("create", "role", "pod-getter", "--verb=get", "--resource=pods", "-n", NS)
    assert call(apiserver, f"{RBAC}/namespaces/{NS}/rolebindings", token, "POST",
                role_binding("ok", "Role", "pod-getter"))[0] == 201
    # ... but not one that adds reading secrets.
    kubectl("create", "role", "secret-getter", "--verb=get", "--resource=secrets,pods", "-n", NS)
    code, status = call(apiserver, f"{RBAC}/namespaces/{NS}/rolebindings", token, "POST",
                        role_binding("secrets", "Role", "secret-getter"))
    assert code == 403
    assert status["message"].endswith('not currently held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}')


def test_the_bind_verb_on_a_named_cluster_role_allows_binding_it(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    token = attacker(kubectl, ("create", "rolebindings"))
    kubectl("create", "clusterrole", "bind-view", "--verb=bind", "--resource=clusterroles.rbac.authorization.k8s.io",
            "--resource-name=view")
    kubectl("create", "rolebinding", "bind-view", "--clusterrole=bind-view", f"--serviceaccount={NS}:attacker", "-n", NS)
    assert call(apiserver, f"{RBAC}/namespaces/{NS}/rolebindings", token, "POST",
                role_binding("view", "ClusterRole", "view"))[0] == 201
    assert call(apiserver, f"{RBAC}/namespaces/{NS}/rolebindings", token, "POST",
                role_binding("edit", "ClusterRole", "edit"))[0] == 403
    code, status = call(apiserver, f"{RBAC}/namespaces/{NS}/rolebindings", token, "POST",
                        role_binding("ghost", "ClusterRole", "no-such-role"))
    assert (code, status["message"]) == (400, 'clusterroles.rbac.authorization.k8s.io "no-such-role" not found')


def test_a_role_granting_what_its_writer_lacks_needs_the_escalate_verb(apiserver: ApiServerHandle,
                                                                       kubectl: Kubectl) -> None:
    token = attacker(kubectl, ("create,update", "roles"), ("get,list", "pods"))
    everything = role("everything", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}])
    code, status = call(apiserver, f"{RBAC}/namespaces/{NS}/roles", token, "POST", everything)
    assert (code, status["message"]) == (403, (
        f'roles.rbac.authorization.k8s.io "everything" is forbidden: user "{ATTACKER}" {GROUPS} is attempting to '
        'grant RBAC permissions not currently held:\n{APIGroups:["*"], Resources:["*"], Verbs:["*"]}'))
    held = role("held", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
    code, created = call(apiserver, f"{RBAC}/namespaces/{NS}/roles", token, "POST", held)
    assert code == 201
    # Widening it later is an escalation too.
    created["rules"][0]["verbs"] = ["get", "delete"]
    code, status = call(apiserver, f"{RBAC}/namespaces/{NS}/roles/held", token, "PUT", created)
    assert code == 403 and status["message"].endswith(
        'not currently held:\n{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}'), status

    kubectl("create", "role", "escalator", "--verb=escalate", "--resource=roles.rbac.authorization.k8s.io", "-n", NS)
    kubectl("create", "rolebinding", "escalator", "--role=escalator", f"--serviceaccount={NS}:attacker", "-n", NS)
    assert call(apiserver, f"{RBAC}/namespaces/{NS}/roles", token, "POST", everything)[0] == 201


def test_the_admin_still_creates_every_role_and_binding(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    kubectl("create", "clusterrole", "all", "--verb=*", "--resource=*.*")
    kubectl("create", "clusterrolebinding", "all", "--clusterrole=all", "--user=alice")
    kubectl("create", "rolebinding", "admin", "--clusterrole=cluster-admin", "--user=bob", "-n", NS)
    kubectl("label", "clusterrole", "all", "team=x")
    assert kubectl.json("get", "rolebinding", "admin", "-n", NS)["roleRef"]["name"] == "cluster-admin"
