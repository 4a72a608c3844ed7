"""Who a request is and what it may do, over HTTPS against the real server process: tokens,
impersonation, RBAC on subresources, watches and non-resource paths, TokenRequest rules."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from trainctl.cluster.apiserver.process import ApiServerHandle

from tests.support.kubectl import Kubectl

NS = "team"


def call(apiserver: ApiServerHandle, path: str, token: str, method: str = "GET", body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(apiserver.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                              **(headers or {})})
    context = ssl.create_default_context(cafile=str(apiserver.ca_cert))
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "x", "command": ["true"]}]}}


def setup_reader(kubectl: Kubectl) -> str:
    """ServiceAccount ``reader`` in ``team``, which may get (not list) pods; its token."""
    kubectl("create", "namespace", NS)
    kubectl("create", "serviceaccount", "reader", "-n", NS)
    kubectl("create", "role", "get-pods", "--verb=get", "--resource=pods", "-n", NS)
    kubectl("create", "rolebinding", "reader", "--role=get-pods", f"--serviceaccount={NS}:reader", "-n", NS)
    return kubectl("create", "token", "reader", "-n", NS).strip()


def test_rbac_covers_subresources_watches_and_non_resource_paths(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    token = setup_reader(kubectl)
    kubectl("apply", "-f", "-", input=json.dumps(pod("p")))
    user = f"system:serviceaccount:{NS}:reader"
    assert call(apiserver, f"/api/v1/namespaces/{NS}/pods/p", token)[0] == 200
    code, status = call(apiserver, f"/api/v1/namespaces/{NS}/pods/p/log", token)
    assert (code, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (f'pods "p" is forbidden: User "{user}" cannot get resource "pods/log" in API group "" '
                                 f'in the namespace "{NS}"')
    assert status["details"] == {"name": "p", "kind": "pods"}
    code, status = call(apiserver, f"/api/v1/namespaces/{NS}/pods?watch=true", token)
    assert code == 403 and "cannot watch resource" in status["message"]
    code, status = call(apiserver, "/metrics", token)
    assert (code, status["message"]) == (403, f'forbidden: User "{user}" cannot get path "/metrics"')
    # Refused before routing: a resource that does not exist is 403 too, as in kube-apiserver.
    assert call(apiserver, f"/api/v1/namespaces/{NS}/nothings", token)[0] == 403
    assert call(apiserver, "/apis", token)[0] == 200
    assert call(apiserver, "/version", "not-a-token")[0] == 200


def test_tokens_die_with_their_account_or_bound_pod(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    setup_reader(kubectl)
    kubectl("apply", "-f", "-", input=json.dumps(pod("bound")))
    uid = kubectl.json("get", "pod", "bound", "-n", NS)["metadata"]["uid"]
    bound = kubectl("create", "token", "reader", "-n", NS, "--bound-object-kind=Pod", "--bound-object-name=bound",
                    f"--bound-object-uid={uid}").strip()
    whoami = call(apiserver, "/apis/authentication.k8s.io/v1/selfsubjectreviews", bound, "POST",
                  {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})[1]
    assert whoami["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-uid"] == [uid]
    kubectl("delete", "pod", "bound", "-n", NS, "--grace-period=0", "--force")
    code, status = call(apiserver, f"/api/v1/namespaces/{NS}/pods/p", bound)
    assert (code, status["reason"]) == (401, "Unauthorized")

    unbound = kubectl("create", "token", "reader", "-n", NS).strip()
    assert call(apiserver, "/apis", unbound)[0] == 200
    kubectl("delete", "serviceaccount", "reader", "-n", NS)
    kubectl("create", "serviceaccount", "reader", "-n", NS)  # the same name, another account
    assert call(apiserver, "/apis", unbound)[0] == 401


def test_a_token_lifetime_past_two_to_the_32_seconds_is_invalid_not_an_internal_error(
        apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    setup_reader(kubectl)
    path = f"/api/v1/namespaces/{NS}/serviceaccounts/reader/token"
    code, status = call(apiserver, path, apiserver.token, "POST", {"spec": {"expirationSeconds": 10**15}})
    assert (code, status["reason"]) == (422, "Invalid"), status
    assert status["details"]["causes"][0]["field"] == "spec.expirationSeconds"
    assert "Invalid value: 1000000000000000: may not specify a duration larger than 2^32 seconds" in status["message"]
    code, issued = call(apiserver, path, apiserver.token, "POST", {"spec": {"expirationSeconds": 2**32}})
    assert code == 201, issued
    years = 2**32 // (365 * 24 * 3600)
    assert int(issued["status"]["expirationTimestamp"][:4]) >= time.gmtime().tm_year + years


def test_forged_and_expired_tokens_are_refused(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    token = setup_reader(kubectl)
    claims = jwt.decode(token, options={"verify_signature": False})
    forged = jwt.encode(claims, ec.generate_private_key(ec.SECP256R1()), algorithm="ES256")
    assert call(apiserver, "/apis", forged)[0] == 401
    expired = call(apiserver, f"/api/v1/namespaces/{NS}/serviceaccounts/reader/token", apiserver.token, "POST",
                   {"spec": {"expirationSeconds": 599}})
    assert expired[0] == 422
    assert "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes" in expired[1]["message"]
    audience = call(apiserver, f"/api/v1/namespaces/{NS}/serviceaccounts/reader/token", apiserver.token, "POST",
                    {"spec": {"audiences": ["vault"]}})[1]["status"]["token"]
    assert call(apiserver, "/apis", audience)[0] == 401  # a token for someone else
    assert claims["exp"] > time.time()


def test_impersonation_needs_the_impersonate_verb(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    token = setup_reader(kubectl)
    code, status = call(apiserver, f"/api/v1/namespaces/{NS}/pods", token, headers={"Impersonate-User": "alice"})
    assert code == 403
    assert status["message"] == (f'users "alice" is forbidden: User "system:serviceaccount:{NS}:reader" cannot '
                                 f'impersonate resource "users" in API group "" at the cluster scope')
    kubectl("create", "clusterrole", "impersonator", "--verb=impersonate", "--resource=users,groups")
    kubectl("create", "clusterrolebinding", "impersonator", "--clusterrole=impersonator",
            f"--serviceaccount={NS}:reader")
    code, status = call(apiserver, "/apis/authentication.k8s.io/v1/selfsubjectreviews", token, "POST",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                        headers={"Impersonate-User": "alice", "Impersonate-Group": "devs"})
    assert code == 201
    assert status["status"]["userInfo"] == {"username": "alice", "groups": ["devs", "system:authenticated"]}


def test_subject_access_review_answers_for_another_user(apiserver: ApiServerHandle, kubectl: Kubectl) -> None:
    setup_reader(kubectl)
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": f"system:serviceaccount:{NS}:reader", "groups": ["system:authenticated"],
                       "resourceAttributes": {"namespace": NS, "verb": "get", "resource": "pods", "name": "p"}}}
    code, answer = call(apiserver, "/apis/authorization.k8s.io/v1/subjectaccessreviews", apiserver.token, "POST", review)
    assert code == 201
    assert answer["status"] == {"allowed": True, "reason": f'RBAC: allowed by RoleBinding "reader/{NS}" of Role '
                                                            f'"get-pods" to ServiceAccount "reader/{NS}"'}
    review["spec"]["resourceAttributes"]["verb"] = "delete"
    assert call(apiserver, "/apis/authorization.k8s.io/v1/subjectaccessreviews", apiserver.token, "POST",
                review)[1]["status"] == {"allowed": False}


def test_rbac_objects_are_validated_as_kube_validates_them(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    no_verbs = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r", "namespace": NS},
                "rules": [{"apiGroups": [""], "resources": ["pods"]}]}
    refused = kubectl.run("apply", "-f", "-", input=json.dumps(no_verbs), check=False)
    assert 'The Role "r" is invalid: rules[0].verbs: Required value' in refused.stderr, refused.stderr
    kubectl("create", "rolebinding", "b", "--clusterrole=view", "--user=alice", "-n", NS)
    moved = kubectl.run("patch", "rolebinding", "b", "-n", NS, "--type=merge", "-p", '{"roleRef":{"name":"edit"}}',
                        check=False)
    assert "roleRef: Invalid value" in moved.stderr and "cannot change roleRef" in moved.stderr, moved.stderr


def test_the_kubernetes_service_names_the_server_and_comes_back_when_deleted(apiserver: ApiServerHandle,
                                                                            kubectl: Kubectl) -> None:
    service = kubectl.json("get", "service", "kubernetes", "-n", "default")
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": apiserver.port}]
    endpoints = kubectl.json("get", "endpoints", "kubernetes", "-n", "default")
    assert endpoints["subsets"] == [{"addresses": [{"ip": "127.0.0.1"}],
                                     "ports": [{"name": "https", "port": apiserver.port, "protocol": "TCP"}]}]
    kubectl("delete", "service", "kubernetes", "-n", "default")
    deadline = time.monotonic() + 60
    while kubectl.run("get", "service", "kubernetes", "-n", "default", check=False).returncode != 0:
        assert time.monotonic() < deadline, "the kubernetes Service did not come back"
        time.sleep(0.5)
    again = kubectl.json("get", "service", "kubernetes", "-n", "default")
    assert again["spec"]["clusterIP"] == service["spec"]["clusterIP"]


def test_kubectl_shows_role_bindings_as_kube_does(kubectl: Kubectl) -> None:
    setup_reader(kubectl)
    lines = kubectl("get", "rolebinding", "reader", "-n", NS, "-o", "wide").splitlines()
    assert lines[0].split() == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert lines[1].split()[:2] == ["reader", "Role/get-pods"] and lines[1].split()[-1] == f"{NS}/reader"
    header, row = kubectl("get", "clusterrole", "view").splitlines()
    assert header.split() == ["NAME", "CREATED", "AT"] and row.split()[0] == "view"
