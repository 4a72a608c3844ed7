"""Who may do what: the one gate every request passes, and the identity endpoints.

``Access.admit`` runs before any routing, for every path, subresources and streams
included: it authenticates the request (``authn``: a client certificate, the admin token or a
ServiceAccount token),
applies impersonation, reads what the request asks to do from its method and path
(``request_info``) and asks the Node authorizer (``node_authorizer``, for a kubelet's reads of
its pods' objects), then the RBAC authorizer (``rbac``) with the Roles and bindings as now
stored, then keeps a node's identity to its own node (``node_restriction``); a refusal is
kube-apiserver's 403. It supplies admission's ``guards``, which judge a write by who makes
it: RBAC ``escalation`` prevention and NodeRestriction. It also answers the review kinds
(``reviews``) and TokenRequests (the ``serviceaccounts/token`` subresource, ``kubectl create
token``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from typing import Any

from multidict import CIMultiDictProxy

from trainctl.cluster.apiserver.admission.admission import Guard
from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.apimachinery.errors import Cause
from trainctl.cluster.apiserver.auth import (
    authn,
    escalation,
    node_authorizer,
    node_restriction,
    rbac,
    request_info,
    reviews,
    tokens,
)
from trainctl.cluster.apiserver.storage.store import Store

Obj = dict[str, Any]

RBAC_GROUP = rbac.RBAC_GROUP
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/livez", "/version"})


def forbidden(user: Obj, attributes: Obj) -> errors.ApiError:
    details: Obj = {}
    if "path" not in attributes:
        details = {"group": attributes.get("group") or "", "kind": attributes.get("resource") or ""}
        if attributes.get("name"):
            details["name"] = attributes["name"]
    return errors.ApiError(403, "Forbidden", rbac.forbidden_message(user, attributes), details)


class Access:
    def __init__(self, store: Store, admin_token: str, issuer: tokens.TokenIssuer) -> None:
        self.store = store
        self.issuer = issuer
        self.authenticator = authn.Authenticator(admin_token, issuer, store.read)
        self.node_restriction = node_restriction.NodeRestriction(store.read)
        self.node_authorizer = node_authorizer.NodeAuthorizer(lambda namespace: store.read_list("/pods", namespace))
        # What admission asks of every write, judged by who makes it.
        self.guards: list[Guard] = [escalation.EscalationCheck(self.decide, self.policy), self.node_restriction]

    # --- every request ------------------------------------------------------------------

    def admit(self, method: str, path: str, query: Mapping[str, str], headers: CIMultiDictProxy[str],
              peer: Obj | None = None) -> Obj:
        """The user a request acts as, once it may do what it asks; 401 or 403 otherwise.
        ``peer`` is the client certificate the TLS layer verified, if any."""
        user = self.authenticator.authenticate(headers.get("Authorization", ""), peer)
        if user is None:
            raise errors.unauthorized()
        if user is not self.authenticator.admin or "Impersonate-User" in headers:
            user = authn.impersonation(headers, user, self.decide)
        if user is not self.authenticator.admin:
            attributes = request_info.attributes(method, path, query)
            if not self.decide(user, attributes).allowed:
                raise forbidden(user, attributes)
            self.node_restriction.check_request(user, attributes)
        authn.REQUESTER.set(user)
        return user

    def policy(self, namespace: str) -> rbac.Policy:
        """The RBAC objects that decide in ``namespace`` ("" : the cluster-wide ones only)."""
        read = self.store.read_list
        return rbac.Policy(
            roles=read(f"{RBAC_GROUP}/roles", namespace) if namespace else [],
            cluster_roles=read(f"{RBAC_GROUP}/clusterroles"),
            role_bindings=read(f"{RBAC_GROUP}/rolebindings", namespace) if namespace else [],
            cluster_role_bindings=read(f"{RBAC_GROUP}/clusterrolebindings"))

    def decide(self, user: Obj, attributes: Obj) -> rbac.Decision:
        if rbac.MASTERS in (user.get("groups") or []):
            return rbac.Decision(True)
        if self.node_authorizer.allows(user, attributes):
            return rbac.Decision(True)
        namespace = "" if "path" in attributes else (attributes.get("namespace") or "")
        return rbac.authorize(self.policy(namespace), user, attributes)

    # --- the identity endpoints ---------------------------------------------------------

    def review(self, group: str, plural: str, namespace: str | None, body: Any, user: Obj) -> Obj:
        return reviews.create(group, plural, namespace, body, user, self.decide, self.policy,
                              self.authenticator.authenticate)

    def token_request(self, namespace: str, name: str, body: Any) -> Obj:
        """A TokenRequest for ServiceAccount ``namespace/name``, answered with its token."""
        account = self.store.read("/serviceaccounts", namespace, name)
        if account is None:
            raise errors.not_found("serviceaccounts", "", name)
        if not isinstance(body, dict) or not isinstance(body.get("spec") or {}, dict):
            raise errors.bad_request("the body of the request was in an unknown format - expected a TokenRequest object")
        spec = dict(body.get("spec") or {})
        expiration = spec.get("expirationSeconds", tokens.DEFAULT_EXPIRATION)
        if not isinstance(expiration, int) or isinstance(expiration, bool) or expiration < tokens.MIN_EXPIRATION:
            raise _invalid_expiration(name, expiration, "may not specify a duration less than 10 minutes")
        if expiration > tokens.MAX_EXPIRATION:
            raise _invalid_expiration(name, expiration, "may not specify a duration larger than 2^32 seconds")
        audiences = [a for a in spec.get("audiences") or [] if isinstance(a, str)] or list(tokens.API_AUDIENCES)
        pod = self._bound_pod(namespace, spec.get("boundObjectRef"))
        node = node_restriction.node_of(authn.REQUESTER.get())
        if node is not None and (pod is None or (pod.get("spec") or {}).get("nodeName") != node):
            raise errors.forbidden("serviceaccounts", "", name, "node requested token not bound to a pod"
                                   if pod is None else "node requested token bound to a pod scheduled on a different node")
        issued = self.issuer.issue(account, int(time.time()), audiences=audiences, expiration_seconds=expiration, pod=pod)
        spec.update({"audiences": audiences, "expirationSeconds": expiration})
        expires = datetime.datetime.fromtimestamp(issued.expires, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        metadata = {"name": name, "namespace": namespace, "creationTimestamp": None}
        return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1", "metadata": metadata, "spec": spec,
                "status": {"token": issued.token, "expirationTimestamp": expires}}

    def _bound_pod(self, namespace: str, ref: Any) -> Obj | None:
        if ref is None:
            return None
        if not isinstance(ref, dict) or ref.get("kind") != "Pod":
            kind = ref.get("kind") if isinstance(ref, dict) else ref
            raise errors.invalid("TokenRequest", "authentication.k8s.io", "", [Cause(
                "spec.boundObjectRef.kind", "FieldValueNotSupported",
                f'Unsupported value: "{kind}": supported values: "Pod"')])
        pod = self.store.read("/pods", namespace, str(ref.get("name") or ""))
        if pod is None:
            raise errors.not_found("pods", "", str(ref.get("name") or ""))
        if ref.get("uid") and ref["uid"] != pod["metadata"].get("uid"):
            raise errors.conflict("pods", "", pod["metadata"]["name"],
                                  f"the UID in the bound object reference ({ref['uid']}) does not match the UID in "
                                  f"record. The object might have been deleted and then recreated")
        return pod


def _invalid_expiration(name: str, expiration: Any, why: str) -> errors.ApiError:
    return errors.invalid("TokenRequest", "authentication.k8s.io", name, [Cause(
        "spec.expirationSeconds", "FieldValueInvalid", f"Invalid value: {expiration}: {why}")])
