"""The review kinds: questions put to the server's authentication and authorization.

``authorization.k8s.io/v1`` SelfSubjectAccessReview (``kubectl auth can-i``),
SubjectAccessReview and LocalSubjectAccessReview (may *that* user...), SelfSubjectRulesReview
(``kubectl auth can-i --list``), and ``authentication.k8s.io/v1`` SelfSubjectReview
(``kubectl auth whoami``) and TokenReview. None is stored: a create answers with the object
and its ``status`` filled in, as kube-apiserver's virtual resources do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.auth import rbac

Obj = dict[str, Any]
Decide = Callable[[Obj, Obj], rbac.Decision]
PolicyFor = Callable[[str], rbac.Policy]
Authenticate = Callable[[str], "Obj | None"]

AUTHORIZATION = "authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"
KINDS = {
    (AUTHORIZATION, "selfsubjectaccessreviews"): "SelfSubjectAccessReview",
    (AUTHORIZATION, "subjectaccessreviews"): "SubjectAccessReview",
    (AUTHORIZATION, "localsubjectaccessreviews"): "LocalSubjectAccessReview",
    (AUTHORIZATION, "selfsubjectrulesreviews"): "SelfSubjectRulesReview",
    (AUTHENTICATION, "selfsubjectreviews"): "SelfSubjectReview",
    (AUTHENTICATION, "tokenreviews"): "TokenReview",
}


def handles(group: str, plural: str) -> bool:
    return (group, plural) in KINDS


def _spec(kind: str, body: Obj) -> Obj:
    spec = body.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise errors.bad_request(f"{kind}: spec must be an object")
    return spec


def _attributes(kind: str, spec: Obj, namespace: str | None = None) -> Obj:
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (resource is None) == (non_resource is None) or not isinstance(resource or non_resource, dict):
        raise errors.invalid(kind, AUTHORIZATION, "", [Cause(
            "spec.resourceAttributes", "FieldValueInvalid",
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified")])
    if isinstance(non_resource, dict):
        return {"path": str(non_resource.get("path") or ""), "verb": str(non_resource.get("verb") or "")}
    assert isinstance(resource, dict)
    attributes = {key: str(resource.get(key) or "") for key in
                  ("namespace", "verb", "group", "version", "resource", "subresource", "name")}
    if namespace is not None:
        if attributes["namespace"] not in ("", namespace):
            raise errors.bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
        attributes["namespace"] = namespace
    return attributes


def _user_of(spec: Obj) -> Obj:
    user: Obj = {"user": str(spec.get("user") or ""), "groups": [g for g in spec.get("groups") or [] if isinstance(g, str)]}
    if spec.get("uid"):
        user["uid"] = spec["uid"]
    if isinstance(spec.get("extra"), dict):
        user["extra"] = spec["extra"]
    return user


def _answer(kind: str, group: str, body: Obj, spec: Obj, status: Obj, namespace: str | None = None) -> Obj:
    metadata: Obj = {"creationTimestamp": None}
    if namespace:
        metadata["namespace"] = namespace
    return {"kind": kind, "apiVersion": f"{group}/v1", "metadata": metadata, "spec": spec, "status": status}


def _access_status(decision: rbac.Decision) -> Obj:
    status: Obj = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return status


def user_info(user: Obj) -> Obj:
    """A user as ``authentication.k8s.io`` ``UserInfo``."""
    info: Obj = {"username": user.get("user") or ""}
    if user.get("uid"):
        info["uid"] = user["uid"]
    info["groups"] = list(user.get("groups") or [])
    if user.get("extra"):
        info["extra"] = user["extra"]
    return info


def create(group: str, plural: str, namespace: str | None, body: Any, requester: Obj, decide: Decide,
           policy_for: PolicyFor, authenticate: Authenticate) -> Obj:
    """Answer one review (the object with its status), asked by ``requester``."""
    kind = KINDS[(group, plural)]
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body of the request was in an unknown format - expected a {kind} object")
    spec = _spec(kind, body)
    if kind == "SelfSubjectAccessReview":
        return _answer(kind, group, body, spec, _access_status(decide(requester, _attributes(kind, spec))))
    if kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
        if not spec.get("user") and not spec.get("groups"):
            raise errors.invalid(kind, group, "", [Cause("spec.user", "FieldValueInvalid",
                                                         'Invalid value: "": at least one of user or group must be specified')])
        local = namespace if kind == "LocalSubjectAccessReview" else None
        return _answer(kind, group, body, spec, _access_status(decide(_user_of(spec), _attributes(kind, spec, local))), local)
    if kind == "SelfSubjectRulesReview":
        resource_rules, non_resource_rules = rbac.rules_for(policy_for(str(spec.get("namespace") or "")), requester,
                                                            str(spec.get("namespace") or ""))
        return _answer(kind, group, body, spec, {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                                                 "incomplete": False})
    if kind == "SelfSubjectReview":
        return {"kind": kind, "apiVersion": f"{group}/v1", "metadata": {"creationTimestamp": None},
                "status": {"userInfo": user_info(requester)}}
    token = str(spec.get("token") or "")
    try:
        user = authenticate(f"Bearer {token}") if token else None
    except errors.ApiError:
        user = None
    status: Obj = {"authenticated": True, "user": user_info(user)} if user else {"user": {}, "error": "invalid bearer token"}
    return _answer(kind, group, body, spec, status)
