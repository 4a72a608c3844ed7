"""Who is asking: the bearer token of a request as a user, then who that user acts as.

A client certificate the cluster CA signed (the TLS layer checked it) names the user by its
CN and the groups by its O, as kube-apiserver's x509 authenticator does: the kubelets are
``system:node:NAME`` in ``system:nodes`` that way (``pki.ensure_node``). Two kinds of bearer
token are accepted, as on a kubeadm cluster: the cluster's admin token
(``DIR/token``, written into ``DIR/kubeconfig``), user ``kubernetes-admin`` in
``system:masters``; and ServiceAccount tokens (``tokens``), user
``system:serviceaccount:<ns>:<name>`` in ``system:serviceaccounts``,
``system:serviceaccounts:<ns>`` and ``system:authenticated``. A ServiceAccount token whose
account, or bound pod, is gone or was replaced (another uid) is refused, as kube-apiserver's
token authenticator refuses it. Users are dicts shaped as a SubjectAccessReview's
``user``/``groups``/``uid``/``extra``, which is what ``rbac`` decides on.

Impersonation (``Impersonate-User``, ``-Group``, ``-Uid``, ``-Extra-*``) follows
kube-apiserver: the requester must be allowed ``impersonate`` on ``users`` (or on the
``serviceaccounts`` object for a ServiceAccount's name), ``groups``, ``uids`` and
``userextras/<key>``; the user acted as gets ``system:authenticated`` (and a ServiceAccount's
groups when none are given).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any
from urllib.parse import unquote

from multidict import CIMultiDictProxy

from trainctl.cluster.apiserver.apimachinery import errors
from trainctl.cluster.apiserver.auth import pki, rbac, tokens

Obj = dict[str, Any]

ADMIN_USER = "kubernetes-admin"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
SERVICE_ACCOUNTS = "system:serviceaccounts"
Lookup = Callable[[str, str, str], "Obj | None"]  # (storage key, namespace, name) -> object

# The user the request being served acts as, for the checks that judge a write by who makes it
# (RBAC escalation, NodeRestriction); None for the server's own writes, made for no request.
REQUESTER: ContextVar[Obj | None] = ContextVar("requester", default=None)


def service_account_groups(namespace: str) -> list[str]:
    return [SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}"]


def anonymous() -> Obj:
    return {"user": ANONYMOUS, "groups": [UNAUTHENTICATED]}


class Authenticator:
    def __init__(self, admin_token: str, issuer: tokens.TokenIssuer, lookup: Lookup) -> None:
        self._admin = f"Bearer {admin_token}".encode()
        self._issuer = issuer
        self._lookup = lookup
        self.admin: Obj = {"user": ADMIN_USER, "groups": [rbac.MASTERS, AUTHENTICATED]}
        # Signature checks cost far more than a dict lookup: remember tokens already checked
        # (bounded; the account and pod are looked up on every request all the same).
        self._verified: dict[str, Obj] = {}

    def authenticate(self, header: str, peer: Obj | None = None) -> Obj | None:
        """The user a request's verified client certificate (``peer``, as ``getpeercert()``
        gives it) or else its ``Authorization`` header names; None without credentials; 401
        (``errors.unauthorized``) for credentials that are not valid."""
        name = pki.common_name(peer)
        if name:
            return {"user": name, "groups": [*pki.organizations(peer), AUTHENTICATED]}
        if not header:
            return None
        if hmac.compare_digest(header.encode(), self._admin):
            return self.admin
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not tokens.looks_like_jwt(token):
            raise errors.unauthorized()
        user = self._service_account_user(token)
        if user is None:
            raise errors.unauthorized()
        return user

    def _claims(self, token: str) -> Obj | None:
        claims = self._verified.get(token)
        if claims is not None and claims["exp"] > time.time():
            return claims
        claims = self._issuer.verify(token)
        if claims is not None:
            if len(self._verified) >= 10_000:
                self._verified.clear()
            self._verified[token] = claims
        return claims

    def _service_account_user(self, token: str) -> Obj | None:
        claims = self._claims(token)
        if claims is None:
            return None
        private = claims["kubernetes.io"]
        namespace = private.get("namespace") or ""
        account = private["serviceaccount"]
        stored = self._lookup("/serviceaccounts", namespace, account.get("name") or "")
        if stored is None or stored["metadata"].get("uid") != account.get("uid"):
            return None
        extra: dict[str, list[str]] = {"authentication.kubernetes.io/credential-id": [f"JTI={claims.get('jti', '')}"]}
        pod = private.get("pod")
        if isinstance(pod, dict):
            bound = self._lookup("/pods", namespace, pod.get("name") or "")
            if bound is None or bound["metadata"].get("uid") != pod.get("uid"):
                return None
            extra["authentication.kubernetes.io/pod-name"] = [pod.get("name") or ""]
            extra["authentication.kubernetes.io/pod-uid"] = [pod.get("uid") or ""]
            node = private.get("node")
            if isinstance(node, dict) and node.get("name"):
                extra["authentication.kubernetes.io/node-name"] = [node["name"]]
        return {"user": f"{rbac.SERVICE_ACCOUNT_PREFIX}{namespace}:{account.get('name')}", "uid": account.get("uid"),
                "groups": [*service_account_groups(namespace), AUTHENTICATED], "extra": extra}


def impersonation(headers: CIMultiDictProxy[str], requester: Obj,
                  decide: Callable[[Obj, Obj], rbac.Decision]) -> Obj:
    """The user ``requester`` acts as by the request's Impersonate-* headers (``requester``
    itself without them); 403 for what it may not impersonate."""
    name = headers.get("Impersonate-User")
    groups = headers.getall("Impersonate-Group", [])
    uid = headers.get("Impersonate-Uid")
    extras = {key[len("Impersonate-Extra-"):]: headers.getall(key) for key in headers
              if key.lower().startswith("impersonate-extra-")}
    if name is None:
        if groups or uid is not None or extras:
            raise errors.bad_request("requested impersonation of groups, a uid or extra fields without impersonating a user")
        return requester
    wanted: list[Obj] = []
    if name.startswith(rbac.SERVICE_ACCOUNT_PREFIX) and name.count(":") == 3:
        namespace, account = name[len(rbac.SERVICE_ACCOUNT_PREFIX):].split(":")
        wanted.append({"verb": "impersonate", "group": "", "resource": "serviceaccounts", "namespace": namespace,
                       "name": account})
        if not groups:
            groups = service_account_groups(namespace)
    else:
        wanted.append({"verb": "impersonate", "group": "", "resource": "users", "name": name})
    wanted += [{"verb": "impersonate", "group": "", "resource": "groups", "name": group} for group in groups]
    if uid is not None:
        wanted.append({"verb": "impersonate", "group": "authentication.k8s.io", "resource": "uids", "name": uid})
    for key, values in extras.items():
        wanted += [{"verb": "impersonate", "group": "authentication.k8s.io", "resource": "userextras",
                    "subresource": unquote(key).lower(), "name": value} for value in values]
    for attributes in wanted:
        if not decide(requester, attributes).allowed:
            raise errors.ApiError(403, "Forbidden", rbac.forbidden_message(requester, attributes),
                                  {"name": attributes["name"], "kind": attributes["resource"]})
    groups = list(groups)
    if name != ANONYMOUS and AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    user: Obj = {"user": name, "groups": groups}
    if uid is not None:
        user["uid"] = uid
    if extras:
        user["extra"] = {unquote(key).lower(): values for key, values in extras.items()}
    return user
